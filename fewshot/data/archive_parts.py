"""The parts an `archives.Source` overlays: one folder, tar or zip archive each, indexed lazily.

Each part maps member names (`mount` + the relative, '/'-separated name) to what reads
them: a file path, a `tarfile.TarInfo` or a `zipfile.ZipInfo`. Parts check what they read:
  * an archive entry with an absolute path, a drive letter or a `..` component is
    refused (it would escape the tree if extracted);
  * a truncated or corrupt archive is a DataError naming it, including a tar that ends
    without its end-of-archive block (tarfile alone would end the listing quietly) and a
    .tgz whose gzip CRC trailer is wrong (listing reads the stream to its end).

Only regular files are members. A part pickles without its open handles. The costs of
listing and reading each kind are in the `archives` module docstring.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import pathlib
import re
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from typing import BinaryIO

from fewshot.errors import DataError, one_line

# Errors that a truncated or corrupt archive raises from tarfile/zipfile/gzip/zlib.
_ARCHIVE_ERRORS = (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError, OSError)


def _corrupt(path, e: BaseException) -> DataError:
  return DataError(f"Cannot read archive {path} ({one_line(e)}): it is truncated or corrupt; download it again.")


def _safe_name(raw: str, archive) -> str:
  """The normalised member name, refusing names that would escape the tree if extracted."""
  name = raw.replace("\\", "/") if str(archive).lower().endswith(".zip") else raw
  parts = [p for p in name.split("/") if p not in ("", ".")]
  if name.startswith("/") or re.match(r"[A-Za-z]:", name) or ".." in parts:
    raise DataError(f'Archive {archive} has an unsafe entry {raw!r} (absolute path or ".." component); '
                    'use the official archive or extract it yourself and pass the folder.')
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
  """Files under `path`, named `mount + relative path`; only `files` when given."""

  kind = "folder"

  def __init__(self, path: pathlib.Path, mount: str, files: tuple[str, ...] | None):
    super().__init__(path, mount)
    self.files = files
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
      # followlinks: datasets are often symlinked into place; `seen` breaks link cycles.
      for dirpath, dirnames, filenames in os.walk(self.path, followlinks=True):
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
    return str(self.index[name])


class _Tracked:
  """File wrapper that remembers the last header-sized read.

  tarfile ends a listing quietly at a truncated or garbled header; telling that from
  a proper end (a zero block) needs the block it read last, and seeking back to
  re-read it would make gzip inflate the whole archive again.
  """

  def __init__(self, f):
    self.f = f
    self.last: tuple[int, bytes] = (-1, b"")

  def read(self, n=-1):
    pos = self.f.tell()
    data = self.f.read(n)
    if n == tarfile.BLOCKSIZE:
      self.last = (pos, data)
    return data

  def seek(self, *args):
    return self.f.seek(*args)

  def tell(self):
    return self.f.tell()

  def close(self):
    self.f.close()


def _open_stream(path: pathlib.Path):
  """The archive's tar stream, decompressed on the fly (gzip, and bzip2/xz by their magic)."""
  with open(path, "rb") as f:
    magic = f.read(6)
  if magic[:2] == b"\x1f\x8b":
    return gzip.GzipFile(path, "rb")
  if magic[:3] == b"BZh":
    return bz2.BZ2File(path, "rb")
  if magic == b"\xfd7zXZ\x00":
    return lzma.LZMAFile(path, "rb")
  return open(path, "rb")


class TarPart(Part):
  kind = "tar"

  def __init__(self, path, mount, keep: Callable[[str], bool] | None):
    super().__init__(path, mount)
    self.keep = keep
    self.kept: dict[str, bytes] = {}
    self._handle: tarfile.TarFile | None = None
    self._stream: _Tracked | None = None

  def _tar(self) -> tarfile.TarFile:
    if self._handle is None:
      try:
        self._stream = _Tracked(_open_stream(self.path))
        self._handle = tarfile.TarFile(fileobj=self._stream, mode="r")
      except _ARCHIVE_ERRORS as e:
        self.close()
        raise _corrupt(self.path, e) from None
    return self._handle

  def _build_index(self):
    tf = self._tar()
    index = {}
    try:
      for info in tf:
        name = _safe_name(info.name, self.path)
        if info.isfile():
          index[self.mount + name] = info
          if self.keep is not None and self.keep(self.mount + name):
            self.kept[self.mount + name] = tf.extractfile(info).read()
      pos, block = self._stream.last
      if pos != tf.offset or len(block) < tarfile.BLOCKSIZE or block.count(0) != len(block):
        raise tarfile.ReadError(f"no end-of-archive block after entry {len(index)}")
      while self._stream.read(1 << 20):  # to the end, so gzip checks its CRC trailer
        pass
    except _ARCHIVE_ERRORS as e:
      raise _corrupt(self.path, e) from None
    return index

  def open(self, name):
    if name in self.kept:
      return io.BytesIO(self.kept[name])
    try:
      return self._tar().extractfile(self.index[name])
    except _ARCHIVE_ERRORS as e:
      raise _corrupt(self.path, e) from None

  def read(self, name):
    if name in self.kept:
      return self.kept[name]
    try:
      return self._tar().extractfile(self.index[name]).read()
    except _ARCHIVE_ERRORS as e:
      raise DataError(f"Cannot read {name[len(self.mount):]} from archive {self.path} ({one_line(e)}): "
                      "the archive is truncated or corrupt; download it again.") from None

  def order(self, name):
    return self.index[name].offset_data

  def close(self):
    if self._handle is not None:
      self._handle.close()
    if self._stream is not None:
      self._stream.close()
    self._handle = self._stream = None


class ZipPart(Part):
  kind = "zip"

  def __init__(self, path, mount):
    super().__init__(path, mount)
    self._handle: zipfile.ZipFile | None = None

  def _zip(self) -> zipfile.ZipFile:
    if self._handle is None:
      try:
        self._handle = zipfile.ZipFile(self.path)
      except _ARCHIVE_ERRORS as e:
        raise _corrupt(self.path, e) from None
    return self._handle

  def _build_index(self):
    index = {}
    for info in self._zip().infolist():
      name = _safe_name(info.filename, self.path)
      if not info.is_dir():
        index[self.mount + name] = info
    return index

  def open(self, name):
    try:
      return self._zip().open(self.index[name])
    except _ARCHIVE_ERRORS as e:
      raise _corrupt(self.path, e) from None

  def read(self, name):
    try:
      return self._zip().read(self.index[name])
    except _ARCHIVE_ERRORS as e:
      raise DataError(f"Cannot read {name[len(self.mount):]} from archive {self.path} ({one_line(e)}): "
                      "the archive is truncated or corrupt; download it again.") from None

  def order(self, name):
    return self.index[name].header_offset

  def close(self):
    if self._handle is not None:
      self._handle.close()
      self._handle = None

