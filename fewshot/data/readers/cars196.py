"""Cars196 (Stanford Cars): 16,185 car photos in 196 make/model/year classes, each with a box.

Two layouts, in data_dir:
  * devkit (the official download): cars_train/ and cars_test/ (or cars_train.tgz,
    cars_test.tgz), devkit/ (or car_devkit.tgz) with cars_meta.mat and
    cars_train_annos.mat, and cars_test_annos_withlabels.mat (in data_dir or devkit/).
    Records: member 'cars_train/<fname>' or 'cars_test/<fname>'.
  * cars_annos (one file, what most DML code reads): cars_annos.mat and car_ims/
    (or car_ims.tgz). Records: member 'car_ims/<file>' as in relative_im_path.
cars_annos wins when both are complete.

The .mat files are MATLAB structs read with scipy.io.loadmat: ``annotations`` (fields
bbox_x1, bbox_y1, bbox_x2, bbox_y2, class and fname, or relative_im_path and test)
and ``class_names`` (a cell of 196 strings).

Records: label = class - 1 (the .mat's 1-based class id), so the dml class splits'
training classes 1..98 are labels 0..97 and its test classes 99..196 are 98..195;
subset = the official train/test image split. bbox = (x, y, width, height) with x, y
0-based: the .mat's corners are 1-based inclusive MATLAB pixels, so
x = bbox_x1 - 1 and width = bbox_x2 - bbox_x1 + 1.
"""

from __future__ import annotations

import io
import pathlib

import numpy as np
import scipy.io

from fewshot.data import archives
from fewshot.data.readers import _util
from fewshot.data.readers.records import DatasetRecords, ImageRecord
from fewshot.errors import DataError, one_line

NAME = "Cars196"
TEST_LABELS = "cars_test_annos_withlabels.mat"
_LAYOUT = ("cars_train/, cars_test/ (or their .tgz), devkit/ (or car_devkit.tgz) and "
           f"{TEST_LABELS}, or cars_annos.mat with car_ims/ (or car_ims.tgz)")
_FIX = "download the Stanford Cars files again"
_BOX = ("bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2")
_DEVKIT_FIELDS = _BOX + ("class", "fname")
_ANNOS_FIELDS = ("relative_im_path",) + _BOX + ("class", "test")


def _folder_or_archive(root: pathlib.Path, name: str, stem: str) -> archives.FileTree | None:
  """``root/name/`` mounted as name/, else the archive ``root/<stem>.tgz`` (which holds name/)."""
  if (root / name).is_dir():
    return archives.open_folder(root / name, mount=name)
  archive = _util.find_archive(root, stem)
  return None if archive is None else archives.open_archive(archive)


def locate(data_dir) -> tuple[archives.FileTree, str]:
  """The Cars196 files (one tree overlaying folders and archives) and the layout ('devkit' or 'cars_annos')."""
  root = _util.root_dir(data_dir, NAME, _LAYOUT)
  if not root.is_dir():
    raise DataError(f"{NAME} data_dir {root} is not a directory; pass the folder holding {_LAYOUT}.")
  annos = (root / "cars_annos.mat").is_file()
  ims = _folder_or_archive(root, "car_ims", "car_ims")
  pieces = {name: _folder_or_archive(root, name, stem)
            for name, stem in (("cars_train", "cars_train"), ("cars_test", "cars_test"), ("devkit", "car_devkit"))}
  if annos and ims is not None:
    return archives.overlay(archives.open_folder(root, files=["cars_annos.mat"]), ims), "cars_annos"
  if not any(pieces.values()):
    if annos:
      raise DataError(f"{NAME} images car_ims/ (or car_ims.tgz) are missing from {root}, where cars_annos.mat is; "
                      "put them there.")
    raise DataError(f"Found no {NAME} in {root}; put {_LAYOUT} there.")
  for name, tree in pieces.items():
    if tree is None:
      archive = "car_devkit.tgz" if name == "devkit" else f"{name}.tgz"
      raise DataError(f"{NAME} {name}/ (or {archive}) is missing from {root}; put it there beside the others "
                      f"({_LAYOUT}).")
  extra = [archives.open_folder(root, files=[TEST_LABELS])] if (root / TEST_LABELS).is_file() else []
  return archives.overlay(*extra, *pieces.values()), "devkit"


