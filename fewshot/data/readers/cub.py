"""CUB-200-2011: 11,788 bird photos in 200 species, with one bounding box each.

Layout (as in the official CUB_200_2011.tgz):
    CUB_200_2011/images.txt               <image id> <path under images/>
    CUB_200_2011/image_class_labels.txt   <image id> <class id 1..200>
    CUB_200_2011/classes.txt              <class id> <name, e.g. 001.Black_footed_Albatross>
    CUB_200_2011/bounding_boxes.txt       <image id> <x> <y> <width> <height>   (float pixels)
    CUB_200_2011/train_test_split.txt     <image id> <1: train, 0: test>        (optional)
    CUB_200_2011/images/<class folder>/<name>.jpg
data_dir may be that folder, its parent, the parent of CUB_200_2011.tgz, or the archive itself.

Records: member 'images/<path>', label = rank of the class id (class id 1 -> 0),
bbox as given in bounding_boxes.txt, subset 'train'/'test' from train_test_split.txt
(the classification split, not a class split) or None without it.
"""

from __future__ import annotations

from fewshot.data import archives
from fewshot.data.readers import _util
from fewshot.data.readers.records import DatasetRecords, ImageRecord
from fewshot.errors import DataError

NAME = "CUB-200-2011"
FOLDER = "CUB_200_2011"
_LAYOUT = f"{FOLDER}.tgz or its extracted {FOLDER}/ folder (images.txt, classes.txt, images/, ...)"
_FIX = f"re-extract {FOLDER}.tgz (or download it again)"
_EXPECTED = {
    "images.txt": "<image id> <relative path>",
    "image_class_labels.txt": "<image id> <class id>",
    "classes.txt": "<class id> <class name>",
    "bounding_boxes.txt": "<image id> <x> <y> <width> <height>",
    "train_test_split.txt": "<image id> <is_training_image 0 or 1>",
}


def _keep(name: str) -> bool:
  return name.rsplit("/", 1)[-1] in _EXPECTED


def locate(data_dir) -> tuple[archives.FileTree, str]:
  """The CUB folder or archive and its layout ('folder' or 'archive'), without reading it."""
  return _util.locate_folder_or_archive(data_dir, NAME, FOLDER, "images.txt", _LAYOUT, _keep)


def read_cub(data_dir) -> DatasetRecords:
  """Reads and validates CUB-200-2011's annotations; no image is decoded.

  Raises:
    DataError: a missing or malformed annotation file (naming file, line and the
      expected form), ids that disagree between files, or listed images missing.
  """
  tree, layout = locate(data_dir)
  if layout == "archive":
    tree = _util.archive_root(tree, "images.txt", NAME, _FIX)
  for member in ("images.txt", "image_class_labels.txt", "classes.txt", "bounding_boxes.txt"):
    _util.require(tree, member, NAME, f"lines {_EXPECTED[member]!r}", _FIX)

  def rows(member, parse, maxsplit=-1):
    expected = repr(_EXPECTED[member]) + (" with width, height > 0" if member == "bounding_boxes.txt" else "")
    parsed = _util.parse_rows(tree, member, NAME, expected=expected, parse=parse,
                              fix=_FIX, maxsplit=maxsplit)
    return _util.unique_ids(parsed, tree.where(member), "image id" if member != "classes.txt" else "class id", _FIX)

  def image_path(f):
    _util.fields(f, 2)
    if not _util.safe_relative(f[1]):
      raise ValueError(f[1])
    return _util.positive_int(f[0]), f[1]

  images = rows("images.txt", image_path, maxsplit=1)
  labels = rows("image_class_labels.txt", lambda f: tuple(map(_util.positive_int, _util.fields(f, 2))))
  classes = rows("classes.txt", lambda f: (_util.positive_int(_util.fields(f, 2)[0]), f[1]), maxsplit=1)
  boxes = rows("bounding_boxes.txt", _bbox_row)
  split = None
  if "train_test_split.txt" in tree:
    split = rows("train_test_split.txt", _split_row)

  class_ids = sorted(classes)
  if class_ids != list(range(1, len(class_ids) + 1)):
    gap = next(i for i, c in enumerate(class_ids, 1) if c != i)
    raise DataError(f'{tree.where("classes.txt")}: class ids must run 1..{len(class_ids)}, but {gap} is missing; {_FIX}.')
  class_names = tuple(classes[c][1][1] for c in class_ids)
  for table, member in ((labels, "image_class_labels.txt"), (boxes, "bounding_boxes.txt"),
                        (split, "train_test_split.txt")):
    if table is not None:
      _util.check_same_ids(images, tree.where("images.txt"), table, tree.where(member), "image id", _FIX)
  for image_id, (lineno, (_, class_id)) in labels.items():
    if class_id not in classes:
      raise _util.bad_line(tree.where("image_class_labels.txt"), lineno,
                           f"a class id listed in classes.txt (1..{len(class_ids)})", f"{image_id} {class_id}", _FIX)

  records = tuple(
      ImageRecord(member=f"images/{path}", label=labels[image_id][1][1] - 1,
                  subset=None if split is None else split[image_id][1][1], bbox=boxes[image_id][1][1:])
      for image_id, (_, (_, path)) in images.items())
  _util.check_present(tree, [r.member for r in records], NAME, "images.txt", _FIX)
  return DatasetRecords("cub", layout, class_names, records, tree, tree.fingerprint)


def _bbox_row(f: list[str]) -> tuple:
  _util.fields(f, 5)
  x, y, w, h = map(_util.finite_float, f[1:])
  if w <= 0 or h <= 0:
    raise ValueError("empty box")
  return (_util.positive_int(f[0]), x, y, w, h)


def _split_row(f: list[str]) -> tuple:
  _util.fields(f, 2)
  if f[1] not in ("0", "1"):
    raise ValueError(f[1])
  return (_util.positive_int(f[0]), "train" if f[1] == "1" else "test")
