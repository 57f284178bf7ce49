"""The metric-learning evaluators' few-shot episodes: nearest-prototype accuracy against numpy and closed forms."""

import jax
import numpy as np
import pytest

from fewshot.data.split import Split
from fewshot.dml import evaluators
from fewshot.training import class_draws

CLASSES, PER_CLASS, DIM = 7, 9, 5


def _layout(counts=(PER_CLASS,) * CLASSES):
  labels = np.repeat(np.arange(len(counts)), counts).astype(np.int32)
  split = Split(np.zeros((len(labels), 1, 1, 1), np.uint8), labels, tuple(f"c{i}" for i in range(len(counts))))
  return class_draws.ClassLayout.from_split(split), labels


def _numpy_accuracies(embeddings, layout, key, episodes, way, shot, query):
  """The same episodes (the draw's indices taken from the one sampler) scored in float64 numpy."""
  out = []
  for i in range(episodes):
    _, indices = class_draws.sample_class_images(jax.random.fold_in(key, i), layout, way, shot + query)
    drawn = embeddings[np.asarray(indices)].astype(np.float64)
    prototypes = drawn[:, :shot].mean(axis=1)
    queries = drawn[:, shot:].reshape(way * query, -1)
    d = ((queries[:, None, :] - prototypes[None, :, :]) ** 2).sum(-1)
    out.append(np.mean(d.argmin(1) == np.repeat(np.arange(way), query)))
  return np.array(out)


@pytest.mark.parametrize("way, shot, query", [(5, 1, 3), (3, 2, 4), (7, 4, 5)])
def test_nearest_prototype_accuracy_is_numpy_s_on_the_same_episodes(way, shot, query):
  layout, _ = _layout()
  embeddings = np.random.default_rng(0).normal(size=(CLASSES * PER_CLASS, DIM)).astype(np.float32)
  key = jax.random.key(3)
  got = evaluators.prototype_accuracies(embeddings, layout, key, 40, way, shot, query)
  np.testing.assert_allclose(got, _numpy_accuracies(embeddings, layout, key, 40, way, shot, query), atol=1e-7)
  assert 0.05 < got.std()  # random embeddings: the episodes differ, so the draw is not one episode repeated


def test_embeddings_that_separate_the_classes_score_every_query_and_equal_ones_score_the_first_class():
  layout, labels = _layout()
  one_hot = np.eye(CLASSES, DIM + CLASSES, dtype=np.float32)[labels]
  assert np.all(evaluators.prototype_accuracies(one_hot, layout, jax.random.key(0), 25, 5, 1, 4) == 1.0)
  # All distances tie: argmin answers the first prototype, so exactly one class in `way` is right.
  same = np.ones((len(labels), DIM), np.float32)
  np.testing.assert_array_equal(evaluators.prototype_accuracies(same, layout, jax.random.key(0), 25, 5, 1, 4),
                                np.float32(0.2))


def test_the_summary_is_the_mean_and_normal_interval_in_percent():
  summary = evaluators.episodes_summary(np.array([0.5, 1.0, 0.75, 0.25]))
  values = 100 * np.array([0.5, 1.0, 0.75, 0.25])
  assert summary["test_accuracy"] == pytest.approx(values.mean())
  assert summary["test_ci95"] == pytest.approx(1.96 * values.std() / 2)
  assert summary["test_episodes"] == 4
