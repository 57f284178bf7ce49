"""The metric-learning batch: C classes x M images per class, drawn on the device from a split.

The reality check's protocol (Musgrave et al., 2020) uses C = 8, M = 4 for embedding
losses, which need positive pairs in every batch, and C = 32, M = 1 for classification
losses. A batch is an episode without the support/query division, so it is drawn by the
same code (:func:`fewshot.training.class_draws.sample_class_images`), seeded the same way.
"""

from __future__ import annotations

import dataclasses

import chex
import jax.numpy as jnp

from fewshot.training.class_draws import sample_class_images
from fewshot.training.sources import DeviceSource


@dataclasses.dataclass(frozen=True)
class BatchShape:
  """C classes x M images per class; the batch holds ``classes * per_class`` images."""

  classes: int
  per_class: int

  def __post_init__(self):
    for name in ("classes", "per_class"):
      if getattr(self, name) < 1:
        raise ValueError(f"--{name} must be a positive integer, got {getattr(self, name)}.")

  @property
  def size(self) -> int:
    return self.classes * self.per_class


@chex.dataclass(frozen=True)
class Batch:
  images: chex.Array  # uint8 [C*M, H, W, C], class-major
  labels: chex.Array  # int32 [C*M]: the split's class labels, as proxy losses need


def batch_from_images(images: chex.Array, classes: chex.Array) -> Batch:
  """The batch of drawn ``images [C, M, H, W, Ch]`` (class-major) of ``classes [C]``."""
  labels = jnp.broadcast_to(classes[:, None], images.shape[:2]).astype(jnp.int32)
  return Batch(images=images.reshape(-1, *images.shape[2:]), labels=labels.reshape(-1))


def sample_batch(key: chex.PRNGKey, source: DeviceSource, shape: BatchShape) -> Batch:
  """Draw one C x M batch (uint8 images, as stored); a class smaller than M repeats images."""
  classes, indices = sample_class_images(key, source.layout, shape.classes, shape.per_class)
  return batch_from_images(source.images[indices], classes)

