"""mini-ImageNet built from a user's own ILSVRC-2012 training folder with Ravi & Larochelle's split lists.

    python -m fewshot.data.get mini_imagenet --from ILSVRC/train --to DIR

Ravi & Larochelle's lists (``lists/ravi_larochelle/``: their source, license and SHA-256s in its README) name each
image ``<wnid><8-digit index>.jpg`` (``n0153282900000005.jpg``: image 5 of class n01532829) and never say which
ILSVRC file that is. The mapping here is the convention of the widely used conversion tool,
yaoyao-liu/mini-imagenet-tools (``mini_imagenet_generator.py``): the class's files ``<wnid>_<number>.JPEG`` sorted by
their number, then the index-th of them, counting from 1. It is that tool's convention: whether it picks the very
images Ravi & Larochelle picked cannot be checked without ILSVRC's data, which this project does not hold.

The folder it leaves is the reader's csv layout (:mod:`fewshot.data.readers.mini_imagenet`): ``train.csv``,
``val.csv``, ``test.csv`` (the lists as shipped) and ``images/<name>``, each image resized to 84x84 as the tool and
the published dataset have it (PIL's BOX filter, the analogue of the tool's OpenCV INTER_AREA; JPEG quality 95), or
copied as it is (``resize=0``). Every listed image is checked before anything is written (the first missing one is
named in one line, with how many more); class folders still tarred are refused. The build goes into
``.mini_imagenet.partial/`` (hidden: no reader looks there) and moves into place only when complete, so a failed or
interrupted build leaves nothing where the reader looks; ``.mini_imagenet.built`` then records what was built (the
lists' SHA-256s and the side), and a re-run that finds it and every file in place does nothing.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import json
import os
import pathlib
import re
import shutil
import sys

from fewshot.data.class_lists import LISTS
from fewshot.errors import ConfigError, DataError, one_line

RAVI_LAROCHELLE = LISTS / "ravi_larochelle"
CSVS = ("train.csv", "val.csv", "test.csv")
HEADER = "filename,label"
SIDE = 84  # Ravi & Larochelle's, and the tool's default
MARKER = ".mini_imagenet.built"
PARTIAL = ".mini_imagenet.partial"
_OLD = ".mini_imagenet.replaced"
_ROW = re.compile(r"(n\d{8})(\d{8})\.jpg,(n\d{8})")
_TARRED = ("{wnid}.tar: ILSVRC's class archives must be extracted first (mkdir {wnid} && tar xf {wnid}.tar -C "
           "{wnid}, for each class), then run the command again")


def read_lists(folder: str | os.PathLike = RAVI_LAROCHELLE) -> dict[str, list[tuple[str, str, int]]]:
  """{csv file: [(image name, wnid, index)]} of a folder of lists; a one-line ``DataError`` for a bad one."""
  root, lists, seen = pathlib.Path(folder), {}, {}
  for csv in CSVS:
    try:
      lines = (root / csv).read_text().splitlines()
    except OSError as e:
      raise DataError(f"mini-ImageNet list {root / csv} is unreadable ({e.strerror or e}); reinstall fewshot, or "
                      "pass a folder holding train.csv, val.csv and test.csv.") from None
    if not lines or lines[0].strip() != HEADER:
      raise DataError(f"mini-ImageNet list {root / csv} does not start with the header {HEADER!r}; fix the file.")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
      row = _ROW.fullmatch(line.strip())
      if row is None or row[1] != row[3] or int(row[2]) < 1:
        raise DataError(f"mini-ImageNet list {root / csv} line {number} is {line!r}; expected "
                        "'<wnid><8-digit index from 1>.jpg,<the same wnid>'; fix the file.")
      if seen.setdefault(row[1], csv) != csv:
        raise DataError(f"mini-ImageNet list {root / csv} line {number}: class {row[1]} is also in "
                        f"{seen[row[1]]}; the splits' classes must be disjoint; fix the files.")
      rows.append((f"{row[1]}{row[2]}.jpg", row[1], int(row[2])))
    lists[csv] = rows
  return lists


def class_files(folder: pathlib.Path, wnid: str) -> list[pathlib.Path]:
  """The files ``<wnid>_<number>.<ext>`` of a class folder, sorted by their number (the tool's order)."""
  name = re.compile(rf"{wnid}_(\d+)\.[A-Za-z]+")
  found = [(int(m[1]), p) for p in folder.iterdir() if (m := name.fullmatch(p.name))]
  return [p for _, p in sorted(found)]


def _train_folder(source: str | os.PathLike) -> pathlib.Path:
  """The folder holding the class folders: ``source``, or its ``train/`` (ILSVRC's root passed instead)."""
  root = pathlib.Path(source).expanduser()
  if not root.is_dir():
    raise DataError(f"ILSVRC-2012 training folder {root} is not a folder; pass --from the train/ folder holding "
                    "one folder of <wnid>_<number>.JPEG files per class.")
  if (root / "train").is_dir() and not any(re.fullmatch(r"n\d{8}(\.tar)?", p.name) for p in root.iterdir()):
    return root / "train"
  return root


def sources(source: str | os.PathLike, lists: dict) -> list[tuple[pathlib.Path, str]]:
  """(ILSVRC file, image name) of every listed image, by the tool's convention; a one-line ``DataError`` naming
  the first missing image (and how many more are missing) or a class folder still tarred.
  """
  root = _train_folder(source)
  planned, missing = [], []
  for rows in lists.values():
    by_class: dict[str, list[tuple[str, int]]] = {}
    for name, wnid, index in rows:
      by_class.setdefault(wnid, []).append((name, index))
    for wnid, images in by_class.items():
      folder = root / wnid
      if not folder.is_dir() and (root / f"{wnid}.tar").is_file():
        raise DataError(f"ILSVRC-2012 class {root / wnid}.tar is a tar file, where its folder was expected: "
                        + _TARRED.format(wnid=wnid) + ".")
      files = class_files(folder, wnid) if folder.is_dir() else []
      for name, index in images:
        if index <= len(files):
          planned.append((files[index - 1], name))
        else:
          held = f"which holds {len(files)}" if folder.is_dir() else "which does not exist"
          missing.append(f"{name} (file {index} by number of {folder}/, {held})")
  if missing:
    more = f", and {len(missing) - 1:,} more of the {sum(map(len, lists.values())):,} listed" if len(missing) > 1 else ""
    raise DataError(f"ILSVRC-2012 image missing for mini-ImageNet: {missing[0]}{more}; pass --from the complete "
                    "ILSVRC-2012 train/ folder, each class extracted into its own folder.")
  return planned


def _record(lists_folder: pathlib.Path, resize: int, count: int) -> dict:
  digests = {csv: hashlib.sha256((lists_folder / csv).read_bytes()).hexdigest() for csv in CSVS}
  return {"lists_sha256": digests, "resize": resize, "images": count, "convention": "mini-imagenet-tools"}


def is_built(to: pathlib.Path, record: dict, names: list[str]) -> bool:
  """Whether ``to`` holds this build, complete: its marker says so and every csv and image is in place."""
  with contextlib.suppress(OSError, ValueError):
    if json.loads((to / MARKER).read_text()) == {**record, "complete": True}:
      return (all(hashlib.sha256((to / csv).read_bytes()).hexdigest() == record["lists_sha256"][csv] for csv in CSVS)
              and all((to / "images" / name).is_file() for name in names))
  return False


def write_image(source: pathlib.Path, target: pathlib.Path, resize: int) -> None:
  """One image: the ILSVRC file resized square to ``resize`` px as RGB JPEG, or copied as it is (0)."""
  if not resize:
    shutil.copyfile(source, target)
    return
  from PIL import Image

  try:
    with Image.open(source) as im:
      small = im.convert("RGB").resize((resize, resize), Image.Resampling.BOX)
  except Exception as e:  # PIL raises many types (OSError, SyntaxError, ValueError) on corrupt files
    raise DataError(f"Cannot decode ILSVRC-2012 image {source} ({one_line(e)}): it is truncated or corrupt; "
                    "extract its class again and run the command again.") from None
  small.save(target, "JPEG", quality=95)


def build(source: str | os.PathLike, to: str | os.PathLike, resize: int = SIDE,
          lists: str | os.PathLike = RAVI_LAROCHELLE, progress: bool = True) -> pathlib.Path:
  """mini-ImageNet in ``to`` from ILSVRC-2012's train/ folder ``source``: see the module's docstring."""
  if isinstance(resize, bool) or not isinstance(resize, int) or resize < 0:
    raise ConfigError(f"--resize must be a side in pixels (84, Ravi & Larochelle's) or 0 (copy), got {resize!r}.")
  say = (lambda line: print(line, file=sys.stderr, flush=True)) if progress else (lambda line: None)
  folder, target = pathlib.Path(lists), pathlib.Path(to).expanduser()
  rows = read_lists(folder)
  record = _record(folder, resize, sum(map(len, rows.values())))
  if is_built(target, record, [name for r in rows.values() for name, _, _ in r]):
    say(f"mini_imagenet: {target} already holds it, complete and verified")
    return target
  ours = (target / MARKER).is_file()
  theirs = [n for n in (*CSVS, "images") if (target / n).exists()]
  if theirs and not ours:
    raise DataError(f"{target} already holds mini-ImageNet files this command did not build ({theirs[0]}); build "
                    "into another folder, or remove them first.")
  say(f"mini_imagenet: checking the {record['images']:,} listed images in {source}")
  planned = sources(source, rows)
  partial = target / PARTIAL
  try:
    _write_all(planned, partial, folder, resize, progress, say)
    (partial / MARKER).write_text(json.dumps({**record, "complete": True}))
    _move_into_place(partial, target, record)
  finally:
    shutil.rmtree(partial, ignore_errors=True)  # a failed or interrupted build leaves nothing
  say(f"mini_imagenet: {record['images']:,} images and the three lists in place in {target}")
  return target


def _write_all(planned, partial: pathlib.Path, lists: pathlib.Path, resize: int, progress: bool, say) -> None:
  import tqdm

  shutil.rmtree(partial, ignore_errors=True)  # what an earlier, killed build left
  (partial / "images").mkdir(parents=True)
  for csv in CSVS:
    shutil.copyfile(lists / csv, partial / csv)
  what = f"{resize}x{resize} JPEG" if resize else "copied as they are"
  say(f"mini_imagenet: writing {len(planned):,} images ({what}) into {partial}")
  shown = progress and sys.stderr.isatty()
  workers = min(8, os.cpu_count() or 1)  # PIL releases the GIL while it decodes and encodes
  with tqdm.tqdm(total=len(planned), unit="img", desc="mini_imagenet", disable=not shown) as bar, \
       concurrent.futures.ThreadPoolExecutor(workers) as pool:
    jobs = [pool.submit(write_image, src, partial / "images" / name, resize) for src, name in planned]
    try:
      for job in concurrent.futures.as_completed(jobs):
        job.result()
        bar.update(1)
    except BaseException:
      for job in jobs:
        job.cancel()
      raise


def _move_into_place(partial: pathlib.Path, target: pathlib.Path, record: dict) -> None:
  """The built files into ``target``, the marker last: until it is written the folder never reads as complete."""
  marker = target / MARKER
  marker.write_text(json.dumps({**record, "complete": False}))  # ours, so a rerun may replace what it moved
  old = target / _OLD
  shutil.rmtree(old, ignore_errors=True)
  if (target / "images").exists():  # an earlier build of ours (another side, or incomplete)
    os.replace(target / "images", old)
  os.replace(partial / "images", target / "images")
  for csv in CSVS:
    os.replace(partial / csv, target / csv)
  os.replace(partial / MARKER, marker)
  shutil.rmtree(old, ignore_errors=True)
