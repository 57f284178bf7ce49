"""The uniform result of reading any dataset's files: class names and one record per image."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterable, Iterator, Mapping

import numpy as np
from PIL import Image, UnidentifiedImageError

from fewshot.data import archives
from fewshot.errors import DataError, one_line

SUBSETS = ("train", "val", "test")


@dataclasses.dataclass(frozen=True, slots=True)
class ImageRecord:
  """One image of a dataset, not yet decoded.

  Attributes:
    member: where the image is. For an encoded file (JPEG, PNG), its name in
      ``DatasetRecords.tree``; for an image stored as pixels (mini-ImageNet's
      pickles), the key of ``DatasetRecords.pixels`` holding it.
    label: class index into ``DatasetRecords.class_names`` (0-based).
    subset: the dataset's own partition of images ('train', 'val', 'test'), or None.
    bbox: (x, y, width, height) in pixels of the original image, or None.
    index: the row of ``DatasetRecords.pixels[member]`` for pixel records; None for files.
  """

  member: str
  label: int
  subset: str | None = None
  bbox: tuple[float, float, float, float] | None = None
  index: int | None = None


@dataclasses.dataclass(frozen=True)
class DatasetRecords:
  """A dataset's validated listing: what the storage step decodes and writes.

  Attributes:
    dataset: reader name ('cub', 'mini_imagenet', 'cars196', 'sop').
    layout: which on-disk variant was read (e.g. 'folder', 'archive', 'csv', 'pickle').
    class_names: one name per label, in the dataset's own order.
    records: one per image, in the order of the dataset's annotation files.
    tree: the files (folders and/or archives) that file records are read from.
    fingerprint: names, sizes and mtimes of those files, hashed; keys prepared data.
    pixels: for datasets shipped as arrays, uint8 [N, H, W, C] per key; records
      with ``index`` set point into them. Empty for file datasets.
  """

  dataset: str
  layout: str
  class_names: tuple[str, ...]
  records: tuple[ImageRecord, ...]
  tree: archives.FileTree
  fingerprint: str
  pixels: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    # Readers guarantee these; a record that breaks them is a bug here, not bad data.
    for r in self.records:
      if not 0 <= r.label < len(self.class_names):
        raise ValueError(f"{self.dataset} record {r} has a label outside 0..{len(self.class_names) - 1}.")
      if (r.index is not None) != (r.member in self.pixels):
        raise ValueError(f"{self.dataset} record {r} must have an index exactly when its member is a pixels key.")

  @property
  def num_classes(self) -> int:
    return len(self.class_names)

  @property
  def labels(self) -> np.ndarray:
    """int32 [num records]."""
    return np.fromiter((r.label for r in self.records), np.int32, len(self.records))

  def subset(self, name: str | None) -> tuple[ImageRecord, ...]:
    """The records of one official partition ('train', 'val', 'test'; None: the unpartitioned)."""
    return tuple(r for r in self.records if r.subset == name)

  def image(self, record: ImageRecord) -> bytes | np.ndarray:
    """The record's encoded file bytes, or its uint8 [H, W, C] pixels for a pixel record.

    One file from a .tgz may cost a pass over the archive; use ``iter_images`` for many.
    """
    if record.index is not None:
      return self.pixels[record.member][record.index]
    return self.tree.read(record.member)

  def iter_images(self, records: Iterable[ImageRecord] | None = None
                  ) -> Iterator[tuple[ImageRecord, bytes | np.ndarray]]:
    """Yields (record, image) for ``records`` (default all), in the order cheapest to read.

    Pixel records come first, in the given order; file records follow in the
    tree's order (archive order for tar files: one pass over a .tgz).
    """
    records = self.records if records is None else tuple(records)
    by_member: dict[str, list[ImageRecord]] = {}
    for r in records:
      if r.index is not None:
        yield r, self.pixels[r.member][r.index]
      else:
        by_member.setdefault(r.member, []).append(r)
    for member, data in self.tree.iter_read(by_member):
      for r in by_member[member]:
        yield r, data


def check_image(data: bytes, where: str = "image") -> None:
  """Raises DataError unless ``data`` decodes as an image.

  Decodes it fully: PIL's ``verify()`` checks PNG checksums but not JPEG data, so a
  JPEG cut short by an interrupted download passes it and fails only on ``load()``.
  Costs one decode; a storage step that decodes anyway can catch the same errors there.
  """
  try:
    with Image.open(io.BytesIO(data)) as im:
      im.verify()
    with Image.open(io.BytesIO(data)) as im:
      im.load()
  except UnidentifiedImageError:
    raise DataError(f"{where} is not an image PIL can read ({len(data)} bytes, starting {data[:8]!r}); "
                    "replace the file (re-extract or re-download the dataset).") from None
  except Exception as e:  # PIL raises many types (OSError, SyntaxError, ValueError) on corrupt files
    raise DataError(f"Cannot decode image {where} ({one_line(e)}): it is truncated or corrupt; "
                    "replace the file (re-extract or re-download the dataset).") from None
