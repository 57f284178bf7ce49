"""What every dataset shares: the tfds feature spec, one-time preparation, and reading a split back."""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence

import numpy as np
import tensorflow_datasets as tfds

from fewshot.data.catalog import SMALL_IMAGE_SIZE
from fewshot.data.split import Split
from fewshot.errors import DataError

IMAGE_SHAPE = (SMALL_IMAGE_SIZE, SMALL_IMAGE_SIZE, 1)
_READ_BATCH = 4096
_READ_BYTES = 256 << 20  # per chunk of a class-subset read: bounds the transient copy


class _DropNoise(logging.Filter):
  """Drops tfds warnings that are normal here: custom configs key our prepared
  data, and checking whether a dataset is prepared warns when it is not.
  """

  def filter(self, record: logging.LogRecord) -> bool:
    msg = record.getMessage()
    return not (msg.startswith("Using custom data configuration") or "has no dataset_info.json" in msg)


logging.getLogger("absl").addFilter(_DropNoise())


def default_tfds_dir(tfds_dir: str | None = None) -> str:
  """Where prepared datasets live: the argument, else $TFDS_DATA_DIR, else ~/tensorflow_datasets."""
  return os.path.expanduser(tfds_dir or os.environ.get("TFDS_DATA_DIR") or "~/tensorflow_datasets")


def dataset_info(builder: tfds.core.DatasetBuilder, class_names, description: str,
                 image_shape: tuple[int, ...] = IMAGE_SHAPE, *, metadata: tfds.core.MetadataDict | None = None,
                 disable_shuffling: bool = False) -> tfds.core.DatasetInfo:
  """Feature spec shared by all datasets: a uint8 image of ``image_shape`` and a class label.

  ``class_names`` None leaves the label's names to be restored from a prepared
  directory, so a prepared dataset can be opened without the dataset's files.
  """
  # tfds.features.Image would need TensorFlow to encode PNGs; a zlib tensor does not.
  label = tfds.features.ClassLabel() if class_names is None else tfds.features.ClassLabel(names=list(class_names))
  return tfds.core.DatasetInfo(
      builder=builder,
      description=description,
      features=tfds.features.FeaturesDict({
          "image": tfds.features.Tensor(shape=tuple(image_shape), dtype=np.uint8,
                                        encoding=tfds.features.Encoding.ZLIB),
          "label": label,
      }),
      supervised_keys=("image", "label"),
      metadata=metadata,
      disable_shuffling=disable_shuffling,
  )


def image_shape(builder: tfds.core.DatasetBuilder) -> tuple[int, ...]:
  return tuple(builder.info.features["image"].shape)


def prepare(builder: tfds.core.DatasetBuilder) -> None:
  """Prepares ``builder`` into array_record once; a no-op when already prepared.

  tfds writes into an ``incomplete.*`` directory and renames it only on success,
  and deletes it on failure; we also remove the empty parent directories it
  leaves, so a failed run leaves the tfds dir as it found it. Two processes preparing one
  dataset at once both succeed: the first to finish is kept.
  """
  if builder.is_prepared():
    return
  # Nothing is downloaded: tfds's "Downloading and preparing dataset Unknown size ..." would mislead, and its bold
  # "downloaded and prepared" line would land in a command's output (and beside its one-line errors).
  builder._log_download_bytes = lambda: None  # pylint: disable=protected-access
  builder._log_download_done = lambda: None  # pylint: disable=protected-access
  root = pathlib.Path(builder.data_dir_root)
  existed = {p for p in pathlib.Path(builder.data_dir).parents if p.is_relative_to(root) and p.exists()}
  try:
    # Nothing is downloaded, but tfds would otherwise create <tfds_dir>/downloads.
    with tempfile.TemporaryDirectory(prefix="fewshot_tfds_dl_") as dl, _progress_bars_on_terminal_only():
      builder.download_and_prepare(download_dir=dl, file_format="array_record")
  except FileExistsError:
    # Another process (a group's other host) prepared the same dataset while this one did: its records are whole
    # (tfds renames them into place), and the folders above them are now its.
    if builder.is_prepared():
      return
    raise
  except BaseException as e:
    for p in pathlib.Path(builder.data_dir).parents:
      if p == root or not p.is_relative_to(root):
        break
      if p not in existed and p.exists():
        shutil.rmtree(p, ignore_errors=True)
    if isinstance(e, (PermissionError, IsADirectoryError, NotADirectoryError)) and e.filename and \
        pathlib.Path(os.path.abspath(e.filename)).is_relative_to(root.absolute()):  # a tfds dir it cannot write
      raise DataError(f"cannot prepare {builder.name} in {root} ({e.strerror or type(e).__name__}); pass a writable "
                      "--tfds_dir.") from None
    raise


@contextlib.contextmanager
def _progress_bars_on_terminal_only():
  """tfds's progress bars only where stderr is a terminal: in a log their redraws are carriage returns and cursor
  escapes.
  """
  on_terminal = sys.stderr.isatty()
  tfds.display_progress_bar(on_terminal)
  try:
    yield
  finally:
    tfds.display_progress_bar(True)  # tfds's default


