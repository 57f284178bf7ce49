"""The compiled chunk equals the same steps taken one by one; diagnostics are of the last update."""

import functools

import jax
import numpy as np
import pytest
from flax.traverse_util import flatten_dict

from fewshot.backbones import Conv4
from fewshot.data.split import Split
from fewshot.episodic import diagnostics, learning
from fewshot.episodic.episodes import EpisodeShape, sample_episode
from fewshot.episodic.learning import EpisodicLearner
from fewshot.training.sources import DeviceSource


@pytest.fixture(scope="module")
def source():
  rng = np.random.default_rng(0)
  labels = np.repeat(np.arange(12), 8).astype(np.int32)
  images = rng.integers(0, 256, (len(labels), 28, 28, 1), dtype=np.uint8)
  return DeviceSource.from_split(Split(images, labels, tuple(f"c{i}" for i in range(12))))


@pytest.mark.parametrize(
    "head, classifier, psi_classifier, psi_distance",
    [("dr", "proto", "model", "proto"), pytest.param("dr", "nn", "proto", "proto", marks=pytest.mark.slow),  # 9 s
     pytest.param("softmax", "nn", "model", "nn", marks=pytest.mark.slow)],  # 13 s: the default tier's 5 minutes
)
def test_chunk_equals_steps_and_diagnoses_the_last_update(source, head, classifier, psi_classifier, psi_distance):
  shape = EpisodeShape(3, 2, 2)
  learner = EpisodicLearner(Conv4(features=8), shape, head=head, classifier=classifier, psi_classifier=psi_classifier)
  key = jax.random.key(1)
  start = learning.init_state(learner, jax.random.key(0), (28, 28, 1))

  # Each step compiled alone (op by op, a backward pass takes seconds per step), not in the chunk's scan.
  step = jax.jit(functools.partial(learning.train_step, learner))
  embed = jax.jit(functools.partial(learning.episode_embeddings, learner, train=True))
  state = start
  for i in range(3):
    episode = sample_episode(jax.random.fold_in(key, i), source, shape)
    previous = state
    state, metrics, _ = step(state, episode)
  # Independent diagnostics of the last update: embed before and after, as the paper does.
  before_s, before_q, _ = embed(previous.params, previous.batch_stats, episode)
  after_s, after_q, _ = embed(state.params, previous.batch_stats, episode)
  expected = diagnostics.episode_diagnostics(before_s, before_q, after_s, after_q, episode.support_labels,
                                             episode.query_labels, 3, classifier=psi_distance)

  chunk_state, chunk_metrics, diagnosed = learning.train_chunk(learner, jax.tree.map(lambda x: x.copy(), start), source,
                                                                key, 3)
  assert int(chunk_state.step) == 3
  np.testing.assert_allclose(chunk_metrics["loss"][-1], metrics["loss"], rtol=1e-4)
  got, want = flatten_dict(chunk_state.params), flatten_dict(state.params)
  for name in want:
    # A conv bias feeding BatchNorm has a gradient of pure rounding noise, which Adam
    # turns into steps of size lr of either sign: compare it only to that scale.
    atol = 2 * 3 * 1.01e-3 if name[-1] == "bias" else 1e-5
    np.testing.assert_allclose(got[name], want[name], rtol=1e-3, atol=atol, err_msg=str(name))
  # Diagnosing does not touch the running statistics (a second momentum update would move
  # the means by ~5e-3; the bias noise above moves them by < 1e-3).
  for a, b in zip(jax.tree.leaves(chunk_state.batch_stats), jax.tree.leaves(state.batch_stats)):
    np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3)
  assert set(diagnosed) == set(diagnostics.FIELDS)
  for name in diagnostics.FIELDS:
    assert np.isfinite(diagnosed[name]), name
    np.testing.assert_allclose(diagnosed[name], expected[name], rtol=2e-3, err_msg=name)


def test_evaluation_uses_running_statistics(source):
  shape = EpisodeShape(3, 1, 2)
  learner = EpisodicLearner(Conv4(features=8), shape)
  state = learning.init_state(learner, jax.random.key(0), (28, 28, 1))
  state, _, _ = learning.train_chunk(learner, state, source, jax.random.key(1), 2)
  variables = learning.model_variables(state)
  accuracies = np.asarray(learning.episode_accuracies(learner, variables, source, jax.random.key(2), 4, shape))
  # One compiled program per step (op by op, these took most of the test's time).
  draw = jax.jit(lambda key: sample_episode(key, source, shape))
  embeddings = jax.jit(lambda params, stats, episode: learning.episode_embeddings(learner, params, stats, episode,
                                                                                  train=False))
  head = jax.jit(lambda params, support, query, episode: learning.logits(learner, params, support, query, episode))
  for i, accuracy in enumerate(accuracies):
    episode = draw(jax.random.fold_in(jax.random.key(2), i))
    support, query, stats = embeddings(state.params, state.batch_stats, episode)
    jax.tree.map(np.testing.assert_array_equal, stats, state.batch_stats)  # evaluation leaves them as they were
    logits = np.asarray(head(state.params, support, query, episode))
    assert accuracy == pytest.approx(np.mean(logits.argmax(1) == np.asarray(episode.query_labels)))
  # Evaluation mode: an episode's embeddings do not depend on which other images share the batch.
  alone, _ = learning.embed(learner, state.params, state.batch_stats, episode.query_images[:1], train=False)
  np.testing.assert_allclose(alone, query[:1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("group", [False, True])
def test_a_reported_test_runs_in_spans_with_the_same_accuracies_as_one_chunk(source, group):
  """Issue 56: a seed group's shifted test ran for minutes without a line; reported, its episodes run in spans,
  each episode keyed and drawn by its index, so the accuracies are those of one chunk, and progress counts them.
  """
  from fewshot.training.seed_groups import SeedGroup  # noqa: PLC0415

  shape = EpisodeShape(3, 1, 2)
  learner = EpisodicLearner(Conv4(features=8), shape)
  runs = [learning.model_variables(learning.init_state(learner, jax.random.key(s), (28, 28, 1))) for s in (0, 1)]
  keys = [jax.random.key(2), jax.random.key(3)]
  if group:
    stacked = SeedGroup.over(2)
    variables, key = stacked.stack(runs), stacked.stack(keys)
  else:
    variables, key = runs[0], keys[0]
  whole = np.asarray(learning.episode_accuracies(learner, variables, source, key, 7, shape, 1))
  told = []
  spans = np.asarray(learning.episode_accuracies(learner, variables, source, key, 7, shape, 1,
                                                 lambda done, total: told.append((done, total))))
  np.testing.assert_array_equal(spans, whole)
  assert whole.shape == ((2, 7) if group else (7,))
  assert told == [(1, 7), (2, 7), (3, 7), (4, 7), (5, 7), (6, 7), (7, 7)]  # ten spans of 7: one episode each
