"""CUB, mini-ImageNet, Cars196 and SOP prepared once into tfds array_record, then read back class by class.

    prepared = images.prepare('cub', '/data', size=96)            # decodes only on the first call
    prepared.class_names, prepared.class_counts, prepared.class_subsets
    split = prepared.read([0, 2, 4])                               # a `Split` of those classes

Preparation (once per dataset, stored size, bbox crop and source fingerprint):
every image is decoded with PIL, converted to RGB, optionally cropped to its
bounding box (CUB, Cars196; rounded to whole pixels), and resized to a square of
the stored size S with PIL's BILINEAR filter, which widens its support when
downscaling (antialiased; the filter torchvision's Resize applies to PIL images).
mini-ImageNet's pickles hold 84x84 pixels: they are resized too (84 -> 96 is a
mild upscale, 84 -> 257 a strong one: prefer the csv layout for 224 inputs).
Decoding runs on a few threads (PIL releases the GIL) while a tqdm bar on stderr
counts images (silent when stderr is not a terminal).

Storage, under <tfds_dir>/fewshot_images/<dataset>_<S>px[_bbox]_<fingerprint>/1.0.0/:
  * fewshot_images-part<k>.array_record-*: records {'image': uint8 [S, S, 3]
    (zlib tensor), 'label': ClassLabel}, written with disable_shuffling, so record
    i of the sequence part0, part1, ... is the i-th image in (label, annotation
    order). The split into parts is forced by tfds: without TensorFlow its writer
    keeps a split in memory and fails past 1 GB, so each part holds at most
    PART_BYTES of pixels.
  * dataset_info.json, features.json, label.labels.txt (the class names in label
    order) and metadata.json: per-class image counts (so class c is records
    sum(counts[:c]) .. sum(counts[:c+1]) - 1, known without decoding anything), a
    per-record official subset code ('t' train, 'v' val, 'e' test, '-' none) and
    the preparation settings.
tfds writes into an incomplete.* directory and renames it when everything is
written; a failure (a corrupt image: DataError naming the file) deletes it, and
`tfds_io.prepare` removes the parents it created, so nothing half-prepared stays.
A second `prepare` costs a fingerprint (stats of the source files) and never
reads the annotations or images.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import io
import os
import sys
from collections.abc import Iterator, Sequence

import numpy as np
import tensorflow_datasets as tfds
import tqdm
from PIL import Image

from fewshot.data import class_splits, options, readers, tfds_io
from fewshot.data.readers import DatasetRecords, ImageRecord
from fewshot.data.split import Split
from fewshot.errors import ConfigError, DataError, one_line

RESAMPLE = Image.Resampling.BILINEAR
# Raw pixels per tfds split: tfds's writer holds a split's serialized records in
# memory and needs TensorFlow to spill past 1000 MiB; zlib never grows images much.
PART_BYTES = 768 << 20
_SUBSET_CODE = {"train": "t", "val": "v", "test": "e", None: "-"}
_SUBSET_NAME = {v: k for k, v in _SUBSET_CODE.items()}
_FORMAT = 1


DEFAULT_STORED_SIZE = options.stored_size(options.DEFAULT_IMAGE_SIZES["conv4"])


@dataclasses.dataclass
class ImagesConfig(tfds.core.BuilderConfig):
  dataset: str = ""
  stored_size: int = DEFAULT_STORED_SIZE
  bbox_crop: bool = False
  fingerprint: str = ""


def config(dataset: str, size: int, bbox_crop: bool, fingerprint: str) -> ImagesConfig:
  """The config keying one preparation; its name is the prepared directory's name."""
  name = f'{dataset}_{size}px{"_bbox" if bbox_crop else ""}_{fingerprint}'
  return ImagesConfig(name=name, dataset=dataset, stored_size=size, bbox_crop=bbox_crop, fingerprint=fingerprint)


def where(records: DatasetRecords, record: ImageRecord) -> str:
  """The file (and row, for pixel records) an image comes from, for error messages."""
  place = records.source.where(record.member)
  return place if record.index is None else f"{place} row {record.index}"


