"""A dataset's files as one read-only tree, whether extracted folders or archives (.tgz/.tar.gz/.tar/.zip).

    tree = archives.open_path('/data/CUB_200_2011.tgz').subtree('CUB_200_2011/')
    tree.members()                   # ['attributes/...', 'images.txt', 'images/001.Black_footed_Albatross/...', ...]
    tree.read('images.txt')          # bytes
    for member, data in tree.iter_read(names): ...  # many members, in the cheapest order

Member names are relative and '/'-separated, the same whether a file comes from
a folder or from an archive, so records keyed on them do not depend on how the
researcher stored the dataset. Several folders and archives can be overlaid into
one tree (``overlay``), e.g. Cars196's ``cars_train.tgz`` beside an extracted ``devkit/``, or
Omniglot's zips beside their extracted folders (``open_folder_with_zips``).

Nothing is extracted to disk. Costs, per kind of part:
  * folder: listing walks the folder once (one stat per file, for the fingerprint);
    reads are plain file reads.
  * zip: listing reads the central directory only; reads are random access.
  * .tar: listing reads every header (seeks over the data); reads are random access.
  * .tgz / .tar.gz: gzip has no random access, so listing inflates the whole archive
    once (CUB's 1.1 GB in several seconds). A read seeks in the inflated stream: forward
    is inflate-and-discard, backward restarts from the start. Read many members with
    ``iter_read``, which goes in archive order (one pass in all); small files wanted
    during listing (annotations) are kept in memory by ``open_archive(keep=...)``.

Only regular files are members: directories, links and devices in an archive are
not (links would need resolving, and the datasets here have none).

A FileTree is not thread-safe (archive handles are shared); it pickles without its
open handles (the listing travels along), so give each worker process its own copy.

This module holds the tree (``FileTree``) and the ways to open one; the parts of each kind,
with their checks on unsafe member names and truncated archives, are in ``archive_parts``
(folders, zips) and ``tar_parts``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import zipfile
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from fewshot.data.archive_parts import FolderPart, Part, ZipPart
from fewshot.data.tar_parts import TarPart
from fewshot.errors import DataError

TAR_SUFFIXES = (".tar.gz", ".tgz", ".tar")
ARCHIVE_SUFFIXES = TAR_SUFFIXES + (".zip",)


def is_archive(path: str | os.PathLike) -> bool:
  """Whether ``path`` names an archive this module reads (by its suffix)."""
  return str(path).lower().endswith(ARCHIVE_SUFFIXES)


def is_zip(path: str | os.PathLike) -> bool:
  """Whether ``path`` is a file holding a zip, by its content (whatever its name)."""
  return pathlib.Path(path).is_file() and zipfile.is_zipfile(path)


@dataclasses.dataclass
class FileTree:
  """Read-only tree of members overlaid from folders and archives (first part wins on a clash).

  ``prefix`` makes a view of a subtree (see ``subtree``); members are named relative to it.
  Listing is lazy: ``fingerprint`` of an archive only stats it, while ``members``, ``in``
  and reads build the index (see the module docstring for what that costs).
  """

  parts: tuple[Part, ...]
  prefix: str = ""

  def _find(self, member: str) -> tuple[Part, str] | None:
    name = self.prefix + member
    for part in self.parts:
      if name in part.index:
        return part, name
    return None

  def _get(self, member: str) -> tuple[Part, str]:
    found = self._find(member)
    if found is None:
      raise DataError(f"{member} is not in {self.description}; check data_dir and re-extract the dataset.")
    return found

  @property
  def description(self) -> str:
    """The folders and archives, for messages."""
    where = ", ".join(str(p.path) for p in self.parts)
    return f"{where} (under {self.prefix})" if self.prefix else where

  @property
  def kinds(self) -> tuple[str, ...]:
    """'folder', 'tar' or 'zip' per part."""
    return tuple(p.kind for p in self.parts)

  def members(self) -> list[str]:
    """All member names (files only), sorted."""
    return sorted(self.stored_members())

  def stored_members(self) -> list[str]:
    """All member names in the order the parts store them: part by part, each in archive order
    or folder walk order; a name that several parts hold is listed once, where it comes first.
    """
    names: dict[str, None] = {}
    for part in self.parts:
      names.update((n[len(self.prefix):], None) for n in part.index if n.startswith(self.prefix))
    return list(names)

  def __contains__(self, member: str) -> bool:
    return self._find(member) is not None

  def missing(self, members: Iterable[str]) -> list[str]:
    """Those of ``members`` that are not in the tree, in the given order."""
    return [m for m in members if m not in self]

  def read(self, member: str) -> bytes:
    """A member's bytes; DataError if absent or if its archive is corrupt."""
    part, name = self._get(member)
    return part.read(name)

  def open(self, member: str) -> BinaryIO:
    """A member as a binary file object (for readers that stream, like the pickle loader)."""
    part, name = self._get(member)
    return part.open(name)

  def where(self, member: str) -> str:
    """Where a member lives, for messages: a file path, or ``archive:member``; for an absent one
    (a folder, a file expected), where it would be.
    """
    found = self._find(member)
    if found is not None:
      return found[0].where(found[1])
    if len(self.parts) == 1:
      return self.parts[0].where(self.prefix + member)
    return f"{self.description}:{self.prefix}{member}"

  def iter_read(self, members: Iterable[str]) -> Iterator[tuple[str, bytes]]:
    """Yields (member, bytes) for each of ``members``, in the order cheapest for the tree.

    For a .tgz that is archive order, so reading every image is one pass over the
    archive instead of one pass per backward seek. Callers that need another order
    must key on the member name.
    """
    located = [(m, *self._get(m)) for m in members]
    ranks = {id(p): i for i, p in enumerate(self.parts)}
    located.sort(key=lambda t: (ranks[id(t[1])], t[1].order(t[2])))
    for member, part, name in located:
      yield member, part.read(name)

  def source(self, member: str) -> str:
    """What holds ``member`` at the tree's top: an archive's file name, or a folder's first component (``name/``)."""
    part, name = self._get(member)
    return name.split("/")[0] + "/" if part.kind == "folder" else part.path.name

  def subtree(self, prefix: str) -> FileTree:
    """The view of the members under ``prefix`` ('a/b/' or ''), named relative to it."""
    prefix = prefix.strip("/")
    return FileTree(self.parts, self.prefix + (prefix + "/" if prefix else ""))

  @property
  def fingerprint(self) -> str:
    """Hash of the names, sizes and mtimes of the files and archives (not of their contents).

    Cheap, and any re-download, re-extraction or edit gives fresh prepared data
    instead of stale. Copying the files elsewhere keeps it only if mtimes are kept.
    A subtree view has its whole tree's fingerprint, so it is known before an
    archive is listed to find the subtree.
    """
    items = sorted((name, size, mtime) for _, name, size, mtime in self.file_stats())
    return hashlib.sha1(repr(items).encode()).hexdigest()[:12]

  def file_stats(self) -> list[tuple[str, str, int, int]]:
    """(kind, name, bytes, whole-second mtime) of each archive (its file name, kind 'tar' or 'zip')
    and of each folder file (its member name, kind 'folder'): what ``fingerprint`` hashes.
    """
    return [(part.kind, *item) for part in self.parts for item in part.fingerprint_items()]

  def close(self) -> None:
    for part in self.parts:
      part.close()

  def __enter__(self) -> FileTree:
    return self

  def __exit__(self, *exc) -> None:
    self.close()


