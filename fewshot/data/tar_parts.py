"""The tar part an ``archives.FileTree`` overlays: a .tar, .tgz or .tar.gz (bzip2 and xz too), read as a stream.

A compressed tar has no random access, so the listing reads the whole stream once, and
checks that the archive ends with its end-of-archive block (tarfile alone would end a
truncated listing quietly) and, by reading to the end, that a gzip CRC trailer is right.
What listing and reading cost is in the ``archives`` module docstring.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import pathlib
import tarfile
from collections.abc import Callable

from fewshot.data.archive_parts import ARCHIVE_ERRORS, Part, corrupt, safe_name, unreadable


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
  """A .tar, .tar.gz or .tgz (or bzip2/xz-compressed tar); ``keep``: members held in memory while listing."""

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
      except ARCHIVE_ERRORS as e:
        self.close()
        raise corrupt(self.path, e) from None
    return self._handle

  def _build_index(self):
    tf = self._tar()
    index = {}
    try:
      for info in tf:
        name = safe_name(info.name, self.path)
        if info.isfile():
          index[self.mount + name] = info
          if self.keep is not None and self.keep(self.mount + name):
            self.kept[self.mount + name] = tf.extractfile(info).read()
      pos, block = self._stream.last
      if pos != tf.offset or len(block) < tarfile.BLOCKSIZE or block.count(0) != len(block):
        raise tarfile.ReadError(f"no end-of-archive block after entry {len(index)}")
      while self._stream.read(1 << 20):  # to the end, so gzip checks its CRC trailer
        pass
    except ARCHIVE_ERRORS as e:
      raise corrupt(self.path, e) from None
    return index

  def open(self, name):
    if name in self.kept:
      return io.BytesIO(self.kept[name])
    try:
      return self._tar().extractfile(self.index[name])
    except ARCHIVE_ERRORS as e:
      raise corrupt(self.path, e) from None

  def read(self, name):
    if name in self.kept:
      return self.kept[name]
    try:
      return self._tar().extractfile(self.index[name]).read()
    except ARCHIVE_ERRORS as e:
      raise unreadable(self.where(name), e) from None

  def order(self, name):
    return self.index[name].offset_data

  def close(self):
    if self._handle is not None:
      self._handle.close()
    if self._stream is not None:
      self._stream.close()
    self._handle = self._stream = None