def decode(image: bytes | np.ndarray, place: str, size: int,
           bbox: tuple[float, float, float, float] | None = None) -> np.ndarray:
  """uint8 [size, size, 3]: the image as RGB, cropped to `bbox` (x, y, w, h) if given, resized square.

  Raises:
    DataError: the bytes do not decode (naming `place`), or the box misses the image.
  """
  try:
    if isinstance(image, np.ndarray):
      im = Image.fromarray(image).convert("RGB")
    else:
      with Image.open(io.BytesIO(image)) as f:
        im = f.convert("RGB")  # loads the whole image: a truncated file fails here
  except Exception as e:  # PIL raises many types (OSError, SyntaxError, ValueError) on corrupt files
    raise DataError(f"Cannot decode image {place} ({one_line(e)}): it is truncated or corrupt; replace the file "
                    "(re-extract or re-download the dataset) and load again.") from None
  if bbox is not None:
    x, y, w, h = bbox
    # Whole pixels, clipped to the image: resampling inside a float box would blend
    # in pixels from outside it (the filter's support reaches past the box edge).
    box = (max(0, round(x)), max(0, round(y)), min(im.width, round(x + w)), min(im.height, round(y + h)))
    if box[2] <= box[0] or box[3] <= box[1]:
      raise DataError(f"Bounding box {bbox} of image {place} lies outside its {im.width}x{im.height} pixels; "
                      "fix its annotation or load without bbox_crop.")
    im = im.crop(box)
  return np.asarray(im.resize((size, size), RESAMPLE), np.uint8)


