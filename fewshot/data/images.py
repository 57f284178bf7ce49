"""CUB, mini-ImageNet, Cars196 and SOP prepared once into tfds array_record, then read back class by class.

    prepared = images.prepare('cub', '/data', size=96)            # decodes only on the first call
    prepared.class_names, prepared.class_counts, prepared.class_subsets
    split = prepared.read([0, 2, 4])                               # a ``Split`` of those classes

Preparation (once per dataset, stored size, bbox crop and fingerprint of the dataset's files):
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
``tfds_io.prepare`` removes the parents it created, so nothing half-prepared stays.
A second ``prepare`` costs a fingerprint (stats of the dataset's files) and never
reads the annotations or images.

This module holds the tfds builder and ``prepare``; one image's decoding is in
``image_decoding``, and reading prepared data back (``Prepared``) in ``prepared``.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import os
import sys
from collections.abc import Iterator, Sequence

import numpy as np
import tensorflow_datasets as tfds
import tqdm

from fewshot.data import catalog, readers, tfds_io
from fewshot.data.image_decoding import decode, where
from fewshot.data.prepared import FORMAT, SUBSET_CODE, Prepared
from fewshot.data.readers import DatasetRecords, ImageRecord
from fewshot.errors import ConfigError, DataError

# Raw pixels per tfds split: tfds's writer holds a split's serialized records in
# memory and needs TensorFlow to spill past 1000 MiB; zlib never grows images much.
PART_BYTES = 768 << 20


DEFAULT_STORED_SIZE = catalog.stored_size(catalog.DEFAULT_IMAGE_SIZES["conv4"])


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


class ImageDataset(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """One tfds builder for the four datasets; a config per (dataset, size, crop, files' fingerprint).

  Built with ``records`` to prepare; without them it can only open prepared data
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
        "format": FORMAT,
        "dataset": cfg.dataset,
        "layout": recs.layout,
        "fingerprint": recs.fingerprint,
        "stored_size": cfg.stored_size,
        "bbox_crop": cfg.bbox_crop,
        "resample": "bilinear",
        "num_parts": len(parts),
        "class_counts": np.bincount(labels, minlength=recs.num_classes).tolist(),
        "record_subsets": "".join(SUBSET_CODE.get(recs.records[i].subset, "-") for i in order),
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
    """(record, pixels) in the files' cheapest reading order, decoded by a thread pool with a bounded queue."""
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


def prepare(dataset: str, data_dir, tfds_dir: str | None = None, *, size: int = DEFAULT_STORED_SIZE,
            bbox_crop: bool = False, workers: int | None = None) -> Prepared:
  """Prepares ``dataset`` from ``data_dir`` at ``size`` px once, and opens it.

  A later call with the same dataset files (by ``readers.fingerprint``) reuses the
  prepared data without reading annotations or images.

  Raises:
    ConfigError: an unknown dataset, or bbox_crop for a dataset without boxes.
    DataError: bad annotations (from ``readers.read``, before any image is decoded), a class
      without images, or a corrupt image (naming it; nothing is left behind).
  """
  if dataset not in catalog.IMAGE_DATASETS:
    raise ConfigError(f'{dataset!r} is not an image dataset; choose one of {", ".join(catalog.IMAGE_DATASETS)}.')
  catalog.resolve(dataset, bbox_crop=bbox_crop)
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
      recs.tree.close()
  return Prepared.open(b)

