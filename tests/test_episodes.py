"""The episode sampler on a split whose pixels name their image: shapes, labels, distinctness, coverage."""

import functools

import jax
import numpy as np
import pytest

from fewshot import episodes
from fewshot.data.split import DataError, Split
from fewshot.episodes import EpisodeShape

NUM_CLASSES = 7
COUNTS = np.array([5 + i for i in range(NUM_CLASSES)])  # 5..11 images: every class a different size
OFFSETS = np.concatenate([[0], np.cumsum(COUNTS)[:-1]])
CLASS_OF = np.repeat(np.arange(NUM_CLASSES), COUNTS)  # class of each global image index


def make_split():
  """Image ``i`` is 28x28x1 filled with the value ``i``, so a drawn image tells its global index."""
  n = int(COUNTS.sum())
  images = np.broadcast_to(np.arange(n, dtype=np.uint8)[:, None, None, None], (n, 28, 28, 1)).copy()
  return Split(images=images, labels=CLASS_OF.astype(np.int32), class_names=tuple(f'class{c}' for c in range(NUM_CLASSES)))


SPLIT = make_split()
SOURCE = episodes.EpisodeSource.from_split(SPLIT)
sample = jax.jit(episodes.sample_episode, static_argnums=2)


@functools.lru_cache(maxsize=None)
def sample_many(shape, n, seed=0):
  """``n`` episodes from the keys ``fold_in(key(seed), i)``, drawn in one vmapped call, as numpy."""
  keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(seed), i))(np.arange(n))
  draw = jax.jit(jax.vmap(functools.partial(episodes.sample_episode, shape=shape), in_axes=(0, None)))
  return jax.tree.map(np.asarray, draw(keys, SOURCE))


def index_of(images):
  """Global image indices from images ``[..., 28, 28, 1]``, checking that each image is constant."""
  images = np.asarray(images)
  first = images[..., :1, :1, :]
  assert np.all(images == first)
  return first[..., 0, 0, 0].astype(np.int64)


def test_source_describes_the_split():
  assert SOURCE.num_classes == NUM_CLASSES
  assert SOURCE.max_count == COUNTS.max()
  np.testing.assert_array_equal(np.asarray(SOURCE.class_counts), COUNTS)
  np.testing.assert_array_equal(np.asarray(SOURCE.class_offsets), OFFSETS)


SHAPES = [EpisodeShape(5, 1, 4), EpisodeShape(3, 2, 3), EpisodeShape(7, 1, 1), EpisodeShape(1, 3, 2)]


@pytest.mark.parametrize('shape', SHAPES, ids=lambda s: f'{s.way}w{s.shot}s{s.query}q')
def test_episode_shapes_labels_and_contents(shape):
  ep = sample(jax.random.key(3), SOURCE, shape)
  way, shot, query = shape.way, shape.shot, shape.query
  assert ep.support_images.shape == (way * shot, 28, 28, 1) and ep.support_images.dtype == np.uint8
  assert ep.query_images.shape == (way * query, 28, 28, 1) and ep.query_images.dtype == np.uint8
  assert ep.classes.shape == (way,)
  np.testing.assert_array_equal(np.asarray(ep.support_labels), np.repeat(np.arange(way), shot))
  np.testing.assert_array_equal(np.asarray(ep.query_labels), np.repeat(np.arange(way), query))
  classes = np.asarray(ep.classes)
  assert len(set(classes.tolist())) == way and classes.min() >= 0 and classes.max() < NUM_CLASSES
  support, queries = index_of(ep.support_images), index_of(ep.query_images)
  drawn = np.concatenate([support, queries])
  assert len(set(drawn.tolist())) == len(drawn)  # no duplicates, support and query disjoint
  # Every image comes from the class its label names, inside that class's own images.
  np.testing.assert_array_equal(CLASS_OF[support], classes[np.asarray(ep.support_labels)])
  np.testing.assert_array_equal(CLASS_OF[queries], classes[np.asarray(ep.query_labels)])


@pytest.mark.parametrize('shape', [EpisodeShape(3, 1, 4), EpisodeShape(7, 2, 3)], ids=['3w1s4q', '7w2s3q'])
def test_every_episode_is_valid_over_many_keys(shape):
  eps = sample_many(shape, 500)
  support, queries = index_of(eps.support_images), index_of(eps.query_images)  # [n, way*shot], [n, way*query]
  drawn = np.concatenate([support, queries], axis=1)
  assert np.all(np.sort(drawn, axis=1)[:, 1:] != np.sort(drawn, axis=1)[:, :-1])  # distinct within each episode
  classes = eps.classes
  assert np.all(np.sort(classes, axis=1)[:, 1:] != np.sort(classes, axis=1)[:, :-1])
  assert classes.min() >= 0 and classes.max() < NUM_CLASSES
  label_class = np.take_along_axis(classes, eps.support_labels, axis=1)
  np.testing.assert_array_equal(CLASS_OF[support], label_class)
  np.testing.assert_array_equal(CLASS_OF[queries], np.take_along_axis(classes, eps.query_labels, axis=1))