class ImageDataset(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """One tfds builder for the four datasets; a config per (dataset, size, crop, source fingerprint).

  Built with `records` to prepare; without them it can only open prepared data
  (class names then come from the prepared directory).
  """

  name = "fewshot_images"
  # Bump when decoding, cropping, resizing or the record order changes.
  VERSION = tfds.core.Version("1.0.0")

  def __init__(self, *, config: ImagesConfig, records: DatasetRecords | None = None, workers: int | None = None,
               **kwargs):
    self._records = records
    self._workers = workers or min(8, os.cpu_count() or 1)
    self.progress: tqdm.tqdm | None = None
    super().__init__(config=config, **kwargs)

  def _info(self) -> tfds.core.DatasetInfo:
    cfg = self.builder_config
    names = None if self._records is None else self._records.class_names
    return tfds_io.dataset_info(
        self, names, f'{cfg.dataset} images at {cfg.stored_size}x{cfg.stored_size}'
        f'{" cropped to their boxes" if cfg.bbox_crop else ""}, in label order (fewshot).',
        image_shape=(cfg.stored_size, cfg.stored_size, 3), metadata=tfds.core.MetadataDict(), disable_shuffling=True)

  def _split_generators(self, dl_manager):
    del dl_manager
    recs, cfg = self._records, self.builder_config
    if recs is None:
      raise DataError(f"{cfg.dataset} at {self.data_dir} is not prepared; load it with its data_dir to prepare it.")
    # Sorted by (label, annotation order): each class is one contiguous range.
    order = sorted(range(len(recs.records)), key=lambda i: (recs.records[i].label, i))
    labels = np.array([recs.records[i].label for i in order], np.int64)
    per_part = max(1, PART_BYTES // (3 * cfg.stored_size ** 2))
    parts = [order[lo:lo + per_part] for lo in range(0, len(order), per_part)]
    self.info.metadata.update({
        "format": _FORMAT,
        "dataset": cfg.dataset,
        "layout": recs.layout,
        "fingerprint": recs.fingerprint,
        "stored_size": cfg.stored_size,
        "bbox_crop": cfg.bbox_crop,
        "resample": "bilinear",
        "num_parts": len(parts),
        "class_counts": np.bincount(labels, minlength=recs.num_classes).tolist(),
        "record_subsets": "".join(_SUBSET_CODE.get(recs.records[i].subset, "-") for i in order),
    })
    self.progress = tqdm.tqdm(total=len(order), desc=f"Preparing {cfg.dataset} at {cfg.stored_size}px",
                              unit=" images", file=sys.stderr, disable=None, mininterval=1.0)
    starts = np.cumsum([0] + [len(p) for p in parts])
    return {f"part{k}": self._generate_examples(part, int(starts[k])) for k, part in enumerate(parts)}

  def _generate_examples(self, part: list[int], start: int):
    recs = self._records
    position = {id(recs.records[i]): start + j for j, i in enumerate(part)}
    for record, image in self._decoded([recs.records[i] for i in part]):
      # disable_shuffling: tfds orders records by these integer keys.
      yield position[id(record)], {"image": image, "label": record.label}
      self.progress.update(1)

  def _decoded(self, todo: Sequence[ImageRecord]) -> Iterator[tuple[ImageRecord, np.ndarray]]:
    """(record, pixels) in the source's cheapest order, decoded by a thread pool with a bounded queue."""
    recs, cfg = self._records, self.builder_config
    window = 4 * self._workers  # bounds the encoded bytes held, whatever the dataset's size
    with concurrent.futures.ThreadPoolExecutor(self._workers) as pool:
      pending: collections.deque = collections.deque()
      try:
        for record, data in recs.iter_images(todo):
          box = record.bbox if cfg.bbox_crop else None
          pending.append((record, pool.submit(decode, data, where(recs, record), cfg.stored_size, box)))
          if len(pending) > window:
            record, future = pending.popleft()
            yield record, future.result()
        while pending:
          record, future = pending.popleft()
          yield record, future.result()
      finally:
        for _, future in pending:
          future.cancel()


@dataclasses.dataclass(frozen=True)
class Prepared:
  """A prepared dataset: what its metadata says about each record, and reads by class.

  Attributes:
    builder: the prepared tfds builder.
    class_names: one per label, in the dataset's default order.
    class_counts: int64 [C], images per class.
    record_subsets: per record (label order), the official partition ('train', 'val', 'test') or None.
  """

  builder: ImageDataset
  class_names: tuple[str, ...]
  class_counts: np.ndarray
  record_subsets: tuple[str | None, ...]

  @classmethod
  def open(cls, builder: ImageDataset) -> Prepared:
    """Reads a prepared builder's metadata; DataError if it is damaged or from another format."""
    md = builder.info.metadata
    names = tuple(builder.info.features["label"].names)
    try:
      counts = np.asarray(md["class_counts"], np.int64)
      subsets = tuple(_SUBSET_NAME[c] for c in md["record_subsets"])
      parts = [builder.info.splits[f"part{k}"].num_examples for k in range(int(md["num_parts"]))]
      ok = md["format"] == _FORMAT and len(counts) == len(names) and counts.sum() == len(subsets) == sum(parts)
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

  def source(self) -> tfds_io.ConcatSource:
    """Random access to all records (part0, part1, ... as one sequence); its records decode to pixels."""
    return tfds_io.ConcatSource(self.builder, [f"part{k}" for k in range(self.builder.info.metadata["num_parts"])])

  def num_images(self, class_ids: Sequence[int]) -> int:
    return int(self.class_counts[np.asarray(class_ids, np.int64)].sum())

  def nbytes(self, class_ids: Sequence[int]) -> int:
    """Bytes of pixels of those classes at the stored size."""
    return self.num_images(class_ids) * 3 * self.stored_size ** 2

  def read(self, class_ids: Sequence[int]) -> Split:
    """The classes `class_ids` as a `Split` (label k is class_ids[k]), reading exactly their records."""
    return tfds_io.read_classes(self.source(), self.class_counts, class_ids)

  def iter_chunks(self, class_ids: Sequence[int], chunk_size: int | None = None
                  ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(images, labels) chunks of those classes, for splits streamed from host memory; see tfds_io.iter_class_chunks."""
    return tfds_io.iter_class_chunks(self.source(), self.class_counts, class_ids, chunk_size)


def prepare(dataset: str, data_dir, tfds_dir: str | None = None, *, size: int = DEFAULT_STORED_SIZE,
            bbox_crop: bool = False, workers: int | None = None) -> Prepared:
  """Prepares `dataset` from `data_dir` at `size` px once, and opens it.

  A later call with the same source files (by `readers.fingerprint`) reuses the
  prepared data without reading annotations or images.

  Raises:
    ConfigError: an unknown dataset, or bbox_crop for a dataset without boxes.
    DataError: bad annotations (from `readers.read`, before any image is decoded), a class
      without images, or a corrupt image (naming it; nothing is left behind).
  """
  if dataset not in options.IMAGE_DATASETS:
    raise ConfigError(f'{dataset!r} is not an image dataset; choose one of {", ".join(options.IMAGE_DATASETS)}.')
  options.resolve(dataset, bbox_crop=bbox_crop)
  if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 8:
    raise DataError(f"The stored image size must be an integer >= 8, got {size!r}.")
  tfds_dir = tfds_io.default_tfds_dir(tfds_dir)
  fingerprint = readers.fingerprint(dataset, data_dir)
  b = ImageDataset(config=config(dataset, int(size), bool(bbox_crop), fingerprint), data_dir=tfds_dir)
  if not b.is_prepared():
    recs = readers.read(dataset, data_dir)
    try:
      counts = np.bincount(recs.labels, minlength=recs.num_classes)
      if np.any(counts == 0):
        raise DataError(f"{dataset} class {recs.class_names[int(np.argmin(counts))]!r} has no images in its "
                        "annotation files; fix or re-download the dataset.")
      if len(set(recs.class_names)) != recs.num_classes:
        dup = next(n for n in recs.class_names if recs.class_names.count(n) > 1)
        raise DataError(f"{dataset} class name {dup!r} appears twice in its annotation files; fix or re-download them.")
      # The files may have changed since the fingerprint: key on what was read.
      b = ImageDataset(config=config(dataset, int(size), bool(bbox_crop), recs.fingerprint), records=recs,
                       data_dir=tfds_dir, workers=workers)
      try:
        tfds_io.prepare(b)
      finally:
        if b.progress is not None:
          b.progress.close()
    finally:
      recs.source.close()
  return Prepared.open(b)


# ---------------------------------------------------------------- memory plan
