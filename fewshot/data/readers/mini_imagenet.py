"""mini-ImageNet (Ravi & Larochelle split): 100 ImageNet classes x 600 images, 64/16/20 classes.

Two layouts, in data_dir:
  * csv: train.csv, val.csv, test.csv (header ``filename,label``, label a wnid such as
    n01532829) and the images as images/<filename> (a folder, or images.zip/.tar/.tgz
    holding images/). Records: member 'images/<filename>'.
  * pickle: mini-imagenet-cache-{train,val,test}.pkl, each a dict with 'image_data'
    (uint8 [N, 84, 84, 3]) and 'class_dict' ({wnid: [row, ...]}). The arrays go to
    ``DatasetRecords.pixels`` keyed by the pickle's file name; a record's member is that
    name and its ``index`` the row, so ``records.image(r)`` gives pixels instead of bytes.
The csv layout wins when both are complete (csv files and images).

Labels: the wnids of train sorted, then val's, then test's, in both layouts, so a
class gets the same label whichever layout was read. ``subset`` is the split.
"""

from __future__ import annotations

import re

import numpy as np

from fewshot.data import archives
from fewshot.data.readers import _util, safe_pickle
from fewshot.data.readers.records import SUBSETS, DatasetRecords, ImageRecord
from fewshot.errors import DataError, one_line

NAME = "mini-ImageNet"
CSV = {s: f"{s}.csv" for s in SUBSETS}
PICKLE = {s: f"mini-imagenet-cache-{s}.pkl" for s in SUBSETS}
_LAYOUT = ("train.csv, val.csv, test.csv and images/ (Ravi & Larochelle), "
           "or mini-imagenet-cache-train.pkl, -val.pkl, -test.pkl")
_FIX_CSV = "download the split csv files and images again"
_FIX_PKL = "download the mini-imagenet-cache pickles again"
_WNID = re.compile(r"n\d{8}")
_HEADER = "filename,label"


def locate(data_dir) -> tuple[archives.FileTree, str]:
  """The mini-ImageNet files in data_dir and their layout ('csv' or 'pickle'), without reading them."""
  root = _util.root_dir(data_dir, NAME, _LAYOUT)
  if not root.is_dir():
    raise DataError(f"{NAME} data_dir {root} is not a directory; pass the folder holding {_LAYOUT}.")
  has_csv = any((root / f).is_file() for f in CSV.values())
  images = None
  if (root / "images").is_dir():
    images = archives.open_folder(root / "images", mount="images")
  elif _util.find_archive(root, "images") is not None:
    images = archives.open_archive(_util.find_archive(root, "images"))
  if has_csv and images is not None:
    return archives.overlay(archives.open_folder(root, files=CSV.values()), images), "csv"
  if any((root / f).is_file() for f in PICKLE.values()):
    return archives.open_folder(root, files=PICKLE.values()), "pickle"
  if has_csv:
    raise DataError(f"{NAME} images/ folder (or images.zip / images.tar / images.tgz) is missing from {root}, "
                    f"where the split csv files are; put the images there as images/<filename>.")
  raise DataError(f"Found no {NAME} in {root}; put {_LAYOUT} there.")


def read_mini_imagenet(data_dir) -> DatasetRecords:
  """Reads and validates mini-ImageNet's split files (csv) or pickles; no image is decoded.

  The pickles are loaded (about 1.3 GB of pixels in all) by an unpickler that
  accepts numpy arrays and nothing else, so a tampered file cannot run code.

  Raises:
    DataError: a missing split file; a bad csv header or line; a class in two splits;
      a listed image missing; an unreadable pickle, one referring to any other Python
      object, or one whose arrays and class_dict disagree.
  """
  tree, layout = locate(data_dir)
  if layout == "csv":
    return _read_csv(tree)
  return _read_pickles(tree)


def _read_csv(tree: archives.FileTree) -> DatasetRecords:
  split_rows: dict[str, list[tuple[str, str]]] = {}
  seen_file: dict[str, str] = {}
  seen_class: dict[str, str] = {}
  for subset, member in CSV.items():
    _util.require(tree, member, NAME, f"header {_HEADER!r} and <filename>,<wnid> lines", _FIX_CSV)
    where = tree.where(member)
    lines = _util.text_lines(tree, member, NAME, _FIX_CSV)
    if not lines or lines[0][1].replace(" ", "") != _HEADER:
      got = lines[0][1] if lines else ""
      raise _util.bad_line(where, lines[0][0] if lines else 1, f"the header {_HEADER!r}", got, _FIX_CSV)
    rows = []
    for lineno, line in lines[1:]:
      parts = [p.strip() for p in line.split(",")]
      if len(parts) != 2 or not _util.safe_relative(parts[0]) or "/" in parts[0] or not _WNID.fullmatch(parts[1]):
        raise _util.bad_line(where, lineno, "'<image file name>,<wnid like n01532829>'", line, _FIX_CSV)
      filename, wnid = parts
      if filename in seen_file:
        raise DataError(f"{where} line {lineno}: image {filename} is already listed in {seen_file[filename]}; "
                        f"expected each image once; {_FIX_CSV}.")
      if seen_class.setdefault(wnid, member) != member:
        raise DataError(f"{where} line {lineno}: class {wnid} is also in {seen_class[wnid]}; "
                        f"expected disjoint classes per split; {_FIX_CSV}.")
      seen_file[filename] = member
      rows.append((filename, wnid))
    if not rows:
      raise DataError(f"{NAME} file {where} lists no images; expected <filename>,<wnid> lines; {_FIX_CSV}.")
    split_rows[subset] = rows

  class_names = _class_order({s: {w for _, w in rows} for s, rows in split_rows.items()})
  label = {w: i for i, w in enumerate(class_names)}
  records = tuple(ImageRecord(member=f"images/{f}", label=label[w], subset=s)
                  for s, rows in split_rows.items() for f, w in rows)
  _util.check_present(tree, [r.member for r in records], NAME, "the split csv files", _FIX_CSV)
  return DatasetRecords("mini_imagenet", "csv", class_names, records, tree, tree.fingerprint)


