"""Prepared image datasets read back: what their metadata says about each record, and reads by class.

The metadata (written by ``images.ImageDataset``) holds per-class image counts, so class c
is records sum(counts[:c]) .. sum(counts[:c+1]) - 1, and a per-record official subset
code; a class subset is read by random access without touching other records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import numpy as np
import tensorflow_datasets as tfds

from fewshot.data import class_splits, tfds_io
from fewshot.data.split import Split
from fewshot.errors import DataError

# The metadata's format: bump FORMAT when its fields change, so older prepared data is refused, not misread.
FORMAT = 1
SUBSET_CODE = {"train": "t", "val": "v", "test": "e", None: "-"}
SUBSET_NAME = {v: k for k, v in SUBSET_CODE.items()}


@dataclasses.dataclass(frozen=True)
class Prepared:
  """A prepared dataset: what its metadata says about each record, and reads by class.

  Attributes:
    builder: the prepared tfds builder.
    class_names: one per label, in the dataset's default order.
    class_counts: int64 [C], images per class.
    record_subsets: per record (label order), the official partition ('train', 'val', 'test') or None.
  """

  builder: tfds.core.DatasetBuilder
  class_names: tuple[str, ...]
  class_counts: np.ndarray
  record_subsets: tuple[str | None, ...]

  @classmethod
  def open(cls, builder: tfds.core.DatasetBuilder) -> Prepared:
    """Reads a prepared builder's metadata; DataError if it is damaged or from another format."""
    md = builder.info.metadata
    names = tuple(builder.info.features["label"].names)
    try:
      counts = np.asarray(md["class_counts"], np.int64)
      subsets = tuple(SUBSET_NAME[c] for c in md["record_subsets"])
      parts = [builder.info.splits[f"part{k}"].num_examples for k in range(int(md["num_parts"]))]
      ok = md["format"] == FORMAT and len(counts) == len(names) and counts.sum() == len(subsets) == sum(parts)
    except (KeyError, TypeError, ValueError):
      ok = False
    if not ok:
      raise DataError(f"Prepared data at {builder.data_dir} is damaged or from another version; "
                      "delete that directory and load again.")
    return cls(builder, names, counts, subsets)

  @property
  def num_classes(self) -> int:
    return len(self.class_names)

  @property
  def stored_size(self) -> int:
    return self.builder.builder_config.stored_size

  @property
  def labels(self) -> np.ndarray:
    """int32 [N]: the label of every record, known without reading any."""
    return np.repeat(np.arange(self.num_classes, dtype=np.int32), self.class_counts)

  @property
  def class_offsets(self) -> np.ndarray:
    """int64 [C]: index of each class's first record."""
    return np.concatenate([[0], np.cumsum(self.class_counts)[:-1]]).astype(np.int64)

  @property
  def class_subsets(self) -> list[str | None]:
    """Per class, the official partition all its images share, or None (see class_splits.class_subsets)."""
    return class_splits.class_subsets(self.labels, self.record_subsets, self.num_classes)

  def records(self) -> tfds_io.ConcatRecords:
    """Random access to all records (part0, part1, ... as one sequence); its records decode to pixels."""
    return tfds_io.ConcatRecords(self.builder, [f"part{k}" for k in range(self.builder.info.metadata["num_parts"])])

  def num_images(self, class_ids: Sequence[int]) -> int:
    return int(self.class_counts[np.asarray(class_ids, np.int64)].sum())

  def nbytes(self, class_ids: Sequence[int]) -> int:
    """Bytes of pixels of those classes at the stored size."""
    return self.num_images(class_ids) * 3 * self.stored_size ** 2

  def read(self, class_ids: Sequence[int]) -> Split:
    """The classes ``class_ids`` as a ``Split`` (label k is class_ids[k]), reading exactly their records."""
    return tfds_io.read_classes(self.records(), self.class_counts, class_ids)

  def iter_chunks(self, class_ids: Sequence[int], chunk_size: int | None = None
                  ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(images, labels) chunks of those classes, for splits streamed from host memory; see tfds_io.iter_class_chunks."""
    return tfds_io.iter_class_chunks(self.records(), self.class_counts, class_ids, chunk_size)
