"""CIFAR-100 read as CIFAR-FS (Bertinetto et al. 2019) or FC100 (Oreshkin et al. 2018): 100 classes of 600 images.

Layout: the official ``cifar-100-python.tar.gz`` (169,001,437 bytes, md5 eb9058c3a382ffc7106e4002c42a8d85;
``python -m fewshot.data.get cifar100 --to DIR`` fetches it) or its extracted ``cifar-100-python/`` folder, holding
``meta``, ``train`` and ``test``: Python 2 pickles, ``train``/``test`` a dict of ``data`` (uint8 [N, 3072], each row
1,024 red, 1,024 green and 1,024 blue values in row-major order), ``fine_labels`` and ``coarse_labels``; ``meta`` the
``fine_label_names`` and ``coarse_label_names``. data_dir may be the folder holding the archive, the archive itself,
the extracted folder or its parent.

    recs = read_cifar_fs("/data/cifar100")       # or read_fc100
    recs.class_names[:2], recs.records[0]         # ('apple', 'aquarium_fish'), ImageRecord(member='train', ...)

Records: every image of ``train`` then ``test``, in file order; member ``train`` or ``test`` (the key of
``DatasetRecords.pixels``, uint8 [N, 32, 32, 3]) and ``index`` its row; label its fine label (CIFAR-100's order,
``fine_label_names``); subset the split the benchmark's list (``fewshot/data/lists/cifar_fs``, ``.../fc100``, their
sources in each README) puts its class in: CIFAR-FS lists classes, FC100 superclasses, each class following the
coarse label its images carry. CIFAR-100's own train/test partition of the images is not kept: a class's 600 images
are pooled, as both benchmarks do.
"""

from __future__ import annotations

import io

import numpy as np

from fewshot.data import archives, class_lists
from fewshot.data.readers import _util, safe_pickle
from fewshot.data.readers.records import DatasetRecords, ImageRecord
from fewshot.errors import DataError, one_line

NAME = "CIFAR-100"
FOLDER = "cifar-100-python"
ARCHIVE = f"{FOLDER}.tar.gz"
FILES = ("meta", "train", "test")
SIDE = 32
_LAYOUT = f"{ARCHIVE} (python -m fewshot.data.get cifar100 --to DIR fetches it) or its extracted {FOLDER}/ folder"
_FIX = f"download {ARCHIVE} again (python -m fewshot.data.get cifar100 --to DIR)"
# Each benchmark's list folder, and whether it lists classes (fine labels) or superclasses (coarse labels).
LISTS = {"cifar_fs": (class_lists.LISTS / "cifar_fs", "fine"), "fc100": (class_lists.LISTS / "fc100", "coarse")}


def _keep(name: str) -> bool:
  return name.rsplit("/", 1)[-1] in FILES


def locate(data_dir) -> tuple[archives.FileTree, str]:
  """The CIFAR-100 folder or archive and its layout ('folder' or 'archive'), without reading it."""
  return _util.locate_folder_or_archive(data_dir, NAME, FOLDER, "meta", _LAYOUT, _keep)


def read_cifar_fs(data_dir) -> DatasetRecords:
  """CIFAR-100 with CIFAR-FS's 64 / 16 / 20 class split as each record's subset; see the module's docstring."""
  return _read("cifar_fs", data_dir)


def read_fc100(data_dir) -> DatasetRecords:
  """CIFAR-100 with FC100's 12 / 4 / 4 superclass split (60 / 20 / 20 classes) as each record's subset."""
  return _read("fc100", data_dir)


def _read(dataset: str, data_dir) -> DatasetRecords:
  tree, layout = locate(data_dir)
  if layout == "archive":
    tree = _util.archive_root(tree, "meta", NAME, _FIX)
  for member in FILES:
    _util.require(tree, member, NAME, "a Python pickle of CIFAR-100's python version", _FIX)
  loaded = {member: _unpickle(tree, member, data) for member, data in tree.iter_read(FILES)}
  fine_names = _names(tree, loaded["meta"], "fine_label_names")
  coarse_names = _names(tree, loaded["meta"], "coarse_label_names")
  pixels, fine, coarse = {}, {}, {}
  for member in FILES[1:]:
    pixels[member], fine[member], coarse[member] = _batch(tree, member, loaded[member], len(fine_names),
                                                          len(coarse_names))
  superclass = _superclasses(tree, fine, coarse, fine_names)
  folder, level = LISTS[dataset]
  lists = class_lists.read(folder)
  listed = fine_names if level == "fine" else coarse_names
  found = class_lists.chosen(lists, list(listed), lambda name: f"the lists are {NAME}'s {level} label names; {_FIX}")
  split_of = {name: split for split, names in found.items() for name in names}
  unlisted = [name for name in listed if name not in split_of]
  if unlisted:
    raise DataError(f"{NAME}'s {level} label {unlisted[0]!r} ({tree.where('meta')}) is in none of {folder}'s lists, "
                    f"which name {len(split_of)} of its {len(listed)}; {_FIX}.")
  subset = [split_of[name] if level == "fine" else split_of[coarse_names[superclass[c]]]
            for c, name in enumerate(fine_names)]
  records = tuple(ImageRecord(member=member, label=int(label), subset=subset[label], index=row)
                  for member in FILES[1:] for row, label in enumerate(fine[member]))
  return DatasetRecords(dataset, layout, tuple(fine_names), records, tree, tree.fingerprint, pixels)