def read_cars196(data_dir) -> DatasetRecords:
  """Reads and validates Cars196's .mat annotations; no image is decoded.

  Raises:
    DataError: a missing or unreadable .mat file, a missing variable or field, a bad
      entry (naming the file, the 1-based entry and what was expected), a class id
      outside 1..len(class_names), a file listed twice, or listed images missing.
  """
  tree, layout = locate(data_dir)
  if layout == "cars_annos":
    mat = _loadmat(tree, "cars_annos.mat", "annotations and class_names")
    class_names = _class_names(tree, "cars_annos.mat", mat)
    records = tuple(
        ImageRecord(member=a["relative_im_path"], label=a["class"] - 1,
                    subset="test" if a["test"] else "train", bbox=_bbox(a))
        for a in _annotations(tree, "cars_annos.mat", mat, _ANNOS_FIELDS, len(class_names)))
    _util.check_present(tree, [r.member for r in records], NAME, "cars_annos.mat", _FIX)
    return DatasetRecords("cars196", layout, class_names, records, tree, tree.fingerprint)

  meta = "devkit/cars_meta.mat"
  class_names = _class_names(tree, meta, _loadmat(tree, meta, "class_names"))
  test_labels = TEST_LABELS if TEST_LABELS in tree else f"devkit/{TEST_LABELS}"
  if test_labels not in tree:
    unlabeled = " (devkit/cars_test_annos.mat has no labels)" if "devkit/cars_test_annos.mat" in tree else ""
    raise DataError(f"{NAME} test labels {TEST_LABELS} are missing from {tree.description}{unlabeled}; "
                    "download it from the Stanford Cars page and put it in data_dir.")
  records = []
  for subset, member in (("train", "devkit/cars_train_annos.mat"), ("test", test_labels)):
    mat = _loadmat(tree, member, "annotations")
    for a in _annotations(tree, member, mat, _DEVKIT_FIELDS, len(class_names)):
      records.append(ImageRecord(member=f'cars_{subset}/{a["fname"]}', label=a["class"] - 1, subset=subset,
                                 bbox=_bbox(a)))
  _util.check_present(tree, [r.member for r in records], NAME, f"cars_train_annos.mat and {TEST_LABELS}", _FIX)
  return DatasetRecords("cars196", layout, class_names, tuple(records), tree, tree.fingerprint)


def _loadmat(tree: archives.FileTree, member: str, holds: str) -> dict:
  _util.require(tree, member, NAME, holds, _FIX)
  try:
    return scipy.io.loadmat(io.BytesIO(tree.read(member)), squeeze_me=True)
  except DataError:
    raise
  except Exception as e:  # scipy raises ValueError, TypeError, OSError, ... on a bad file
    raise DataError(f"{NAME} file {tree.where(member)} is not a readable MATLAB file ({one_line(e)}); "
                    f"{_FIX}.") from None


def _class_names(tree: archives.FileTree, member: str, mat: dict) -> tuple[str, ...]:
  where = tree.where(member)
  if "class_names" not in mat:
    raise DataError(f"{where} has no variable class_names; expected a cell of class name strings; {_FIX}.")
  names = np.atleast_1d(mat["class_names"])
  if names.ndim != 1 or not len(names) or not all(isinstance(n, str) and n for n in names):
    raise DataError(f"{where}: expected class_names to be a cell of non-empty strings, "
                    f"got {_util.clip(repr(names))}; {_FIX}.")
  return tuple(str(n) for n in names)


def _annotations(tree: archives.FileTree, member: str, mat: dict, fields: tuple[str, ...], num_classes: int
                 ) -> list[dict]:
  """The ``annotations`` struct array as dicts of python values, each entry checked."""
  where = tree.where(member)
  if "annotations" not in mat:
    raise DataError(f'{where} has no variable annotations; expected a struct array with fields '
                    f'{", ".join(fields)}; {_FIX}.')
  ann = np.atleast_1d(mat["annotations"])
  missing = [f for f in fields if f not in (ann.dtype.names or ())]
  if missing:
    raise DataError(f'{where}: expected annotations to be a struct array with fields {", ".join(fields)}, '
                    f'but {", ".join(missing)} {"is" if len(missing) == 1 else "are"} missing; {_FIX}.')
  out, seen = [], {}
  path_field = "fname" if "fname" in fields else "relative_im_path"
  for i, entry in enumerate(ann.ravel(), 1):
    row = {}
    for f in fields:
      try:
        row[f] = _path(entry[f], f) if f == path_field else _int(entry[f])
        if f == "class" and not 1 <= row[f] <= num_classes:
          raise ValueError
        if f == "test" and row[f] not in (0, 1):
          raise ValueError
      except ValueError:
        expected = {"class": f"a class id in 1..{num_classes} (the length of class_names)",
                    "test": "0 or 1", path_field: "a relative image path"}.get(f, "an integer")
        raise DataError(f"{where} annotation {i} of {len(ann)}: expected {f} to be {expected}, "
                        f"got {_util.clip(repr(entry[f]))}; {_FIX}.") from None
    if row["bbox_x2"] < row["bbox_x1"] or row["bbox_y2"] < row["bbox_y1"]:
      raise DataError(f"{where} annotation {i} of {len(ann)}: expected bbox_x1 <= bbox_x2 and bbox_y1 <= bbox_y2, "
                      f"got {tuple(row[b] for b in _BOX)}; {_FIX}.")
    if row[path_field] in seen:
      raise DataError(f"{where} annotation {i}: {row[path_field]} is already annotation {seen[row[path_field]]}; "
                      f"expected each image once; {_FIX}.")
    seen[row[path_field]] = i
    out.append(row)
  if not out:
    raise DataError(f"{where} has no annotations; {_FIX}.")
  return out


def _int(v) -> int:
  a = np.asarray(v)
  if a.size != 1 or a.dtype.kind not in "iuf":
    raise ValueError
  x = a.item()
  if isinstance(x, float) and not x.is_integer():
    raise ValueError
  return int(x)


def _path(v, field: str) -> str:
  a = np.asarray(v)
  s = a.item() if a.size == 1 else None
  if not isinstance(s, str) or not _util.safe_relative(s) or (field == "fname" and "/" in s):
    raise ValueError
  return s


def _bbox(a: dict) -> tuple[float, float, float, float]:
  return (float(a["bbox_x1"] - 1), float(a["bbox_y1"] - 1),
          float(a["bbox_x2"] - a["bbox_x1"] + 1), float(a["bbox_y2"] - a["bbox_y1"] + 1))
