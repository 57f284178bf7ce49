"""Datasets as class splits of uint8 images, prepared once under the tfds dir and read back by random access.

    from fewshot import data
    train = data.load_split('strokes', 'train')                      # embedded, offline, 28x28x1
    test = data.load_split('omniglot', 'test', data_dir='/path/to/omniglot')
    cub = data.load_splits('cub', '/data', image_size=84)            # {'train', 'val', 'test'}: 96x96x3
    cars = data.load_splits('cars196', '/data', class_order='random', seed=1, bbox_crop=True)
    vinyals = data.load_splits('omniglot', '/data', class_splits='vinyals_published', rotations=True)
    cifar_fs = data.load_splits('cifar_fs', '/data/cifar100')       # CIFAR-100 as CIFAR-FS, 32 px: 36x36x3 stored

Each dataset is prepared once into array_record files under the tfds dir
(``default_tfds_dir``) and read back by random access; later loads reuse it.
strokes and omniglot are 28x28x1 (ink 255 on background 0) with fixed 60/20/20
class splits; omniglot also has Vinyals's (as published) and Lake's splits, class lists of
one's own (``class_lists``) and 90-degree rotations
as new classes (``omniglot.character_splits``, ``omniglot.rotated``). The image datasets
(cub, mini_imagenet, cifar_fs and fc100 from CIFAR-100, cars196, sop) are RGB, stored at int(1.15 * image_size) px, and
split by ``class_splits`` and ``class_order`` (see ``class_splits``); ``memory_plan`` says which
splits fit on the device. What each dataset can be asked for is ``catalog``, where each dataset is one
row of ``catalog.SPECS``: a new one is its reader and its row.

Its modules by role:

* what can be asked for: :mod:`~fewshot.data.catalog` (one row per dataset), :mod:`~fewshot.data.split` (``Split``);
* getting the files: :mod:`~fewshot.data.downloads` (every source, size and checksum), :mod:`~fewshot.data.fetch`,
  the command :mod:`~fewshot.data.get`, :mod:`~fewshot.data.ilsvrc` (mini-ImageNet built from one's own ILSVRC-2012);
* reading the files a researcher has: :mod:`~fewshot.data.archives` (one read-only tree) and its parts
  :mod:`~fewshot.data.archive_parts` and :mod:`~fewshot.data.tar_parts`, :mod:`~fewshot.data.readers` for the image
  datasets, :mod:`~fewshot.data.omniglot`, and :mod:`~fewshot.data.strokes` (drawn here);
* class splits: :mod:`~fewshot.data.class_splits`, :mod:`~fewshot.data.class_lists`, :mod:`~fewshot.data.holdout`;
* preparing and reading back: :mod:`~fewshot.data.tfds_io`, :mod:`~fewshot.data.images`,
  :mod:`~fewshot.data.image_decoding`, :mod:`~fewshot.data.prepared`, :mod:`~fewshot.data.loading`;
* device memory: :mod:`~fewshot.data.memory`.

Of the package it imports only the kernel (its errors, options and command runner): everything else stands on it.
The loaders (and tensorflow_datasets behind them) are imported on first use, so that configurations and analysis
can name datasets without loading that machinery.

May import: kernel (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import importlib

from fewshot.data.catalog import DATASETS, IMAGE_DATASETS, SPLITS
from fewshot.data.split import Split
from fewshot.errors import DataError

_LAZY = {"load_splits": "loading", "load_split": "loading", "default_tfds_dir": "loading", "files": "loading",
         "memory_plan": "memory"}

__all__ = ["DATASETS", "IMAGE_DATASETS", "SPLITS", "DataError", "Split", *_LAZY]


def __getattr__(name: str):
  if name in _LAZY:
    return getattr(importlib.import_module(f"fewshot.data.{_LAZY[name]}"), name)
  raise AttributeError(f"module 'fewshot.data' has no attribute {name!r}")