def _folder(path: str | os.PathLike) -> pathlib.Path:
  p = pathlib.Path(path).expanduser()
  if not p.is_dir():
    raise DataError(f"{p} does not exist or is not a directory; check data_dir.")
  return p


def open_folder(path: str | os.PathLike, *, mount: str = "", files: Iterable[str] | None = None,
                follow_links: bool = True) -> FileTree:
  """The files under folder ``path``, named ``mount + relative path``; only ``files`` (relative) when given.

  ``follow_links`` False leaves linked folders out of the walk (linked files stay members).
  """
  mount = mount.strip("/") + "/" if mount.strip("/") else ""
  return FileTree((FolderPart(_folder(path), mount, None if files is None else tuple(files), follow_links),))


def open_folder_with_zips(path: str | os.PathLike, *, follow_links: bool = True,
                          zips: Callable[[str], bool] | None = None) -> FileTree:
  """The zips directly in folder ``path`` (``*.zip``, in name order; only those whose file name ``zips`` keeps,
  where given), then the folder's own files, overlaid.

  Members keep the names they have in their zip or under the folder, so a zip and its
  extracted copy overlap and the zip wins; the zip files are members of the folder too.
  """
  p = _folder(path)
  zips = tuple(ZipPart(z, "") for z in sorted(p.glob("*.zip")) if zips is None or zips(z.name))
  return FileTree(zips + open_folder(p, follow_links=follow_links).parts)


def open_archive(path: str | os.PathLike, *, keep: Callable[[str], bool] | None = None) -> FileTree:
  """The files in archive ``path`` (.tgz/.tar.gz/.tar/.zip, or a zip by its content), named as stored.

  Args:
    keep: for tar archives, members (by name) to hold in memory while listing, so
      that reading them later costs no seek in the compressed stream; meant for the
      small annotation files, not images.
  """
  p = pathlib.Path(path).expanduser()
  if not p.is_file():
    raise DataError(f"Archive {p} does not exist; check data_dir.")
  lower = p.name.lower()
  if lower.endswith(TAR_SUFFIXES):
    return FileTree((TarPart(p, "", keep),))
  if lower.endswith(".zip") or zipfile.is_zipfile(p):
    return FileTree((ZipPart(p, ""),))
  raise DataError(f'{p} is not a supported archive ({", ".join(ARCHIVE_SUFFIXES)}); extract it and pass the folder.')


def open_path(path: str | os.PathLike, **kwargs) -> FileTree:
  """``open_folder`` or ``open_archive``, by what ``path`` is; keyword arguments go to the one called."""
  if pathlib.Path(path).expanduser().is_dir():
    return open_folder(path, **{k: v for k, v in kwargs.items() if k in ("mount", "files", "follow_links")})
  return open_archive(path, **{k: v for k, v in kwargs.items() if k == "keep"})


def overlay(*trees: FileTree) -> FileTree:
  """One tree from several trees (flattened to their parts; earlier ones win on a clash)."""
  for tree in trees:
    if tree.prefix:
      raise ValueError("overlay takes whole trees, not subtree views; take the subtree of the result.")
  return FileTree(tuple(part for tree in trees for part in tree.parts))
