"""Helpers the dataset readers share: locating files, parsing text tables, one-line errors."""

from __future__ import annotations

import math
import pathlib
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from fewshot.data import archives
from fewshot.data.downloads import fetch_hint
from fewshot.errors import DataError

T = TypeVar("T")


def root_dir(data_dir, dataset: str, layout: str) -> pathlib.Path:
  """``data_dir`` as a path that exists; DataError naming the expected layout otherwise."""
  if not data_dir:
    raise DataError(f"Dataset {dataset} needs its files: pass --data_dir pointing at a folder holding "
                    f"{layout}{fetch_hint(dataset)}.")
  root = pathlib.Path(data_dir).expanduser()
  if not root.exists():
    raise DataError(f"{dataset} data_dir {root} does not exist; pass --data_dir pointing at a folder holding "
                    f"{layout}{fetch_hint(dataset)}.")
  return root


def locate_folder_or_archive(data_dir, dataset: str, folder: str, marker: str, layout: str,
                             keep) -> tuple[archives.FileTree, str]:
  """The dataset's folder (the one holding ``marker``) or archive ``folder``.*, and which it is; reads nothing.

  data_dir may be that folder, its parent, the archive, or the archive's parent.
  """
  root = root_dir(data_dir, dataset, layout)
  if root.is_file():
    if not archives.is_archive(root):
      raise DataError(f"{dataset} data_dir {root} is a file but not an archive; pass the folder holding {layout}.")
    archive = root
  elif (root / marker).is_file():
    return archives.open_folder(root), "folder"
  elif (root / folder / marker).is_file():
    return archives.open_folder(root / folder), "folder"
  else:
    archive = find_archive(root, folder)
    if archive is None:
      if (root / folder).is_dir():  # extracted but incomplete: say which file is missing
        return archives.open_folder(root / folder), "folder"
      raise DataError(f"Found no {dataset} in {root}; put {layout} there, or pass that folder as data_dir.")
  return archives.open_archive(archive, keep=keep), "archive"


def find_archive(folder: pathlib.Path, stem: str, suffixes: Sequence[str] = archives.ARCHIVE_SUFFIXES
                 ) -> pathlib.Path | None:
  """``folder/<stem><suffix>`` for the first suffix that exists as a file."""
  for suffix in suffixes:
    p = folder / f"{stem}{suffix}"
    if p.is_file():
      return p
  return None


def base_of(tree: archives.FileTree, marker: str) -> str | None:
  """The folder ('' or 'a/b/') of the shallowest member named ``marker``, or None if none is."""
  hits = [m for m in tree.members() if m == marker or m.endswith("/" + marker)]
  if not hits:
    return None
  best = min(hits, key=lambda m: (m.count("/"), m))
  return best[:len(best) - len(marker)]


def archive_root(tree: archives.FileTree, marker: str, dataset: str, fix: str) -> archives.FileTree:
  """The subtree of an archive rooted where its (shallowest) ``marker`` file is; lists the archive."""
  base = base_of(tree, marker)
  if base is None:
    raise DataError(f"{dataset} annotation file {marker} is missing from archive {tree.description}; {fix}.")
  return tree.subtree(base)


def safe_relative(path: str) -> bool:
  """Whether a path from an annotation file stays inside the dataset's tree."""
  parts = path.replace("\\", "/").split("/")
  return bool(path) and not path.startswith(("/", "\\")) and ".." not in parts and ":" not in parts[0]


def clip(text: str, n: int = 80) -> str:
  return text if len(text) <= n else text[:n] + "..."


def bad_line(where: str, lineno: int, expected: str, got: str, fix: str) -> DataError:
  return DataError(f"{where} line {lineno}: expected {expected}, got {clip(got)!r}; {fix}.")


def require(tree: archives.FileTree, member: str, dataset: str, holds: str, fix: str) -> None:
  """DataError unless annotation file ``member`` is in ``tree``."""
  if member not in tree:
    raise DataError(f"{dataset} annotation file {member} (with {holds}) is missing from {tree.description}; {fix}.")


def text_lines(tree: archives.FileTree, member: str, dataset: str, fix: str) -> list[tuple[int, str]]:
  """The non-blank lines of a text file as (1-based line number, stripped line)."""
  data = tree.read(member)
  try:
    text = data.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    raise DataError(f"{dataset} file {tree.where(member)} is not UTF-8 text ({e.reason} at byte {e.start}); {fix}.") from None
  return [(i, line.strip()) for i, line in enumerate(text.splitlines(), 1) if line.strip()]


def parse_rows(tree: archives.FileTree, member: str, dataset: str, *, expected: str,
               parse: Callable[[list[str]], T], fix: str, maxsplit: int = -1,
               lines: list[tuple[int, str]] | None = None) -> list[tuple[int, T]]:
  """Parses each non-blank line's whitespace-separated fields with ``parse``.

  ``parse`` raises ValueError (or IndexError) on a bad line, which becomes a DataError
  naming the file, the line, ``expected`` and what the line held.
  """
  if lines is None:
    lines = text_lines(tree, member, dataset, fix)
  rows = []
  for lineno, line in lines:
    try:
      rows.append((lineno, parse(line.split(None, maxsplit))))
    except (ValueError, IndexError):
      raise bad_line(tree.where(member), lineno, expected, line, fix) from None
  if not rows:
    raise DataError(f"{dataset} file {tree.where(member)} is empty; expected lines of {expected}; {fix}.")
  return rows


def fields(values: list[str], n: int) -> list[str]:
  if len(values) != n:
    raise ValueError(f"{len(values)} fields")
  return values


def positive_int(s: str) -> int:
  v = int(s)
  if v < 1:
    raise ValueError(s)
  return v


def finite_float(s: str) -> float:
  v = float(s)
  if not math.isfinite(v):
    raise ValueError(s)
  return v


def unique_ids(rows: list[tuple[int, tuple]], where: str, what: str, fix: str) -> dict:
  """{row[0]: (line number, row)}; DataError at the first repeated key."""
  out: dict = {}
  for lineno, row in rows:
    key = row[0]
    if key in out:
      raise DataError(f"{where} line {lineno}: {what} {key} repeats line {out[key][0]}; expected each once; {fix}.")
    out[key] = (lineno, row)
  return out


def check_same_ids(ids: Iterable, ref_where: str, table: dict, where: str, what: str, fix: str) -> None:
  """DataError unless ``table`` has exactly the keys ``ids`` (listed in ``ref_where``)."""
  ids = list(ids)
  idset = set(ids)
  for key, (lineno, _) in table.items():
    if key not in idset:
      raise DataError(f"{where} line {lineno}: {what} {key} is not in {ref_where}; expected the same ids in both; {fix}.")
  absent = [k for k in ids if k not in table]
  if absent:
    raise DataError(f"{where} has no line for {len(absent)} of the {len(ids)} {what}s in {ref_where}, "
                    f"first {absent[0]}; expected one line per {what}; {fix}.")


def check_present(tree: archives.FileTree, members: Sequence[str], dataset: str, listed_in: str, fix: str) -> None:
  """DataError naming the first listed image absent from ``tree``, and how many are."""
  missing = tree.missing(members)
  if missing:
    raise DataError(f"{len(missing)} of the {len(members)} {dataset} images listed in {listed_in} are missing "
                    f"from {tree.description}, first {missing[0]}; {fix}.")
