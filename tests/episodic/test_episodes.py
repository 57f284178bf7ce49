"""The episode sampler on a split whose pixels name their image: shapes, labels, distinctness, coverage."""

import functools

import jax
import numpy as np
import pytest

from fewshot.data.split import Split
from fewshot.episodic import episodes
from fewshot.episodic.episodes import EpisodeShape
from fewshot.errors import DataError
from fewshot.training import class_draws, sources

NUM_CLASSES = 7
COUNTS = np.array([5 + i for i in range(NUM_CLASSES)])  # 5..11 images: every class a different size
OFFSETS = np.concatenate([[0], np.cumsum(COUNTS)[:-1]])
CLASS_OF = np.repeat(np.arange(NUM_CLASSES), COUNTS)  # class of each global image index


def make_split():
  """Image ``i`` is 28x28x1 filled with the value ``i``, so a drawn image tells its global index."""
  n = int(COUNTS.sum())
  images = np.broadcast_to(np.arange(n, dtype=np.uint8)[:, None, None, None], (n, 28, 28, 1)).copy()
  return Split(images=images, labels=CLASS_OF.astype(np.int32), class_names=tuple(f"class{c}" for c in range(NUM_CLASSES)))


SPLIT = make_split()
SOURCE = sources.DeviceSource.from_split(SPLIT)
sample = jax.jit(episodes.sample_episode, static_argnums=2)
N_EPISODES = 500


@functools.lru_cache(maxsize=None)
def sample_many(shape, n=N_EPISODES, seed=0):
  """Episodes for the keys ``split(key(seed), n)``, as numpy arrays with a leading episode axis.

  ``lax.map`` rather than ``vmap``: it compiles the sampler once, about 3x faster on CPU.
  """
  keys = jax.random.split(jax.random.key(seed), n)
  draw = jax.jit(lambda keys, source: jax.lax.map(lambda k: episodes.sample_episode(k, source, shape), keys))
  return jax.tree.map(np.asarray, draw(keys, SOURCE))


def index_of(images):
  """Global image indices from images ``[..., 28, 28, 1]``, checking that each image is constant."""
  images = np.asarray(images)
  first = images[..., :1, :1, :]
  assert np.all(images == first)
  return first[..., 0, 0, 0].astype(np.int64)


def test_source_describes_the_split():
  assert SOURCE.num_classes == NUM_CLASSES
  assert SOURCE.layout.max_count == COUNTS.max()
  np.testing.assert_array_equal(np.asarray(SOURCE.layout.class_counts), COUNTS)
  np.testing.assert_array_equal(np.asarray(SOURCE.layout.class_offsets), OFFSETS)


def all_distinct(a):
  """Whether each row of ``a`` has distinct entries."""
  a = np.sort(a, axis=-1)
  return np.all(a[..., 1:] > a[..., :-1])


# 5w1s4q: shot + query = 5 = the smallest class; 7w2s3q: every class in every episode.
SHAPES = [EpisodeShape(5, 1, 4), EpisodeShape(3, 2, 3), EpisodeShape(7, 2, 3), EpisodeShape(1, 3, 2)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s.way}w{s.shot}s{s.query}q")
def test_episode_shapes_labels_and_contents(shape):
  eps = sample_many(shape)
  n, way, shot, query = N_EPISODES, shape.way, shape.shot, shape.query
  assert eps.support_images.shape == (n, way * shot, 28, 28, 1) and eps.support_images.dtype == np.uint8
  assert eps.query_images.shape == (n, way * query, 28, 28, 1) and eps.query_images.dtype == np.uint8
  assert eps.classes.shape == (n, way)
  np.testing.assert_array_equal(eps.support_labels, np.tile(np.repeat(np.arange(way), shot), (n, 1)))
  np.testing.assert_array_equal(eps.query_labels, np.tile(np.repeat(np.arange(way), query), (n, 1)))
  classes = eps.classes
  assert all_distinct(classes)  # distinct classes in each episode ...
  assert classes.min() >= 0 and classes.max() < NUM_CLASSES  # ... all of the split
  support, queries = index_of(eps.support_images), index_of(eps.query_images)
  # Distinct images in each episode: no duplicates, support and query disjoint.
  assert all_distinct(np.concatenate([support, queries], axis=1))
  # Every image comes from the class its label names (so never past that class's own images).
  np.testing.assert_array_equal(CLASS_OF[support], np.take_along_axis(classes, eps.support_labels, axis=1))
  np.testing.assert_array_equal(CLASS_OF[queries], np.take_along_axis(classes, eps.query_labels, axis=1))


def test_same_key_same_episode_different_keys_different_episodes():
  shape = EpisodeShape(3, 2, 3)
  keys = jax.random.split(jax.random.key(0), N_EPISODES)  # the keys of sample_many(shape)
  a, b = sample(keys[7], SOURCE, shape), sample(keys[7], SOURCE, shape)
  batch = sample_many(shape)
  for field in ("support_images", "query_images", "support_labels", "query_labels", "classes"):
    np.testing.assert_array_equal(np.asarray(getattr(a, field)), np.asarray(getattr(b, field)))
    # The same episode again from a separately compiled program (the batched sampler).
    np.testing.assert_array_equal(np.asarray(getattr(a, field)), getattr(batch, field)[7])
  drawn = np.concatenate([index_of(batch.support_images), index_of(batch.query_images)], axis=1)
  assert len({tuple(row) for row in drawn.tolist()}) == N_EPISODES


