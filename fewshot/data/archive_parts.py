"""The parts an ``archives.FileTree`` overlays: one folder, tar or zip archive each, indexed lazily.

Each part maps member names (``mount`` + the relative, '/'-separated name) to what reads
them: a file path, a ``tarfile.TarInfo`` or a ``zipfile.ZipInfo``. Parts check what they read:
  * an archive entry with an absolute path, a drive letter or a ``..`` component is
    refused (it would escape the tree if extracted);
  * a truncated or corrupt archive is a DataError naming it, including a tar that ends
    without its end-of-archive block (tarfile alone would end the listing quietly) and a
    .tgz whose gzip CRC trailer is wrong (listing reads the stream to its end).

Only regular files are members. A part pickles without its open handles. The costs of
listing and reading each kind are in the ``archives`` module docstring. This module holds
the base, folder and zip parts and the checks all parts share; tar parts are in ``tar_parts``.
"""

from __future__ import annotations

import os
import pathlib
import tarfile
import zipfile
import zlib
from typing import BinaryIO

from fewshot.errors import DataError, one_line

# Errors that a truncated or corrupt archive raises from tarfile/zipfile/gzip/zlib.
ARCHIVE_ERRORS = (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError, OSError)


def corrupt(path, e: BaseException) -> DataError:
  """The error for an archive that cannot be opened or listed."""
  return DataError(f"Cannot read archive {path} ({one_line(e)}): it is truncated or corrupt; download it again.")


def unreadable(where: str, e: BaseException) -> DataError:
  """The error for one archive member (``archive:member``) that cannot be read."""
  return DataError(f"Cannot read {where} ({one_line(e)}): the archive is truncated or corrupt; download it again.")


def safe_name(raw: str, archive, backslashes: bool = False) -> str:
  """The normalised member name, refusing names that would escape the tree if extracted.

  ``backslashes``: read backslashes as separators too (zips written on Windows). A ':' in the
  first component is refused as well as a drive letter: Windows reads ``a:b`` as a stream of file ``a``.
  """
  name = raw.replace("\\", "/") if backslashes else raw
  parts = [p for p in name.split("/") if p not in ("", ".")]
  if name.startswith("/") or ".." in parts or (parts and ":" in parts[0]):
    raise DataError(f"Archive {archive} has an unsafe entry {raw!r} (an unsafe member path: absolute, naming a drive "
                    'or holding a ".." component); use the official archive or extract it yourself and pass the '
                    "folder.")
  return "/".join(parts)


class Part:
  """One folder or archive: a lazily built index of member name -> key."""

  kind = ""

  def __init__(self, path: pathlib.Path, mount: str):
    self.path = path
    self.mount = mount
    self._index: dict[str, object] | None = None

  @property
  def index(self) -> dict[str, object]:
    if self._index is None:
      self._index = self._build_index()
    return self._index

  def _build_index(self) -> dict[str, object]:
    raise NotImplementedError

  def fingerprint_items(self) -> list[tuple]:
    st = self.path.stat()
    return [(self.mount + self.path.name, st.st_size, int(st.st_mtime))]

  def open(self, name: str) -> BinaryIO:
    raise NotImplementedError

  def read(self, name: str) -> bytes:
    with self.open(name) as f:
      return f.read()

  def where(self, name: str) -> str:
    return f"{self.path}:{name[len(self.mount):]}"

  def order(self, name: str):
    """Sort key for reading many members in one cheap pass."""
    return 0

  def close(self) -> None:
    pass

  def __getstate__(self):
    state = self.__dict__.copy()
    state["_handle"] = state["_stream"] = None
    return state


class FolderPart(Part):
  """Files under ``path``, named ``mount + relative path``; only ``files`` when given.

  The walk goes in name order (a folder's files, then its sub-folders), into linked
  folders too unless ``follow_links`` is False.
  """

  kind = "folder"

  def __init__(self, path: pathlib.Path, mount: str, files: tuple[str, ...] | None, follow_links: bool = True):
    super().__init__(path, mount)
    self.files = files
    self.follow_links = follow_links
    self._stats: list[tuple] = []

  def _build_index(self):
    index, stats = {}, []
    if self.files is not None:
      for rel in self.files:
        p = self.path / rel
        if p.is_file():
          st = p.stat()
          index[self.mount + rel] = p
          stats.append((self.mount + rel, st.st_size, int(st.st_mtime)))
    else:
      seen = set()
      # Datasets are often symlinked into place; `seen` breaks link cycles.
      for dirpath, dirnames, filenames in os.walk(self.path, followlinks=self.follow_links):
        st = os.stat(dirpath)
        if (st.st_dev, st.st_ino) in seen:
          dirnames[:] = []
          continue
        seen.add((st.st_dev, st.st_ino))
        dirnames.sort()
        rel_dir = pathlib.Path(dirpath).relative_to(self.path).as_posix()
        prefix = self.mount + ("" if rel_dir == "." else rel_dir + "/")
        for fname in sorted(filenames):
          p = pathlib.Path(dirpath, fname)
          try:
            fst = p.stat()
          except OSError:  # dangling symlink: not a readable member
            continue
          index[prefix + fname] = p
          stats.append((prefix + fname, fst.st_size, int(fst.st_mtime)))
    self._stats = stats
    return index

  def fingerprint_items(self):
    self.index  # noqa: B018 -- the walk fills _stats
    return self._stats

  def open(self, name):
    try:
      return open(self.index[name], "rb")
    except OSError as e:
      raise DataError(f"Cannot read {self.index[name]} ({one_line(e)}); check that it exists and is readable.") from None

  def where(self, name):
    return str(self.path / name[len(self.mount):])


class ZipPart(Part):
  """A zip archive: listed from its central directory, read by random access."""

  kind = "zip"

  def __init__(self, path, mount):
    super().__init__(path, mount)
    self._handle: zipfile.ZipFile | None = None

  def _zip(self) -> zipfile.ZipFile:
    if self._handle is None:
      try:
        self._handle = zipfile.ZipFile(self.path)
      except ARCHIVE_ERRORS as e:
        raise corrupt(self.path, e) from None
    return self._handle

  def _build_index(self):
    index = {}
    for info in self._zip().infolist():
      name = safe_name(info.filename, self.path, backslashes=True)
      if not info.is_dir():
        index[self.mount + name] = info
    return index

  def open(self, name):
    try:
      return self._zip().open(self.index[name])
    except ARCHIVE_ERRORS as e:
      raise corrupt(self.path, e) from None

  def read(self, name):
    try:
      return self._zip().read(self.index[name])
    except ARCHIVE_ERRORS as e:
      raise unreadable(self.where(name), e) from None

  def order(self, name):
    return self.index[name].header_offset

  def close(self):
    if self._handle is not None:
      self._handle.close()
      self._handle = None

