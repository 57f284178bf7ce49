"""Reading datasets from the files a researcher already has, offline, into uniform image records.

    from fewshot.data import readers
    recs = readers.read('cub', '/data')            # or readers.read_cub('/data')
    recs.class_names, recs.records[0]              # ImageRecord(member='images/001.../x.jpg', label=0, ...)
    for record, image in recs.iter_images(): ...   # encoded bytes (or pixels: mini-ImageNet's pickles, CIFAR-100)

Each reader locates the dataset's folders or archives, then parses and cross-checks
every annotation file and checks that every listed image is present, raising a
one-line DataError (file, line, what was expected, how to fix) before any image is
decoded. Decoding and storage are the caller's; ``check_image`` tells a corrupt image.
The readers import only ``fewshot.data.archives`` (the file tree), ``fewshot.data.class_lists`` (shipped lists) and
``fewshot.errors``; this module finds each
dataset's reader by its row of ``fewshot.data.catalog``.

* :mod:`~fewshot.data.readers.cub`, :mod:`~fewshot.data.readers.mini_imagenet`, :mod:`~fewshot.data.readers.cars196`,
  :mod:`~fewshot.data.readers.sop`: one dataset's files each (``locate`` and ``read_<name>``);
  :mod:`~fewshot.data.readers.cifar100`: CIFAR-100's files as two datasets, CIFAR-FS and FC100 (``read_cifar_fs``,
  ``read_fc100``);
* :mod:`~fewshot.data.readers.safe_pickle`: the datasets' pickles loaded so that they cannot run code;
* :mod:`~fewshot.data.readers.records`: what every reader returns (``DatasetRecords``, ``ImageRecord``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from fewshot.data import catalog
from fewshot.data.readers.cars196 import read_cars196
from fewshot.data.readers.cifar100 import read_cifar_fs, read_fc100
from fewshot.data.readers.cub import read_cub
from fewshot.data.readers.mini_imagenet import read_mini_imagenet
from fewshot.data.readers.records import SUBSETS, DatasetRecords, ImageRecord, check_image
from fewshot.data.readers.sop import read_sop
from fewshot.errors import DataError

__all__ = ["SUBSETS", "DatasetRecords", "ImageRecord", "check_image", "fingerprint", "read", "read_cars196",
           "read_cifar_fs", "read_cub", "read_fc100", "read_mini_imagenet", "read_sop"]


def module(dataset: str) -> ModuleType:
  """The reader module an image dataset's row names (``catalog.DatasetSpec.reader``): ``locate`` and ``read_<name>``."""
  if dataset not in catalog.IMAGE_DATASETS:
    raise DataError(f'Unknown dataset {dataset!r}; choose one of {", ".join(catalog.IMAGE_DATASETS)}.')
  return importlib.import_module(catalog.SPECS[dataset].reader)


def read(dataset: str, data_dir) -> DatasetRecords:
  """``read_<dataset>(data_dir)`` of the dataset's reader: its validated records."""
  return getattr(module(dataset), f"read_{dataset}")(data_dir)


def fingerprint(dataset: str, data_dir) -> str:
  """The fingerprint of the dataset's files that ``read`` would return, without reading or validating anything.

  Costs a stat per archive and a walk of extracted folders, so a caller can find
  already-prepared data before paying for a full read (a .tgz listing inflates it).
  """
  tree, _ = module(dataset).locate(data_dir)
  return tree.fingerprint