def chi_square(observed, expected):
  return float(np.sum((observed - expected) ** 2 / expected))


def loose_bound(df):
  """Far in the upper tail of chi-square(df): mean + 6 standard deviations."""
  return df + 6 * np.sqrt(2 * df)


def test_sampler_covers_the_split_uniformly():
  shape = EpisodeShape(5, 1, 4)  # shot + query = 5 = the smallest class
  eps = sample_many(shape)
  support, queries = index_of(eps.support_images), index_of(eps.query_images)
  drawn = np.concatenate([support, queries], axis=1).ravel()
  # Classes: each is in an episode with probability way / num_classes.
  class_freq = np.bincount(eps.classes.ravel(), minlength=NUM_CLASSES)
  assert chi_square(class_freq, np.full(NUM_CLASSES, N_EPISODES * shape.way / NUM_CLASSES)) < loose_bound(NUM_CLASSES - 1)
  # Images: given its class, each of a class's images is among the 5 drawn with probability 5 / count.
  image_freq = np.bincount(drawn, minlength=len(CLASS_OF))
  assert len(image_freq) == len(CLASS_OF)  # nothing past the last image
  assert image_freq.min() > 0  # every image of every class is eventually drawn (expected >= 160 times)
  expected = class_freq[CLASS_OF] * shape.per_class / COUNTS[CLASS_OF]
  assert chi_square(image_freq, expected) < loose_bound(len(CLASS_OF) - NUM_CLASSES)
  # The smallest class: all of its images, every time it is drawn.
  np.testing.assert_array_equal(image_freq[CLASS_OF == 0], class_freq[0])
  # Support or query is a fair split: a drawn image lands in the support 1 time in 5.
  p = shape.shot / shape.per_class
  support_freq = np.bincount(support.ravel(), minlength=len(CLASS_OF))
  assert support_freq.sum() == p * image_freq.sum()
  assert chi_square(support_freq, p * image_freq) + chi_square(image_freq - support_freq, (1 - p) * image_freq) < loose_bound(len(CLASS_OF))


# ----------------------------------------------------------------------------- errors


def fits(split, shape, name):
  class_draws.check_fits(split, name, ("--way", shape.way), {"--shot": shape.shot, "--query": shape.query})


def test_check_fits_accepts_the_largest_shapes_that_fit():
  fits(SPLIT, EpisodeShape(NUM_CLASSES, 2, 3), "train")  # way = classes, shot + query = smallest


def test_check_fits_rejects_too_many_ways_with_the_fix():
  with pytest.raises(DataError) as info:
    fits(SPLIT, EpisodeShape(NUM_CLASSES + 1, 1, 1), "val")
  message = str(info.value)
  assert f"--way {NUM_CLASSES} or less" in message and "val" in message and "\n" not in message


def test_check_fits_rejects_too_small_classes_with_the_fix():
  with pytest.raises(DataError) as info:
    fits(SPLIT, EpisodeShape(2, 2, 4), "test")
  message = str(info.value)
  assert "'class0'" in message  # the smallest class, by name
  assert "only 5 images" in message and "2 + 4" in message
  assert "lower --shot or --query" in message and "sum to 5 or less" in message
  assert "\n" not in message


@pytest.mark.parametrize("way,shot,query", [(0, 1, 1), (1, 0, 1), (1, 1, 0), (-2, 1, 1)])
def test_episode_shape_rejects_non_positive_sizes(way, shot, query):
  bad = next(name for name, v in (("way", way), ("shot", shot), ("query", query)) if v < 1)
  with pytest.raises(ValueError, match=f"--{bad} must be a positive integer"):
    EpisodeShape(way, shot, query)


def test_grouped_draws_take_every_episode_s_classes_from_one_large_enough_group():
  groups = np.array([0, 1, 1, 2, 2, 2, 1], np.int32)  # group 0 has one class: too small for 2-way episodes
  grouped = sources.DeviceSource.from_split(SPLIT, superclasses=groups)
  keys = jax.random.split(jax.random.key(3), N_EPISODES)
  shape = EpisodeShape(2, 1, 4)
  draw = jax.jit(lambda keys, source: jax.lax.map(lambda k: episodes.sample_episode(k, source, shape), keys))
  eps = jax.tree.map(np.asarray, draw(keys, grouped))
  drawn_groups = groups[eps.classes]
  assert np.all(drawn_groups == drawn_groups[:, :1]) and np.all(eps.classes[:, 0] != eps.classes[:, 1])
  # A group in proportion to its classes (3 and 3 of the 6 in groups 1 and 2), then a uniform pair within it.
  group_freq = np.bincount(drawn_groups[:, 0], minlength=3)
  assert group_freq[0] == 0 and chi_square(group_freq[1:], np.full(2, N_EPISODES / 2)) < loose_bound(1)
  class_freq = np.bincount(eps.classes.ravel(), minlength=NUM_CLASSES)
  expected = np.where(groups == 0, 0, 2 * group_freq[groups] / 3)
  assert class_freq[0] == 0 and chi_square(class_freq[1:], expected[1:]) < loose_bound(NUM_CLASSES - 3)
  # The images of a drawn class are still the class's own.
  np.testing.assert_array_equal(CLASS_OF[index_of(eps.support_images)], eps.classes)
  with pytest.raises(DataError, match="larger than the largest superclass .alphabet. of the train split .3 classes.*--way 3 or less"):
    class_draws.check_superclasses_fit(groups, "train", "--way", 4)
  class_draws.check_superclasses_fit(groups, "train", "--way", 3)
