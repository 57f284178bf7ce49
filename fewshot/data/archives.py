"""A dataset's files as one read-only tree, whether extracted folders or archives (.tgz/.tar.gz/.tar/.zip).

    src = archives.open_path('/data/CUB_200_2011.tgz').subtree('CUB_200_2011/')
    src.members()                    # ['attributes/...', 'images.txt', 'images/001.Black_footed_Albatross/...', ...]
    src.read('images.txt')           # bytes
    for member, data in src.iter_read(names): ...   # many members, in the cheapest order

Member names are relative and '/'-separated, the same whether a file comes from
a folder or from an archive, so records keyed on them do not depend on how the
researcher stored the dataset. Several folders and archives can be overlaid into
one tree (`overlay`), e.g. Cars196's `cars_train.tgz` beside an extracted `devkit/`.

Nothing is extracted to disk. Costs, per kind of part:
  * folder: listing walks the folder once (one stat per file, for the fingerprint);
    reads are plain file reads.
  * zip: listing reads the central directory only; reads are random access.
  * .tar: listing reads every header (seeks over the data); reads are random access.
  * .tgz / .tar.gz: gzip has no random access, so listing inflates the whole archive
    once (CUB's 1.1 GB in several seconds). A read seeks in the inflated stream: forward
    is inflate-and-discard, backward restarts from the start. Read many members with
    `iter_read`, which goes in archive order (one pass in all); small files wanted
    during listing (annotations) are kept in memory by `open_archive(keep=...)`.

Only regular files are members: directories, links and devices in an archive are
not (links would need resolving, and the datasets here have none).

A Source is not thread-safe (archive handles are shared); it pickles without its
open handles (the listing travels along), so give each worker process its own copy.
"""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import hashlib
import io
import lzma
import os
import pathlib
import re
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from fewshot.data.split import DataError

TAR_SUFFIXES = ('.tar.gz', '.tgz', '.tar')
ARCHIVE_SUFFIXES = TAR_SUFFIXES + ('.zip',)
# Errors that a truncated or corrupt archive raises from tarfile/zipfile/gzip/zlib.
_ARCHIVE_ERRORS = (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError, OSError)


def is_archive(path: str | os.PathLike) -> bool:
  """Whether `path` names an archive this module reads (by its suffix)."""
  return str(path).lower().endswith(ARCHIVE_SUFFIXES)


def one_line(e: BaseException) -> str:
  """An exception as a short single line, for DataError messages."""
  return ' '.join(str(e).split()) or type(e).__name__


def _corrupt(path, e: BaseException) -> DataError:
  return DataError(f'Cannot read archive {path} ({one_line(e)}): it is truncated or corrupt; download it again.')


def _safe_name(raw: str, archive) -> str:
  """The normalised member name, refusing names that would escape the tree if extracted."""
  name = raw.replace('\\', '/') if str(archive).lower().endswith('.zip') else raw
  parts = [p for p in name.split('/') if p not in ('', '.')]
  if name.startswith('/') or re.match(r'[A-Za-z]:', name) or '..' in parts:
    raise DataError(f'Archive {archive} has an unsafe entry {raw!r} (absolute path or ".." component); '
                    'use the official archive or extract it yourself and pass the folder.')
  return '/'.join(parts)


class _Part:
  """One folder or archive: a lazily built index of member name -> key."""

  kind = ''

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
    return f'{self.path}:{name[len(self.mount):]}'

  def order(self, name: str):
    """Sort key for reading many members in one cheap pass."""
    return 0

  def close(self) -> None:
    pass

  def __getstate__(self):
    state = self.__dict__.copy()
    state['_handle'] = state['_stream'] = None
    return state


class _FolderPart(_Part):
  """Files under `path`, named `mount + relative path`; only `files` when given."""

  kind = 'folder'

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
        prefix = self.mount + ('' if rel_dir == '.' else rel_dir + '/')
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
      return open(self.index[name], 'rb')
    except OSError as e:
      raise DataError(f'Cannot read {self.index[name]} ({one_line(e)}); check that it exists and is readable.') from None

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
    self.last: tuple[int, bytes] = (-1, b'')

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
  with open(path, 'rb') as f:
    magic = f.read(6)
  if magic[:2] == b'\x1f\x8b':
    return gzip.GzipFile(path, 'rb')
  if magic[:3] == b'BZh':
    return bz2.BZ2File(path, 'rb')
  if magic == b'\xfd7zXZ\x00':
    return lzma.LZMAFile(path, 'rb')
  return open(path, 'rb')


class _TarPart(_Part):
  kind = 'tar'

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
        self._handle = tarfile.TarFile(fileobj=self._stream, mode='r')
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
        raise tarfile.ReadError(f'no end-of-archive block after entry {len(index)}')
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
      raise DataError(f'Cannot read {name[len(self.mount):]} from archive {self.path} ({one_line(e)}): '
                      'the archive is truncated or corrupt; download it again.') from None

  def order(self, name):
    return self.index[name].offset_data

  def close(self):
    if self._handle is not None:
      self._handle.close()
    if self._stream is not None:
      self._stream.close()
    self._handle = self._stream = None


class _ZipPart(_Part):
  kind = 'zip'

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
      raise DataError(f'Cannot read {name[len(self.mount):]} from archive {self.path} ({one_line(e)}): '
                      'the archive is truncated or corrupt; download it again.') from None

  def order(self, name):
    return self.index[name].header_offset

  def close(self):
    if self._handle is not None:
      self._handle.close()
      self._handle = None


