"""N-way K-shot episodes drawn inside compiled code from a split resident on the device.

An episode draws ``way`` classes without replacement from the split, then
``shot + query`` distinct images of each; the first ``shot`` are support. Episode
labels are ``0..way-1`` in the order the classes were drawn, laid out class-major:
``support_labels = [0]*shot + [1]*shot + ...`` and likewise for the queries.

Everything is a pure function of a ``jax.random`` key, so the same key gives the same
episode on every run, and a resumed run replays exactly the episodes it would have seen.
The draw itself (classes, then images of each) is :func:`fewshot.training.class_draws.sample_class_images`,
shared with the metric-learning batches; a split too large for the device gets the same
episodes, its images gathered on the host instead (:mod:`fewshot.training.sources`).

:func:`draw` draws one episode from a split in Python, with that same sampler:

    test = data.load_split("strokes", "test")
    episode = episodes.draw(test, way=5, shot=1, query=15, seed=0)   # numpy support/query images and labels
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np

from fewshot.data.split import Split
from fewshot.training.class_draws import ClassLayout, check_fits, sample_class_images
from fewshot.training.sources import DeviceSource


@dataclasses.dataclass(frozen=True)
class EpisodeShape:
  """The static shape of an episode: N-way, K-shot, Q queries per class."""

  way: int
  shot: int
  query: int

  def __post_init__(self):
    for name in ("way", "shot", "query"):
      if getattr(self, name) < 1:
        raise ValueError(f"--{name} must be a positive integer, got {getattr(self, name)}.")

  @property
  def per_class(self) -> int:
    return self.shot + self.query


@chex.dataclass(frozen=True)
class Episode:
  support_images: chex.Array  # [way*shot, H, W, C]
  support_labels: chex.Array  # [way*shot]
  query_images: chex.Array  # [way*query, H, W, C]
  query_labels: chex.Array  # [way*query]
  classes: chex.Array  # [way] split labels of the drawn classes


def episode_from_images(images: chex.Array, classes: chex.Array, shape: EpisodeShape) -> Episode:
  """The episode of drawn ``images [way, shot + query, H, W, C]`` (class-major) of ``classes [way]``."""
  image_shape = images.shape[2:]
  labels = jnp.broadcast_to(jnp.arange(shape.way, dtype=jnp.int32)[:, None], images.shape[:2])
  return Episode(
      support_images=images[:, : shape.shot].reshape(-1, *image_shape),
      support_labels=labels[:, : shape.shot].reshape(-1),
      query_images=images[:, shape.shot :].reshape(-1, *image_shape),
      query_labels=labels[:, shape.shot :].reshape(-1),
      classes=classes,
  )


def episode_structs(shape: EpisodeShape, stored_shape: tuple[int, ...], lead: tuple[int, ...] = ()) -> Episode:
  """An episode of ``shape`` as shapes and dtypes only (``stored_shape`` images, ``lead`` axes before each array):
  what a step is lowered on without data.
  """
  struct = lambda n, *dims, dtype=jnp.uint8: jax.ShapeDtypeStruct((*lead, n, *dims), dtype)  # noqa: E731
  return Episode(support_images=struct(shape.way * shape.shot, *stored_shape),
                 support_labels=struct(shape.way * shape.shot, dtype=jnp.int32),
                 query_images=struct(shape.way * shape.query, *stored_shape),
                 query_labels=struct(shape.way * shape.query, dtype=jnp.int32),
                 classes=struct(shape.way, dtype=jnp.int32))


def sample_episode(key: chex.PRNGKey, source: DeviceSource, shape: EpisodeShape) -> Episode:
  """Draw one episode (uint8 images, as stored) from a split resident on the device."""
  classes, indices = sample_class_images(key, source.layout, shape.way, shape.per_class)
  return episode_from_images(source.images[indices], classes, shape)


def draw(split: Split, way: int, shot: int, query: int, seed: int = 0) -> Episode:
  """One N-way K-shot episode of ``split`` as numpy arrays, drawn by the sampler training uses, with ``seed``.

  ``support_images [way*shot, H, W, C]`` and ``query_images [way*query, H, W, C]`` are uint8 as
  stored (``TrainedModel.embed`` takes them as they are); the labels are episode labels
  ``0..way-1``, class-major; ``classes`` are the split's labels of the drawn classes. A split
  that cannot supply the episode is a one-line ``DataError`` naming what to lower.
  """
  shape = EpisodeShape(way, shot, query)
  check_fits(split, "given", ("way", way), {"shot": shot, "query": query})
  classes, indices = sample_class_images(jax.random.key(seed), ClassLayout.from_split(split), way, shape.per_class)
  episode = episode_from_images(split.images[np.asarray(indices)], np.asarray(classes), shape)
  return jax.tree.map(np.asarray, episode)
