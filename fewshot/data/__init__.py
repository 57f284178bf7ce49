"""Datasets as class splits of 28x28x1 uint8 images (ink 255 on background 0).

    from fewshot import data
    train = data.load_split('strokes', 'train')                      # embedded, offline
    test = data.load_split('omniglot', 'test', data_dir='/path/to/omniglot')

Each dataset is prepared once into array_record files under the tfds dir
(`default_tfds_dir`) and read back by random access; later loads reuse it.
"""

from __future__ import annotations

from fewshot.data import omniglot, strokes, tfds_io
from fewshot.data.split import DataError, Split
from fewshot.data.tfds_io import SPLITS, default_tfds_dir

DATASETS = ('strokes', 'omniglot')

__all__ = ['DATASETS', 'SPLITS', 'DataError', 'Split', 'default_tfds_dir', 'load_split', 'load_splits']


def _builder(dataset: str, data_dir: str | None, tfds_dir: str | None):
  """The tfds builder of `dataset`, prepared if it was not yet."""
  if dataset not in DATASETS:
    raise DataError(f'Unknown dataset {dataset!r}; choose one of {", ".join(DATASETS)}.')
  tfds_dir = default_tfds_dir(tfds_dir)
  if dataset == 'omniglot':
    return omniglot.builder(data_dir, tfds_dir)
  b = strokes.Strokes(config=strokes.config(), data_dir=tfds_dir)
  tfds_io.prepare(b)
  return b


def load_splits(dataset: str, data_dir: str | None = None, tfds_dir: str | None = None,
                splits: tuple[str, ...] = SPLITS) -> dict[str, Split]:
  """Loads several class splits of `dataset` at once (one preparation check).

  Args:
    dataset: one of DATASETS. 'strokes' is built by the package and ignores data_dir.
    data_dir: for 'omniglot', the folder holding the Omniglot zips or their extracted folders.
    tfds_dir: where prepared data lives; see default_tfds_dir.
    splits: names from SPLITS.

  Raises:
    DataError: unknown dataset or split, or missing / unreadable source data.
  """
  for split in splits:
    if split not in SPLITS:
      raise DataError(f'Unknown split {split!r}; choose one of {", ".join(SPLITS)}.')
  b = _builder(dataset, data_dir, tfds_dir)
  return {split: tfds_io.read_split(b, split) for split in splits}


def load_split(dataset: str, split: str, data_dir: str | None = None, tfds_dir: str | None = None) -> Split:
  """Loads one class split ('train', 'val' or 'test') of `dataset` as a `Split`; see load_splits."""
  return load_splits(dataset, data_dir, tfds_dir, splits=(split,))[split]
