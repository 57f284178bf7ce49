"""The one form in which every dataset reaches the learner: a class split as arrays."""

from __future__ import annotations

import dataclasses

import numpy as np

from fewshot.errors import DataError


@dataclasses.dataclass(frozen=True)
class Split:
  """All images of one class split, sorted by label.

  Attributes:
    images: uint8 [N, H, W, C], grouped so that each class's images are contiguous.
    labels: int32 [N], non-decreasing, in 0..num_classes-1.
    class_names: one name per label.
  """

  images: np.ndarray
  labels: np.ndarray
  class_names: tuple[str, ...]

  def __post_init__(self):
    if self.images.dtype != np.uint8 or self.images.ndim != 4:
      raise DataError(f"Split images must be uint8 [N, H, W, C], got {self.images.dtype} {self.images.shape}.")
    if self.labels.shape != (self.images.shape[0],):
      raise DataError(f"Split has {self.images.shape[0]} images but labels of shape {self.labels.shape}.")
    if len(self.labels) and np.any(np.diff(self.labels) < 0):
      raise DataError("Split labels must be sorted so that each class is contiguous; sort images by label first.")
    counts = np.bincount(self.labels, minlength=len(self.class_names))
    if len(counts) != len(self.class_names) or np.any(counts == 0):
      raise DataError(f"Split has {len(self.class_names)} class names but images for labels {np.flatnonzero(counts).tolist()[:10]}...; every class needs at least one image.")

  @property
  def num_classes(self) -> int:
    return len(self.class_names)

  @property
  def image_shape(self) -> tuple[int, int, int]:
    return tuple(self.images.shape[1:])

  @property
  def class_counts(self) -> np.ndarray:
    return np.bincount(self.labels, minlength=self.num_classes).astype(np.int32)

  @property
  def class_offsets(self) -> np.ndarray:
    """Index of each class's first image."""
    return np.concatenate([[0], np.cumsum(self.class_counts)[:-1]]).astype(np.int32)

  def subset(self, class_ids) -> "Split":
    """The images of the classes ``class_ids`` (labels of this split), relabelled ``0..`` in the order given."""
    class_ids = [int(c) for c in class_ids]
    offsets, counts = self.class_offsets, self.class_counts
    images = [self.images[offsets[c] : offsets[c] + counts[c]] for c in class_ids]
    labels = np.repeat(np.arange(len(class_ids), dtype=np.int32), [counts[c] for c in class_ids])
    empty = np.zeros((0, *self.images.shape[1:]), self.images.dtype)
    return Split(np.concatenate(images) if images else empty, labels,
                 tuple(self.class_names[c] for c in class_ids))

  @staticmethod
  def concatenate(splits) -> "Split":
    """One split of the classes of several, in their order (labels offset accordingly)."""
    splits = list(splits)
    offsets = np.cumsum([0] + [s.num_classes for s in splits[:-1]])
    return Split(np.concatenate([s.images for s in splits]),
                 np.concatenate([s.labels + o for s, o in zip(splits, offsets)]).astype(np.int32),
                 tuple(name for s in splits for name in s.class_names))