def _unpickle(tree: archives.FileTree, member: str, data: bytes):
  where = f"{NAME} file {tree.where(member)}"
  try:
    return safe_pickle.load(io.BytesIO(data), where, _FIX)
  except DataError:
    raise
  except Exception as e:  # truncation and corruption surface as many types
    raise DataError(f"{where} is truncated or corrupt ({one_line(e)}); {_FIX}.") from None


def _bad(tree: archives.FileTree, member: str, expected: str) -> DataError:
  return DataError(f"{NAME} file {tree.where(member)}: expected {expected}; {_FIX}.")


def _names(tree: archives.FileTree, meta, key: str) -> list[str]:
  names = meta.get(key) if isinstance(meta, dict) else None
  if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
    raise _bad(tree, "meta", f"a dict whose {key!r} is a list of label names")
  if len(set(names)) != len(names):
    raise _bad(tree, "meta", f"each of {key!r} once, but {next(n for n in names if names.count(n) > 1)!r} repeats")
  return names


def _labels(tree, member: str, batch: dict, key: str, n: int, classes: int) -> np.ndarray:
  try:
    labels = np.asarray(batch.get(key), np.int64)
  except (TypeError, ValueError, OverflowError):
    labels = np.zeros(0, np.int64)
  if labels.shape != (n,) or (n and (labels.min() < 0 or labels.max() >= classes)):
    raise _bad(tree, member, f"{key!r} to be {n} labels in 0..{classes - 1}, one per row of 'data'")
  return labels


def _batch(tree: archives.FileTree, member: str, batch, classes: int, superclasses: int):
  """(uint8 [N, 32, 32, 3] pixels, fine labels [N], coarse labels [N]) of a ``train``/``test`` pickle, checked."""
  data = batch.get("data") if isinstance(batch, dict) else None
  if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * SIDE ** 2:
    got = f"{data.dtype} {data.shape}" if isinstance(data, np.ndarray) else type(data).__name__
    raise _bad(tree, member, f"a dict whose 'data' is a uint8 [N, {3 * SIDE ** 2}] array, got {got}")
  n = len(data)
  fine = _labels(tree, member, batch, "fine_labels", n, classes)
  coarse = _labels(tree, member, batch, "coarse_labels", n, superclasses)
  # Each row is the three colour planes one after another: to [N, H, W, C].
  return np.ascontiguousarray(data.reshape(n, 3, SIDE, SIDE).transpose(0, 2, 3, 1)), fine, coarse


def _superclasses(tree, fine: dict, coarse: dict, fine_names: list[str]) -> np.ndarray:
  """int64 [100]: each class's superclass, the one coarse label all its images carry; every class has images."""
  pairs = np.unique(np.stack([np.concatenate(list(fine.values())), np.concatenate(list(coarse.values()))], 1), axis=0)
  classes, first = np.unique(pairs[:, 0], return_index=True)
  if len(classes) != len(pairs):
    f = int(pairs[np.setdiff1d(np.arange(len(pairs)), first)[0], 0])
    raise _bad(tree, "train", f"every image of class {fine_names[f]!r} under one coarse label, but it has "
                              f"{sorted(int(c) for c in pairs[pairs[:, 0] == f, 1])}")
  if len(classes) != len(fine_names):
    f = int(np.setdiff1d(np.arange(len(fine_names)), classes)[0])
    raise _bad(tree, "train", f"images of every class of 'fine_label_names', but {fine_names[f]!r} has none in train "
                              "or test")
  superclass = np.empty(len(fine_names), np.int64)
  superclass[pairs[:, 0]] = pairs[:, 1]
  return superclass