def test_same_key_same_episode_different_keys_different_episodes():
  shape = EpisodeShape(3, 2, 3)
  a, b = sample(jax.random.key(11), SOURCE, shape), sample(jax.random.key(11), SOURCE, shape)
  for field in ('support_images', 'query_images', 'support_labels', 'query_labels', 'classes'):
    np.testing.assert_array_equal(np.asarray(getattr(a, field)), np.asarray(getattr(b, field)))
  eps = sample_many(shape, 20, seed=12)
  drawn = np.concatenate([index_of(eps.support_images), index_of(eps.query_images)], axis=1)
  assert len({tuple(row) for row in drawn.tolist()}) == 20


def chi_square(observed, expected):
  return float(np.sum((observed - expected) ** 2 / expected))


def loose_bound(df):
  """Far in the tail of chi-square(df): mean + 6 standard deviations."""
  return df + 6 * np.sqrt(2 * df)


def test_sampler_covers_the_split_uniformly():
  # shot + query = 5 = the smallest class: that class is used whole whenever it is drawn.
  shape, n = EpisodeShape(3, 1, 4), 2000
  eps = sample_many(shape, n, seed=1)
  support, queries = index_of(eps.support_images), index_of(eps.query_images)
  drawn = np.concatenate([support, queries], axis=1).ravel()
  # Classes: each is in an episode with probability way / num_classes.
  class_freq = np.bincount(eps.classes.ravel(), minlength=NUM_CLASSES)
  assert chi_square(class_freq, np.full(NUM_CLASSES, n * 3 / NUM_CLASSES)) < loose_bound(NUM_CLASSES - 1)
  # Images: given its class, each of a class's images is among the 5 drawn with probability 5 / count.
  image_freq = np.bincount(drawn, minlength=len(CLASS_OF))
  assert len(image_freq) == len(CLASS_OF)  # nothing past the last image
  assert image_freq.min() > 0  # every image of every class is eventually drawn
  expected = class_freq[CLASS_OF] * shape.per_class / COUNTS[CLASS_OF]
  assert chi_square(image_freq, expected) < loose_bound(len(CLASS_OF) - NUM_CLASSES)
  # The smallest class: all its images, every time it is drawn.
  np.testing.assert_array_equal(image_freq[CLASS_OF == 0], class_freq[0])
  # Support or query is a fair split: an image drawn lands in the support 1 time in 5.
  support_freq = np.bincount(support.ravel(), minlength=len(CLASS_OF))
  frac = support_freq.sum() / image_freq.sum()
  assert frac == pytest.approx(shape.shot / shape.per_class)
  p = shape.shot / shape.per_class
  assert chi_square(support_freq, p * image_freq) + chi_square(image_freq - support_freq, (1 - p) * image_freq) < loose_bound(len(CLASS_OF))


def test_sample_indices_stay_inside_each_class():
  shape = EpisodeShape(7, 2, 3)  # every class, the smallest (5 images) included, used whole
  keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(5), i))(np.arange(200))
  classes, indices = jax.jit(jax.vmap(functools.partial(episodes.sample_indices, shape=shape), in_axes=(0, None)))(keys, SOURCE)
  classes, indices = np.asarray(classes), np.asarray(indices)
  assert indices.shape == (200, 7, 5)
  start = OFFSETS[classes][..., None]
  assert np.all(indices >= start) and np.all(indices < start + COUNTS[classes][..., None])


# ----------------------------------------------------------------------------- errors


def test_check_fits_accepts_the_largest_shapes_that_fit():
  episodes.check_fits(SPLIT, EpisodeShape(NUM_CLASSES, 2, 3), 'train')  # way = classes, shot + query = smallest


def test_check_fits_rejects_too_many_ways_with_the_fix():
  with pytest.raises(DataError) as info:
    episodes.check_fits(SPLIT, EpisodeShape(NUM_CLASSES + 1, 1, 1), 'val')
  message = str(info.value)
  assert f'--way {NUM_CLASSES} or less' in message and 'val' in message and '\n' not in message


def test_check_fits_rejects_too_small_classes_with_the_fix():
  with pytest.raises(DataError) as info:
    episodes.check_fits(SPLIT, EpisodeShape(2, 2, 4), 'test')
  message = str(info.value)
  assert "'class0'" in message  # the smallest class, by name
  assert 'only 5 images' in message and '2 + 4' in message
  assert 'lower --shot or --query' in message and 'sum to 5 or less' in message
  assert '\n' not in message


@pytest.mark.parametrize('way,shot,query', [(0, 1, 1), (1, 0, 1), (1, 1, 0), (-2, 1, 1)])
def test_episode_shape_rejects_non_positive_sizes(way, shot, query):
  bad = next(name for name, v in (('way', way), ('shot', shot), ('query', query)) if v < 1)
  with pytest.raises(ValueError, match=f'--{bad} must be a positive integer'):
    EpisodeShape(way, shot, query)