def _class_order(classes: dict[str, set[str]]) -> tuple[str, ...]:
  return tuple(w for s in SUBSETS for w in sorted(classes[s]))


def _read_pickles(tree: archives.FileTree) -> DatasetRecords:
  pixels: dict[str, np.ndarray] = {}
  class_rows: dict[str, dict[str, list[int]]] = {}
  seen_class: dict[str, str] = {}
  for subset, member in PICKLE.items():
    _util.require(tree, member, NAME, "a pickled dict of 'image_data' and 'class_dict'", _FIX_PKL)
    where = tree.where(member)
    images, class_dict = _load_cache(tree, member)
    for wnid in class_dict:
      if seen_class.setdefault(wnid, member) != member:
        raise DataError(f"{NAME} pickle {where} has class {wnid}, which is also in {seen_class[wnid]}; "
                        f"expected disjoint classes per split; {_FIX_PKL}.")
    pixels[member] = images
    class_rows[subset] = class_dict

  class_names = _class_order({s: set(d) for s, d in class_rows.items()})
  label = {w: i for i, w in enumerate(class_names)}
  records = tuple(ImageRecord(member=PICKLE[s], label=label[w], subset=s, index=i)
                  for s in SUBSETS for w in sorted(class_rows[s]) for i in class_rows[s][w])
  return DatasetRecords("mini_imagenet", "pickle", class_names, records, tree, tree.fingerprint, pixels)


def _load_cache(tree: archives.FileTree, member: str) -> tuple[np.ndarray, dict[str, list[int]]]:
  """One cache pickle, validated: (uint8 [N, H, W, 3], {wnid: rows covering 0..N-1 once})."""
  where = tree.where(member)
  with tree.open(member) as f:
    try:
      obj = safe_pickle.load(f, f"{NAME} pickle {where}", _FIX_PKL)
    except DataError:
      raise
    except Exception as e:  # truncation and corruption surface as many types
      raise DataError(f"{NAME} pickle {where} is truncated or corrupt ({one_line(e)}); {_FIX_PKL}.") from None

  def bad(expected: str) -> DataError:
    return DataError(f"{NAME} pickle {where}: expected {expected}; {_FIX_PKL}.")

  if not isinstance(obj, dict) or not {"image_data", "class_dict"} <= obj.keys():
    raise bad(f"a dict with keys 'image_data' and 'class_dict', got {type(obj).__name__}"
              + (f" with keys {sorted(map(str, obj))}" if isinstance(obj, dict) else ""))
  images, class_dict = obj["image_data"], obj["class_dict"]
  if not isinstance(images, np.ndarray) or images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
    got = f"{images.dtype} {images.shape}" if isinstance(images, np.ndarray) else type(images).__name__
    raise bad(f"'image_data' to be a uint8 [N, H, W, 3] array, got {got}")
  if not isinstance(class_dict, dict) or not class_dict:
    raise bad(f"'class_dict' to be a non-empty dict of wnid -> image rows, got {type(class_dict).__name__}")
  n = len(images)
  owner = np.full(n, -1, np.int64)
  rows_of: dict[str, list[int]] = {}
  for k, (wnid, rows) in enumerate(class_dict.items()):
    if not isinstance(wnid, str) or not _WNID.fullmatch(wnid):
      raise bad(f"'class_dict' keys to be wnids like n01532829, got {_util.clip(repr(wnid))}")
    try:
      arr = np.asarray(rows)
      ok = arr.ndim == 1 and len(arr) > 0 and (arr.dtype.kind in "iu" or arr.dtype == object)
      arr = arr.astype(np.int64) if ok else arr
    except (TypeError, ValueError, OverflowError):
      ok = False
    if not ok:
      raise bad(f"'class_dict'[{wnid!r}] to be a non-empty list of image rows, got {_util.clip(repr(rows))}")
    if arr.min() < 0 or arr.max() >= n:
      raise bad(f"'class_dict'[{wnid!r}] rows in 0..{n - 1} (image_data has {n} images), got {int(arr.min())}..{int(arr.max())}")
    taken = arr[owner[arr] != -1]
    if len(taken) or len(np.unique(arr)) != len(arr):
      row = int(taken[0]) if len(taken) else int(arr[np.argmax(np.bincount(arr))])
      raise bad(f"each image row in one class of 'class_dict' once, but row {row} repeats in {wnid!r}")
    owner[arr] = k
    rows_of[wnid] = arr.tolist()
  if np.any(owner == -1):
    raise bad(f"'class_dict' to cover every image row, but {int(np.sum(owner == -1))} of {n} are in no class, "
              f"first row {int(np.argmax(owner == -1))}")
  return images, rows_of