@dataclasses.dataclass
class Source:
  """Read-only tree of members overlaid from folders and archives (first part wins on a clash).

  `prefix` makes a view of a subtree (see `subtree`); members are named relative to it.
  Listing is lazy: `fingerprint` of an archive only stats it, while `members`, `in`
  and reads build the index (see the module docstring for what that costs).
  """

  parts: tuple[_Part, ...]
  prefix: str = ''

  def _find(self, member: str) -> tuple[_Part, str] | None:
    name = self.prefix + member
    for part in self.parts:
      if name in part.index:
        return part, name
    return None

  def _get(self, member: str) -> tuple[_Part, str]:
    found = self._find(member)
    if found is None:
      raise DataError(f'{member} is not in {self.description}; check data_dir and re-extract the dataset.')
    return found

  @property
  def description(self) -> str:
    """The folders and archives, for messages."""
    where = ', '.join(str(p.path) for p in self.parts)
    return f'{where} (under {self.prefix})' if self.prefix else where

  @property
  def kinds(self) -> tuple[str, ...]:
    """'folder', 'tar' or 'zip' per part."""
    return tuple(p.kind for p in self.parts)

  def members(self) -> list[str]:
    """All member names (files only), sorted."""
    names = set()
    for part in self.parts:
      names.update(n[len(self.prefix):] for n in part.index if n.startswith(self.prefix))
    return sorted(names)

  def __contains__(self, member: str) -> bool:
    return self._find(member) is not None

  def missing(self, members: Iterable[str]) -> list[str]:
    """Those of `members` that are not in the tree, in the given order."""
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
    """Where a member lives, for messages: a file path, or `archive:member`."""
    found = self._find(member)
    if found is None:
      return f'{self.description}:{self.prefix}{member}'
    return found[0].where(found[1])

  def iter_read(self, members: Iterable[str]) -> Iterator[tuple[str, bytes]]:
    """Yields (member, bytes) for each of `members`, in the order cheapest for the source.

    For a .tgz that is archive order, so reading every image is one pass over the
    archive instead of one pass per backward seek. Callers that need another order
    must key on the member name.
    """
    located = [(m, *self._get(m)) for m in members]
    ranks = {id(p): i for i, p in enumerate(self.parts)}
    located.sort(key=lambda t: (ranks[id(t[1])], t[1].order(t[2])))
    for member, part, name in located:
      yield member, part.read(name)

  def subtree(self, prefix: str) -> Source:
    """The view of the members under `prefix` ('a/b/' or ''), named relative to it."""
    prefix = prefix.strip('/')
    return Source(self.parts, self.prefix + (prefix + '/' if prefix else ''))

  @property
  def fingerprint(self) -> str:
    """Hash of the names, sizes and mtimes of the files and archives (not of their contents).

    Cheap, and any re-download, re-extraction or edit gives fresh prepared data
    instead of stale. Copying the files elsewhere keeps it only if mtimes are kept.
    A subtree view has its whole source's fingerprint, so it is known before an
    archive is listed to find the subtree.
    """
    items = sorted(item for part in self.parts for item in part.fingerprint_items())
    return hashlib.sha1(repr(items).encode()).hexdigest()[:12]

  def close(self) -> None:
    for part in self.parts:
      part.close()

  def __enter__(self) -> Source:
    return self

  def __exit__(self, *exc) -> None:
    self.close()


def open_folder(path: str | os.PathLike, *, mount: str = '', files: Iterable[str] | None = None) -> Source:
  """The files under folder `path`, named `mount + relative path`; only `files` (relative) when given."""
  p = pathlib.Path(path).expanduser()
  if not p.is_dir():
    raise DataError(f'{p} does not exist or is not a directory; check data_dir.')
  mount = mount.strip('/') + '/' if mount.strip('/') else ''
  return Source((_FolderPart(p, mount, None if files is None else tuple(files)),))


def open_archive(path: str | os.PathLike, *, keep: Callable[[str], bool] | None = None) -> Source:
  """The files in archive `path` (.tgz/.tar.gz/.tar/.zip), named as stored.

  Args:
    keep: for tar archives, members (by name) to hold in memory while listing, so
      that reading them later costs no seek in the compressed stream; meant for the
      small annotation files, not images.
  """
  p = pathlib.Path(path).expanduser()
  if not p.is_file():
    raise DataError(f'Archive {p} does not exist; check data_dir.')
  lower = p.name.lower()
  if lower.endswith('.zip'):
    return Source((_ZipPart(p, ''),))
  if lower.endswith(TAR_SUFFIXES):
    return Source((_TarPart(p, '', keep),))
  raise DataError(f'{p} is not a supported archive ({", ".join(ARCHIVE_SUFFIXES)}); extract it and pass the folder.')


def open_path(path: str | os.PathLike, **kwargs) -> Source:
  """`open_folder` or `open_archive`, by what `path` is; keyword arguments go to the one called."""
  if pathlib.Path(path).expanduser().is_dir():
    return open_folder(path, **{k: v for k, v in kwargs.items() if k in ('mount', 'files')})
  return open_archive(path, **{k: v for k, v in kwargs.items() if k == 'keep'})


def overlay(*sources: Source) -> Source:
  """One tree from several sources (views are flattened to their parts; earlier ones win on a clash)."""
  for s in sources:
    if s.prefix:
      raise ValueError('overlay takes whole sources, not subtree views; take the subtree of the result.')
  return Source(tuple(part for s in sources for part in s.parts))
