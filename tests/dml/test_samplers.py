"""The C x M batch sampler and N-pair hard negative class mining, against direct numpy checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot.data.split import Split
from fewshot.dml import miners, samplers
from fewshot.dml.samplers import BatchShape
from fewshot.errors import DataError
from fewshot.training import class_draws
from fewshot.training.sources import DeviceSource

COUNTS = (6, 2, 5, 7, 4, 6)


def _split(counts=COUNTS):
  labels = np.repeat(np.arange(len(counts)), counts).astype(np.int32)
  # Each image's single pixel is its own index, so a batch says which images it holds.
  images = np.arange(len(labels), dtype=np.uint8).reshape(-1, 1, 1, 1)
  return Split(images=images, labels=labels, class_names=tuple(f"c{i}" for i in range(len(counts))))


SAMPLE = jax.jit(samplers.sample_batch, static_argnums=2)


@pytest.mark.parametrize("classes,per_class", [(4, 2), (6, 1), (3, 4)])
def test_batch_is_c_classes_by_m_images_of_those_classes(classes, per_class):
  split = _split()
  source, shape = DeviceSource.from_split(split), BatchShape(classes, per_class)
  for seed in range(5):
    batch = SAMPLE(jax.random.key(seed), source, shape)
    images, labels = np.asarray(batch.images).reshape(-1), np.asarray(batch.labels)
    assert images.shape == labels.shape == (shape.size,)
    np.testing.assert_array_equal(split.labels[images], labels)  # every image is of its label's class
    per_class_labels = labels.reshape(classes, per_class)
    assert (per_class_labels == per_class_labels[:, :1]).all()
    assert len(set(per_class_labels[:, 0])) == classes
    for c, row in zip(per_class_labels[:, 0], images.reshape(classes, per_class)):
      if COUNTS[c] >= per_class:
        assert len(set(row)) == per_class  # distinct while the class has enough images


def test_small_class_repeats_each_of_its_images_equally():
  split = _split((2, 8, 8))
  source, shape = DeviceSource.from_split(split), BatchShape(3, 4)
  batch = SAMPLE(jax.random.key(0), source, shape)
  labels, images = np.asarray(batch.labels), np.asarray(batch.images).reshape(-1)
  small = images[labels == 0]
  assert sorted(small.tolist()) == [0, 0, 1, 1]


def test_batches_are_seeded_and_vary_with_the_key():
  source, shape = DeviceSource.from_split(_split()), BatchShape(3, 2)
  a, b = SAMPLE(jax.random.key(1), source, shape), SAMPLE(jax.random.key(1), source, shape)
  np.testing.assert_array_equal(a.images, b.images)
  draws = {tuple(np.asarray(SAMPLE(jax.random.key(s), source, shape).images).ravel()) for s in range(10)}
  assert len(draws) > 5


def test_more_classes_than_the_split_is_a_one_line_error():
  with pytest.raises(DataError, match="use --classes 6 or less") as info:
    class_draws.check_fits(_split(), "train", ("--classes", 7))
  assert "\n" not in str(info.value)
  with pytest.raises(ValueError, match="per_class"):
    BatchShape(2, 0)


def _greedy_classes(first, embeddings, n):
  """Sohn (2016) Sec. 3.2.2 written as loops: add the class violating the triplet constraint most."""
  pool = len(embeddings)
  chosen = [first]
  while len(chosen) < n:
    best, best_violation = None, -np.inf
    for c in range(pool):
      if c in chosen:
        continue
      violation = max(
          embeddings[s, 0] @ x - embeddings[s, 0] @ embeddings[s, -1] for s in chosen for x in embeddings[c]
      )
      if violation > best_violation:
        best, best_violation = c, violation
    chosen.append(best)
  return chosen


@pytest.mark.parametrize("per_class", [1, 2])
def test_hard_negative_classes_match_the_greedy_loop(per_class):
  rng = np.random.default_rng(per_class)
  embeddings = rng.normal(size=(12, per_class, 5)).astype(np.float32)
  mine = jax.jit(miners.hard_negative_classes, static_argnums=2)
  for seed in range(3):
    key = jax.random.key(seed)
    got = np.asarray(mine(key, jnp.asarray(embeddings), 6))
    assert len(set(got.tolist())) == 6
    np.testing.assert_array_equal(got, _greedy_classes(int(got[0]), embeddings.astype(np.float64), 6))


def test_hard_negative_classes_pick_the_confusable_ones():
  # Classes 0-2 sit together, 3-5 far apart: starting in the cluster, the next two are its members.
  centres = np.array([[1, 0, 0], [1, 0.05, 0], [1, 0, 0.05], [-1, 0, 0], [0, 1, 0], [0, -1, 0]], np.float32)
  embeddings = np.stack([centres, centres], axis=1)
  orders = [np.asarray(miners.hard_negative_classes(jax.random.key(s), jnp.asarray(embeddings), 3)) for s in range(12)]
  in_cluster = [order for order in orders if order[0] <= 2]
  assert in_cluster, "no seed started in the cluster"
  for order in in_cluster:
    assert set(order.tolist()) == {0, 1, 2}


def test_hard_negative_classes_reject_more_classes_than_the_pool():
  with pytest.raises(ValueError, match="cannot choose 5 classes from a pool of 4"):
    miners.hard_negative_classes(jax.random.key(0), jnp.zeros((4, 2, 3)), 5)
