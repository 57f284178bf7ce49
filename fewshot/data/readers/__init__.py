"""Reading datasets from the files a researcher already has, offline, into uniform image records.

    from fewshot.data import readers
    recs = readers.read('cub', '/data')            # or readers.read_cub('/data')
    recs.class_names, recs.records[0]              # ImageRecord(member='images/001.../x.jpg', label=0, ...)
    for record, image in recs.iter_images(): ...   # encoded bytes (or pixels for mini-ImageNet pickles)

Each reader locates the dataset's folders or archives, then parses and cross-checks
every annotation file and checks that every listed image is present, raising a
one-line DataError (file, line, what was expected, how to fix) before any image is
decoded. Decoding and storage are the caller's; ``check_image`` tells a corrupt image.
The readers import only ``fewshot.data.archives`` (the file tree) and ``fewshot.errors``.
"""

from __future__ import annotations

from collections.abc import Callable

from fewshot.data.readers import cars196, cub, mini_imagenet, sop
from fewshot.data.readers.cars196 import read_cars196
from fewshot.data.readers.cub import read_cub
from fewshot.data.readers.mini_imagenet import read_mini_imagenet
from fewshot.data.readers.records import SUBSETS, DatasetRecords, ImageRecord, check_image
from fewshot.data.readers.sop import read_sop
from fewshot.errors import DataError

READERS: dict[str, Callable[..., DatasetRecords]] = {
    "cub": read_cub,
    "mini_imagenet": read_mini_imagenet,
    "cars196": read_cars196,
    "sop": read_sop,
}
_LOCATORS = {"cub": cub.locate, "mini_imagenet": mini_imagenet.locate, "cars196": cars196.locate, "sop": sop.locate}

__all__ = ["READERS", "SUBSETS", "DatasetRecords", "ImageRecord", "check_image", "fingerprint", "read",
           "read_cars196", "read_cub", "read_mini_imagenet", "read_sop"]


def _check_name(dataset: str) -> None:
  if dataset not in READERS:
    raise DataError(f'Unknown dataset {dataset!r}; choose one of {", ".join(READERS)}.')


def read(dataset: str, data_dir) -> DatasetRecords:
  """``READERS[dataset](data_dir)``: the validated records of one dataset."""
  _check_name(dataset)
  return READERS[dataset](data_dir)


def fingerprint(dataset: str, data_dir) -> str:
  """The fingerprint of the dataset's files that ``read`` would return, without reading or validating anything.

  Costs a stat per archive and a walk of extracted folders, so a caller can find
  already-prepared data before paying for a full read (a .tgz listing inflates it).
  """
  _check_name(dataset)
  tree, _ = _LOCATORS[dataset](data_dir)
  return tree.fingerprint