def read_split(builder: tfds.core.DatasetBuilder, split: str) -> Split:
  """Reads a prepared split into a ``Split``, labels remapped to 0..C-1 in class-name order."""
  stored = builder.as_data_source(split=split)
  n = len(stored)
  if n == 0:
    raise DataError(f"Split {split!r} of {builder.name} at {builder.data_dir} is empty; delete that directory and load again.")
  images = np.empty((n, *image_shape(builder)), np.uint8)
  labels = np.empty(n, np.int64)
  for lo in range(0, n, _READ_BATCH):
    records = stored.__getitems__(list(range(lo, min(n, lo + _READ_BATCH))))
    images[lo:lo + len(records)] = np.stack([r["image"] for r in records])
    labels[lo:lo + len(records)] = [r["label"] for r in records]
  all_names = builder.info.features["label"].names
  present, labels = np.unique(labels, return_inverse=True)
  # tfds stores records in an order fixed by a hash of their keys; a stable
  # sort keeps that order within a class, so loads are reproducible.
  order = np.argsort(labels, kind="stable")
  return Split(images=images[order], labels=labels[order].astype(np.int32),
               class_names=tuple(all_names[i] for i in present))


# ---------------------------------------------------------------- label-sorted datasets
# A dataset written with disable_shuffling in label order (fewshot.data.images)
# has each class in one contiguous index range, known from its class counts
# alone: a class subset is read by random access without touching other records.
# Its records may span several tfds splits ("parts"), read as one sequence.


class ConcatRecords:
  """Random access over several prepared splits of ``builder``, indexed as one sequence in the given order."""

  def __init__(self, builder: tfds.core.DatasetBuilder, splits: Sequence[str]):
    self.builder = builder
    self._parts = [builder.as_data_source(split=s) for s in splits]
    self._starts = np.cumsum([0] + [len(p) for p in self._parts])

  def __len__(self) -> int:
    return int(self._starts[-1])

  def __getitems__(self, indices: Sequence[int]) -> list[dict]:
    idx = np.asarray(indices, np.int64)
    if len(idx) and (idx.min() < 0 or idx.max() >= len(self)):
      raise IndexError(f"record index out of range 0..{len(self) - 1}")
    part = np.searchsorted(self._starts, idx, side="right") - 1
    out: list = [None] * len(idx)
    for p in np.unique(part):
      at = np.flatnonzero(part == p)
      for j, r in zip(at, self._parts[p].__getitems__((idx[at] - self._starts[p]).tolist())):
        out[j] = r
    return out


def class_ranges(class_counts: Sequence[int], class_ids: Sequence[int]) -> list[tuple[int, int]]:
  """[start, stop) record indices of each class in ``class_ids`` of a label-sorted sequence."""
  counts = np.asarray(class_counts, np.int64)
  starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
  ids = np.asarray(class_ids, np.int64)
  if len(ids) and (ids.min() < 0 or ids.max() >= len(counts)):
    raise ValueError(f"class ids must lie in 0..{len(counts) - 1}, got {ids.min()}..{ids.max()}.")
  return [(int(starts[c]), int(starts[c] + counts[c])) for c in ids]


def iter_class_chunks(records: ConcatRecords, class_counts: Sequence[int], class_ids: Sequence[int],
                      chunk_size: int | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
  """Yields (uint8 images [n, ...], int32 labels [n]) of the classes ``class_ids``, ``chunk_size`` records at a time.

  Labels are positions in ``class_ids`` (0..len(class_ids)-1); chunks follow
  ``class_ids`` order and each class's records in stored order. Only those records
  are read, so a host-memory loader can stream a split too big to hold.
  ``chunk_size`` None: about 256 MB of pixels per chunk.

  Raises:
    DataError: a record's stored label disagrees with ``class_counts`` (a damaged prepared dir).
  """
  shape = image_shape(records.builder)
  if chunk_size is None:
    chunk_size = max(1, _READ_BYTES // int(np.prod(shape)))
  if chunk_size < 1:
    raise ValueError(f"chunk_size must be positive, got {chunk_size}.")
  ranges = class_ranges(class_counts, class_ids)
  index = np.concatenate([np.arange(lo, hi) for lo, hi in ranges] or [np.zeros(0, np.int64)])
  labels = np.repeat(np.arange(len(ranges), dtype=np.int32), [hi - lo for lo, hi in ranges])
  ids = np.asarray(class_ids, np.int64)
  for lo in range(0, len(index), chunk_size):
    idx, lab = index[lo:lo + chunk_size], labels[lo:lo + chunk_size]
    images = np.empty((len(idx), *shape), np.uint8)
    stored = np.empty(len(idx), np.int64)
    for j, r in enumerate(records.__getitems__(idx.tolist())):
      images[j] = r["image"]
      stored[j] = r["label"]
    if np.any(stored != ids[lab]):
      # Cheap (the records are decoded anyway) and it catches a prepared dir whose
      # record order is not the label order its metadata promises.
      raise DataError(f"Prepared data at {records.builder.data_dir} has records out of label order; "
                      "delete that directory and load again.")
    yield images, lab


def read_classes(records: ConcatRecords, class_counts: Sequence[int], class_ids: Sequence[int]) -> Split:
  """The classes ``class_ids`` of a label-sorted sequence as a ``Split``, label k = class_ids[k].

  Raises:
    DataError: the prepared records disagree with ``class_counts`` (a damaged prepared dir).
  """
  class_ids = [int(c) for c in class_ids]
  n = sum(hi - lo for lo, hi in class_ranges(class_counts, class_ids))
  images = np.empty((n, *image_shape(records.builder)), np.uint8)
  labels = np.empty(n, np.int32)
  at = 0
  for chunk, chunk_labels in iter_class_chunks(records, class_counts, class_ids):
    images[at:at + len(chunk)] = chunk
    labels[at:at + len(chunk)] = chunk_labels
    at += len(chunk)
  names = records.builder.info.features["label"].names
  return Split(images=images, labels=labels, class_names=tuple(names[c] for c in class_ids))
