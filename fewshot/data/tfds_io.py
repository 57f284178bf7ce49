"""What every dataset shares: the tfds feature spec, one-time preparation, and reading a split back."""

from __future__ import annotations

import logging
import os
import pathlib
import shutil
import tempfile

import numpy as np
import tensorflow_datasets as tfds

from fewshot.data.split import DataError, Split

SPLITS = ('train', 'val', 'test')
IMAGE_SHAPE = (28, 28, 1)
_READ_BATCH = 4096


class _DropNoise(logging.Filter):
  """Drops tfds warnings that are normal here: custom configs key our prepared
  data, and checking whether a dataset is prepared warns when it is not."""

  def filter(self, record: logging.LogRecord) -> bool:
    msg = record.getMessage()
    return not (msg.startswith('Using custom data configuration') or 'has no dataset_info.json' in msg)


logging.getLogger('absl').addFilter(_DropNoise())


def default_tfds_dir(tfds_dir: str | None = None) -> str:
  """Where prepared datasets live: the argument, else $TFDS_DATA_DIR, else ~/tensorflow_datasets."""
  return os.path.expanduser(tfds_dir or os.environ.get('TFDS_DATA_DIR') or '~/tensorflow_datasets')


def dataset_info(builder: tfds.core.DatasetBuilder, class_names, description: str) -> tfds.core.DatasetInfo:
  """Feature spec shared by all datasets: a 28x28x1 uint8 image and a class label."""
  # tfds.features.Image would need TensorFlow to encode PNGs; a zlib tensor does not.
  return tfds.core.DatasetInfo(
      builder=builder,
      description=description,
      features=tfds.features.FeaturesDict({
          'image': tfds.features.Tensor(shape=IMAGE_SHAPE, dtype=np.uint8, encoding=tfds.features.Encoding.ZLIB),
          'label': tfds.features.ClassLabel(names=list(class_names)),
      }),
      supervised_keys=('image', 'label'),
  )


def prepare(builder: tfds.core.DatasetBuilder) -> None:
  """Prepares `builder` into array_record once; a no-op when already prepared.

  tfds writes into an `incomplete.*` directory and renames it only on success,
  and deletes it on failure; we also remove the empty parent directories it
  leaves, so a failed run leaves the tfds dir as it found it.
  """
  if builder.is_prepared():
    return
  root = pathlib.Path(builder.data_dir_root)
  existed = {p for p in pathlib.Path(builder.data_dir).parents if p.is_relative_to(root) and p.exists()}
  try:
    # Nothing is downloaded, but tfds would otherwise create <tfds_dir>/downloads.
    with tempfile.TemporaryDirectory(prefix='fewshot_tfds_dl_') as dl:
      builder.download_and_prepare(download_dir=dl, file_format='array_record')
  except BaseException:
    for p in pathlib.Path(builder.data_dir).parents:
      if p == root or not p.is_relative_to(root):
        break
      if p not in existed and p.exists():
        shutil.rmtree(p, ignore_errors=True)
    raise


def read_split(builder: tfds.core.DatasetBuilder, split: str) -> Split:
  """Reads a prepared split into a `Split`, labels remapped to 0..C-1 in class-name order."""
  source = builder.as_data_source(split=split)
  n = len(source)
  if n == 0:
    raise DataError(f'Split {split!r} of {builder.name} at {builder.data_dir} is empty; delete that directory and load again.')
  images = np.empty((n, *IMAGE_SHAPE), np.uint8)
  labels = np.empty(n, np.int64)
  for lo in range(0, n, _READ_BATCH):
    records = source.__getitems__(list(range(lo, min(n, lo + _READ_BATCH))))
    images[lo:lo + len(records)] = np.stack([r['image'] for r in records])
    labels[lo:lo + len(records)] = [r['label'] for r in records]
  all_names = builder.info.features['label'].names
  present, labels = np.unique(labels, return_inverse=True)
  # tfds stores records in an order fixed by a hash of their keys; a stable
  # sort keeps that order within a class, so loads are reproducible.
  order = np.argsort(labels, kind='stable')
  return Split(images=images[order], labels=labels[order].astype(np.int32),
               class_names=tuple(all_names[i] for i in present))
