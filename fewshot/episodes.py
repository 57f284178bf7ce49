"""N-way K-shot episodes drawn inside compiled code from a split resident on the device.

An episode draws ``way`` classes without replacement from the split, then
``shot + query`` distinct images of each; the first ``shot`` are support. Episode
labels are ``0..way-1`` in the order the classes were drawn, laid out class-major:
``support_labels = [0]*shot + [1]*shot + ...`` and likewise for the queries.

Everything is a pure function of a ``jax.random`` key, so the same key gives the same
episode on every run, and a resumed run replays exactly the episodes it would have seen.
The draw needs only the split's :class:`ClassLayout`, so a split too large for the device
(:mod:`fewshot.streaming`) gets the same episodes, its images gathered on the host instead.
"""

from __future__ import annotations

import dataclasses

import chex
import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from fewshot.data.split import DataError, Split


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


@flax.struct.dataclass
class ClassLayout:
  """Where each class of a split starts and how many images it has: all that drawing indices needs."""

  class_offsets: jax.Array  # int32 [num_classes]
  class_counts: jax.Array  # int32 [num_classes]
  max_count: int = flax.struct.field(pytree_node=False)

  @classmethod
  def from_split(cls, split: Split, device: jax.Device | None = None) -> "ClassLayout":
    put = lambda a: jax.device_put(a, device)
    return cls(class_offsets=put(split.class_offsets), class_counts=put(split.class_counts),
               max_count=int(split.class_counts.max()))

  @property
  def num_classes(self) -> int:
    return self.class_offsets.shape[0]


@flax.struct.dataclass
class EpisodeSource:
  """A split resident on the device: images grouped by class, and their class layout."""

  images: jax.Array  # uint8 [N, H, W, C]
  layout: ClassLayout

  @classmethod
  def from_split(cls, split: Split, device: jax.Device | None = None) -> "EpisodeSource":
    return cls(images=jax.device_put(split.images, device), layout=ClassLayout.from_split(split, device))

  @property
  def num_classes(self) -> int:
    return self.layout.num_classes


@chex.dataclass(frozen=True)
class Episode:
  support_images: chex.Array  # [way*shot, H, W, C]
  support_labels: chex.Array  # [way*shot]
  query_images: chex.Array  # [way*query, H, W, C]
  query_labels: chex.Array  # [way*query]
  classes: chex.Array  # [way] split labels of the drawn classes


def check_fits(split: Split, shape: EpisodeShape, split_name: str) -> None:
  """Raise a one-line ``DataError`` if the split cannot supply episodes of this shape."""
  if shape.way > split.num_classes:
    raise DataError(
        f"--way {shape.way} is larger than the {split.num_classes} classes of the {split_name} split; "
        f"use --way {split.num_classes} or less."
    )
  smallest = int(split.class_counts.min())
  if shape.per_class > smallest:
    worst = split.class_names[int(np.argmin(split.class_counts))]
    raise DataError(
        f"class {worst!r} of the {split_name} split has only {smallest} images but every class needs "
        f"shot + query = {shape.shot} + {shape.query}; lower --shot or --query so they sum to {smallest} or less."
    )


def sample_class_images(key: chex.PRNGKey, layout: ClassLayout, num_classes: int,
                        per_class: int) -> tuple[jax.Array, jax.Array]:
  """Draw ``num_classes`` distinct classes ``[C]`` and ``per_class`` images of each, ``[C, per_class]`` indices.

  Images are distinct within a class while the class has enough of them; a smaller class
  repeats its images (pytorch-metric-learning's M-per-class sampler does the same).
  Episodes never hit that case, since :func:`check_fits` rejects such splits up front.
  """
  class_key, image_key = jax.random.split(key)
  classes = jax.random.choice(class_key, layout.num_classes, (num_classes,), replace=False)
  counts = layout.class_counts[classes]
  # Distinct images per class: the top per_class of uniform scores over the class's
  # slots, with slots past the class's size scored below any real one.
  scores = jax.random.uniform(image_key, (num_classes, max(layout.max_count, per_class)))
  scores = jnp.where(jnp.arange(scores.shape[1])[None, :] < counts[:, None], scores, -1.0)
  _, within_class = jax.lax.top_k(scores, per_class)
  return classes, layout.class_offsets[classes][:, None] + within_class % counts[:, None]


def sample_indices(key: chex.PRNGKey, layout: ClassLayout, shape: EpisodeShape) -> tuple[jax.Array, jax.Array]:
  """Draw the classes ``[way]`` and the image indices ``[way, shot + query]`` of one episode."""
  return sample_class_images(key, layout, shape.way, shape.per_class)


def episode_from_images(images: jax.Array, classes: jax.Array, shape: EpisodeShape) -> Episode:
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


def sample_episode(key: chex.PRNGKey, source: EpisodeSource, shape: EpisodeShape) -> Episode:
  """Draw one episode (uint8 images, as stored) from the split."""
  classes, indices = sample_indices(key, source.layout, shape)
  return episode_from_images(source.images[indices], classes, shape)
