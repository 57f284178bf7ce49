"""Test episodes over a split embedded once score exactly the episodes embedded one by one.

The paths differ only in the batch each image is embedded in, which moves embeddings by
float rounding (checked below to 1e-5 relative); the head's argmax decisions, and so the
per-episode accuracies, are then identical, and are compared exactly.
"""

import jax
import numpy as np
import pytest

from fewshot.augment import Augmentation
from fewshot.backbones import Conv4
from fewshot.config import Config
from fewshot.episodic import cached_episodes, learning
from fewshot.episodic.episodes import EpisodeShape
from fewshot.episodic.learning import EpisodicLearner
from fewshot.errors import ConfigError
from fewshot.evaluate import evaluate
from fewshot.train import train
from fewshot.training import sources
from fewshot.training.class_draws import sample_class_images
from fewshot.training.sources import DeviceSource, HostSource

from model_fixtures import moved_variables, random_split

EPISODES = 40


@pytest.mark.parametrize(
    "head, classifier, stored, augmentation, test_shifts",
    [("softmax", "proto", (28, 28, 1), Augmentation(), 0),
     pytest.param("dr", "nn", (28, 28, 1), Augmentation(), 0, marks=pytest.mark.slow),  # 6 s
     # Each image embedded as the mean over its 9 shifts by up to one pixel, in both paths.
     pytest.param("softmax", "proto", (28, 28, 1), Augmentation(), 1, marks=pytest.mark.slow),
     # An image dataset: stored at 18 px, evaluated through resize + centre crop to 16 px + normalisation.
     ("dr", "proto", (18, 18, 3), Augmentation.for_dataset(16, 3, True, False), 0)],
)
def test_cached_episodes_equal_per_episode_episodes(head, classifier, stored, augmentation, test_shifts):
  split, shape = random_split(stored), EpisodeShape(4, 2, 3)
  learner = EpisodicLearner(Conv4(features=8), shape, head=head, classifier=classifier, augmentation=augmentation)
  input_shape = (16, 16, 3) if augmentation.enabled else stored
  variables, key = moved_variables(learner, input_shape), jax.random.key(2)
  per_episode = np.asarray(learning.episode_accuracies(learner, variables, DeviceSource.from_split(split), key, EPISODES, shape,
                                                        test_shifts))

  # 90 images in chunks of 32: the last chunk is padded.
  embeddings = cached_episodes.embed_split(learner, variables, split.images, batch=32, shifts=test_shifts)
  assert embeddings.shape == (len(split.labels), 8)
  cached = np.asarray(cached_episodes.cached_episode_accuracies(learner, variables, embeddings, DeviceSource.from_split(split).layout,
                                                  key, EPISODES, shape))
  assert cached.shape == (EPISODES,) and len(set(cached.tolist())) > 1, "the check needs varied accuracies"
  np.testing.assert_array_equal(cached, per_episode)

  # The embeddings gathered for an episode are those the per-episode path computes for it.
  _, indices = sample_class_images(jax.random.fold_in(key, 7), DeviceSource.from_split(split).layout, shape.way,
                                   shape.per_class)
  alone = learning.eval_embeddings(learner, variables, split.images[np.asarray(indices).reshape(-1)], test_shifts)
  np.testing.assert_allclose(np.asarray(embeddings)[np.asarray(indices).reshape(-1)], alone, rtol=1e-5, atol=1e-5)

  # A split in host memory embeds alike; small blocks of episodes give the same accuracies.
  host = HostSource(split)
  np.testing.assert_array_equal(cached_episodes.embed_split(learner, variables, host.images, batch=32,
                                                            shifts=test_shifts), embeddings)
  blocked = cached_episodes.BLOCK_FLOATS
  try:
    cached_episodes.BLOCK_FLOATS = 7 * shape.way * shape.per_class * 8  # blocks of 7 episodes, the last padded
    small = cached_episodes.cached_episode_accuracies(learner, variables, embeddings, host.layout, key, EPISODES, shape)
  finally:
    cached_episodes.BLOCK_FLOATS = blocked
  np.testing.assert_array_equal(np.asarray(small), per_episode)


def test_a_shifted_test_embeds_only_the_images_its_episodes_draw_and_scores_what_each_episode_apart_scores():
  """--test_shifts' test: each drawn image embedded once, at the cost of the images drawn, to the same accuracies."""
  split, shape = random_split((16, 16, 1), classes=12, per_class=6), EpisodeShape(3, 1, 2)
  learner = EpisodicLearner(Conv4(features=8), shape, head="dr")
  variables, key, episodes = moved_variables(learner, (16, 16, 1)), jax.random.key(5), 8
  source = DeviceSource.from_split(split)
  per_episode = np.asarray(learning.episode_accuracies(learner, variables, source, key, episodes, shape, 1))
  draws = [np.asarray(sample_class_images(jax.random.fold_in(key, i), source.layout, shape.way, shape.per_class)[1])
           for i in range(episodes)]
  expected = np.unique(np.concatenate([d.reshape(-1) for d in draws]))
  drawn = sources.drawn_images(source.layout, key, episodes, shape.way, shape.per_class)
  np.testing.assert_array_equal(drawn, expected)
  np.testing.assert_array_equal(sources.drawn_indices(source.layout, key, episodes, shape.way, shape.per_class),
                                np.stack(draws))  # each episode's draw, in its order (what torch_parity replays)
  assert len(drawn) < len(split.labels), "the check needs images that no episode draws"
  embedded = []
  real = cached_episodes.embed_split
  try:  # what is embedded: exactly the drawn images, each once
    cached_episodes.embed_split = lambda learner, variables, images, **kw: embedded.append(np.asarray(images)) or real(
        learner, variables, images, **kw)
    got = np.asarray(cached_episodes.drawn_episode_accuracies(learner, variables, source.images, source.layout, key,
                                                              episodes, shape, 1))
  finally:
    cached_episodes.embed_split = real
  assert len(embedded) == 1
  np.testing.assert_array_equal(embedded[0], split.images[expected])
  assert len(set(per_episode.tolist())) > 1, "the check needs varied accuracies"
  np.testing.assert_array_equal(got, per_episode)
  host = HostSource(split)
  np.testing.assert_array_equal(cached_episodes.drawn_episode_accuracies(learner, variables, host.images, host.layout,
                                                                         key, episodes, shape, 1), per_episode)


@pytest.mark.slow
def test_evaluate_reports_the_cached_test_beside_the_per_episode_one(tmp_path):
  tiny = dict(way=3, shot=1, query=2, test_query=3, episodes=2, eval_every=2, val_episodes=2, test_episodes=30)
  results = train(Config(dataset="strokes", **tiny), tmp_path / "run", progress=False)
  both = evaluate(str(tmp_path / "run"), test_by="both")
  assert both["test_accuracy"] == results["test_accuracy"] and both["test_episodes"] == 30
  assert both["cached_test_accuracy"] == pytest.approx(both["test_accuracy"], abs=1e-9)
  assert both["cached_test_ci95"] == pytest.approx(both["test_ci95"], abs=1e-9)
  many = evaluate(str(tmp_path / "run"), test_by="cached", cached_episodes=3000)
  assert many["test_by"] == "cached" and many["test_episodes"] == 3000 and "cached_test_accuracy" not in many
  with pytest.raises(ConfigError, match="--cached_episodes"):
    evaluate(str(tmp_path / "run"), cached_episodes=100)
