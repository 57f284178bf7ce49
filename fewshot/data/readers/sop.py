"""Stanford Online Products: 120,053 eBay photos of 22,634 products in 12 super-classes.

Layout (as in the official Stanford_Online_Products.zip):
    Stanford_Online_Products/Ebay_train.txt   header ``image_id class_id super_class_id path``
    Stanford_Online_Products/Ebay_test.txt    same; classes disjoint from train's
    Stanford_Online_Products/<super class>_final/<product>_<n>.JPG
data_dir may be that folder, its parent, the parent of the zip, or the zip itself.

Records: member = the path column; label = class_id - 1 (train classes 1..11,318 ->
0..11,317, test 11,319..22,634 -> 11,318..22,633 in the real data); subset 'train' or
'test' by file. Products have no names: a class is named '<super class>/<class_id>',
e.g. 'bicycle/1', the super class taken from its image folder without '_final'.
"""

from __future__ import annotations

from fewshot.data import archives
from fewshot.data.readers import _util
from fewshot.data.readers.records import DatasetRecords, ImageRecord
from fewshot.errors import DataError

NAME = "Stanford Online Products"
FOLDER = "Stanford_Online_Products"
FILES = {"train": "Ebay_train.txt", "test": "Ebay_test.txt"}
_HEADER = "image_id class_id super_class_id path"
_LAYOUT = f"{FOLDER}.zip or its extracted {FOLDER}/ folder (Ebay_train.txt, Ebay_test.txt, <super class>_final/)"
_FIX = f"re-extract {FOLDER}.zip (or download it again)"


def _keep(name: str) -> bool:
  return name.rsplit("/", 1)[-1] in FILES.values()


def locate(data_dir) -> tuple[archives.FileTree, str]:
  """The SOP folder or archive and its layout ('folder' or 'archive'), without reading it."""
  return _util.locate_folder_or_archive(data_dir, NAME, FOLDER, FILES["train"], _LAYOUT, _keep)


def read_sop(data_dir) -> DatasetRecords:
  """Reads and validates Stanford Online Products' Ebay_train.txt / Ebay_test.txt; no image is decoded.

  Raises:
    DataError: a missing file, a bad header or line, an image id or path listed twice,
      a class in both files or in two super classes, class ids that do not run
      1..number of classes, or listed images missing.
  """
  tree, layout = locate(data_dir)
  if layout == "archive":
    tree = _util.archive_root(tree, FILES["train"], NAME, _FIX)
  rows = []
  class_info: dict[int, tuple[int, str, str]] = {}  # class_id -> (super_class_id, folder, where it was first seen)
  subset_of: dict[int, str] = {}
  seen_path: dict[str, str] = {}
  for subset, member in FILES.items():
    _util.require(tree, member, NAME, f"header {_HEADER!r} and one line per image", _FIX)
    where = tree.where(member)
    lines = _util.text_lines(tree, member, NAME, _FIX)
    if not lines or " ".join(lines[0][1].split()) != _HEADER:
      raise _util.bad_line(where, lines[0][0] if lines else 1, f"the header {_HEADER!r}",
                           lines[0][1] if lines else "", _FIX)
    parsed = _util.parse_rows(tree, member, NAME, expected="'<image_id> <class_id> <super_class_id> <path>'",
                              parse=_row, fix=_FIX, maxsplit=3, lines=lines[1:])
    _util.unique_ids(parsed, where, "image_id", _FIX)
    for lineno, (_, class_id, super_id, path) in parsed:
      here = f"{where} line {lineno}"
      if path in seen_path:
        raise DataError(f"{here}: {path} is already listed at {seen_path[path]}; expected each image once; {_FIX}.")
      seen_path[path] = here
      folder = path.split("/")[0] if "/" in path else ""
      first = class_info.setdefault(class_id, (super_id, folder, here))
      if subset_of.setdefault(class_id, subset) != subset:
        raise DataError(f"{here}: class_id {class_id} is also in {FILES[subset_of[class_id]]} ({first[2]}); "
                        f"expected train and test classes to be disjoint; {_FIX}.")
      if first[:2] != (super_id, folder):
        raise DataError(f"{here}: class_id {class_id} has super_class_id {super_id} and folder {folder!r}, "
                        f"but {first[2]} gave {first[0]} and {first[1]!r}; expected one per class; {_FIX}.")
      rows.append((class_id, subset, path))

  class_ids = sorted(class_info)
  if class_ids != list(range(1, len(class_ids) + 1)):
    gap = next(i for i, c in enumerate(class_ids, 1) if c != i)
    raise DataError(f'{NAME} class ids in {" and ".join(FILES.values())} must run 1..{len(class_ids)} without gaps, '
                    f'but {gap} is missing; {_FIX}.')
  class_names = tuple(f"{_super_name(class_info[c][1])}/{c}" for c in class_ids)
  records = tuple(ImageRecord(member=path, label=class_id - 1, subset=subset) for class_id, subset, path in rows)
  _util.check_present(tree, [r.member for r in records], NAME, " and ".join(FILES.values()), _FIX)
  return DatasetRecords("sop", layout, class_names, records, tree, tree.fingerprint)


def _row(f: list[str]) -> tuple[int, int, int, str]:
  _util.fields(f, 4)
  if not _util.safe_relative(f[3]):
    raise ValueError(f[3])
  return _util.positive_int(f[0]), _util.positive_int(f[1]), _util.positive_int(f[2]), f[3]


def _super_name(folder: str) -> str:
  return folder[:-len("_final")] if folder.endswith("_final") else (folder or "products")
