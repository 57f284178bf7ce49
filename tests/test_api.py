"""The Python API (issue 12): drawing an episode from a split, and refusing input a model cannot take."""

import jax
import numpy as np
import pytest

import fewshot
from fewshot.config import Config
from fewshot.data.split import Split
from fewshot.episodic import episodes
from fewshot.errors import ConfigError, DataError
from fewshot.training.class_draws import ClassLayout, sample_class_images


def _split(num_classes=6, per_class=5):
  labels = np.repeat(np.arange(num_classes, dtype=np.int32), per_class)
  images = np.arange(len(labels), dtype=np.uint8)[:, None, None, None] * np.ones((1, 28, 28, 1), np.uint8)
  return Split(images=images, labels=labels, class_names=tuple(f"c{i}" for i in range(num_classes)))


def test_draw_gives_an_episode_of_the_sampler_training_uses():
  split = _split()
  episode = episodes.draw(split, way=3, shot=2, query=2, seed=7)
  assert episode.support_images.shape == (6, 28, 28, 1) and episode.query_images.shape == (6, 28, 28, 1)
  assert isinstance(episode.support_images, np.ndarray) and episode.support_images.dtype == np.uint8
  np.testing.assert_array_equal(episode.support_labels, [0, 0, 1, 1, 2, 2])
  np.testing.assert_array_equal(episode.query_labels, [0, 0, 1, 1, 2, 2])
  # The images are those training's draw picks with the same key, class-major, support first.
  classes, indices = sample_class_images(jax.random.key(7), ClassLayout.from_split(split), 3, 4)
  np.testing.assert_array_equal(episode.classes, classes)
  picked = np.asarray(indices)
  np.testing.assert_array_equal(episode.support_images[:, 0, 0, 0], picked[:, :2].ravel())
  np.testing.assert_array_equal(episode.query_images[:, 0, 0, 0], picked[:, 2:].ravel())
  assert len({int(i) for i in picked.ravel()}) == 12  # distinct images
  for k, c in enumerate(np.asarray(classes)):  # each episode class's images are of its split class
    assert set(split.labels[picked[k]]) == {c}
  same = episodes.draw(split, way=3, shot=2, query=2, seed=7)
  np.testing.assert_array_equal(same.query_images, episode.query_images)


def test_draw_refuses_an_episode_the_split_cannot_supply():
  with pytest.raises(DataError, match="lower shot or query so they sum to 5 or less"):
    episodes.draw(_split(), way=2, shot=3, query=3)
  with pytest.raises(DataError, match="use way 6 or less"):
    episodes.draw(_split(), way=7, shot=1, query=1)


@pytest.fixture(scope="module")
def model():
  return fewshot.build(Config())


@pytest.mark.parametrize("shape", [(2, 28, 28, 3), (2, 84, 84, 1), (28, 28, 1)])
def test_embed_refuses_images_of_the_wrong_shape(model, shape):
  with pytest.raises(ConfigError, match=r"images must be \[n, 28, 28, 1\] \(strokes images .*\), got shape"):
    model.embed(np.zeros(shape, np.uint8))
  assert model.embed(np.zeros((2, 28, 28, 1), np.uint8)).shape == (2, 64)


@pytest.mark.parametrize("labels, fragment", [
    ([0, 2, 5], "episode labels 0..way-1 with every class present, got classes 0, 2, 5"),
    ([1, 2, 3], "got classes 1, 2, 3"),
    ([0, 1], "one integer label per support image (3)"),
    ([0.0, 1.0, 2.0], "dtype float64"),
])
def test_probabilities_refuse_labels_that_are_not_episode_labels(model, labels, fragment):
  images = np.zeros((3, 28, 28, 1), np.uint8)
  with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
    model.probabilities(images, labels, images)
  assert model.probabilities(images, [2, 0, 1], images).shape == (3, 3)
