"""Fetching a pinned file (:mod:`fewshot.data.downloads`) into a data folder: resumed, verified, then moved into place.

A file is written as ``.<name>.part`` beside where it belongs (hidden: no reader looks at it), resumed after an
interruption with an HTTP range request (also by the next command, where the network failed: only a whole file that
fails verification is deleted), checked against its size and checksum, and only then renamed to ``<name>``: a file
that failed verification is never where a reader looks, and one found there is moved to ``.<name>.failed``. A file already there is checked once and then
recognised by a marker (``.<name>.verified``: its size, time and checksum), so it is not fetched or hashed again. One
process fetches a file at a time (``.<name>.lock``); a second waits for it, then finds the file there. Failure is one
:class:`~fewshot.errors.DataError` line: what failed at each source and the manual route.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import pathlib
import re
import shutil
import sys
import urllib.error
import urllib.request
import zipfile

from fewshot.data.downloads import Remote
from fewshot.errors import DataError, OutputError

CHUNK = 1 << 20
RETRIES = 3  # resumed attempts per source after a dropped connection
TIMEOUT = 60  # seconds without a byte before a connection counts as dropped


def _digest(path: pathlib.Path, algorithm: str = "sha256") -> str:
  digest = hashlib.new(algorithm)
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(CHUNK), b""):
      digest.update(block)
  return digest.hexdigest()


def _marker(path: pathlib.Path) -> pathlib.Path:
  return path.with_name(f".{path.name}.verified")


def _stamp(path: pathlib.Path) -> list:
  stat = path.stat()
  return [stat.st_size, stat.st_mtime_ns]


def verified(path: pathlib.Path, remote: Remote) -> bool:
  """Whether ``path`` is the pinned file: its marker still describes it, or its size and checksum match (then the
  marker is written, so the next check costs a stat).
  """
  if not path.is_file():
    return False
  marker = _marker(path)
  with contextlib.suppress(OSError, ValueError):
    if json.loads(marker.read_text()) == {"stamp": _stamp(path), "sha256": remote.pin}:
      return True
  if problem(path, remote) is not None:
    return False
  marker.write_text(json.dumps({"stamp": _stamp(path), "sha256": remote.pin}))
  return True


def problem(path: pathlib.Path, remote: Remote) -> str | None:
  """What is wrong with a downloaded file (size, checksum, or structure where no checksum is published), or None."""
  size = path.stat().st_size
  if remote.size is not None and size != remote.size:
    return f"{size:,} bytes where {remote.size:,} were expected"
  if remote.check == "lake_runs":
    return _lake_runs_problem(path)
  algorithm, expected = ("md5", remote.md5) if remote.check == "md5" else ("sha256", remote.sha256)
  found = _digest(path, algorithm)
  return None if found == expected else f"{algorithm} {found}, expected {expected}"


def _lake_runs_problem(path: pathlib.Path) -> str | None:
  """Lake et al.'s ``all_runs.zip`` has no published checksum: 20 runs, each a class_labels.txt of 20 items."""
  try:
    with zipfile.ZipFile(path) as archive:
      labels = {m: archive.read(m) for m in archive.namelist() if re.search(r"(^|/)run\d+/class_labels\.txt$", m)}
  except (zipfile.BadZipFile, OSError) as e:
    return f"not a readable zip ({e})"
  items = [len([line for line in data.decode("utf-8", "replace").splitlines() if line.strip()])
           for data in labels.values()]
  if len(items) != 20 or any(n != 20 for n in items):
    return f"{len(items)} runs of {sorted(set(items)) or [0]} items, where Lake et al. published 20 runs of 20"
  return None


@contextlib.contextmanager
def _locked(target: pathlib.Path, say):
  """One process fetches ``target`` at a time; another waits, saying so."""
  lock = target.with_name(f".{target.name}.lock")
  with open(lock, "a") as f:
    try:
      fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
      say(f"{target.name}: another process is fetching it; waiting for it")
      fcntl.flock(f, fcntl.LOCK_EX)
    yield


def _download(url: str, part: pathlib.Path, remote: Remote, bar) -> None:
  """Append ``url``'s bytes from where ``part`` stops (a range request; a server that ignores it starts over)."""
  have = part.stat().st_size if part.exists() else 0
  request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
  with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
    if have and response.status != 206:
      have = 0  # the whole file again
    bar.reset(total=remote.size)
    bar.update(have)
    expected, got = response.headers.get("Content-Length"), 0
    with open(part, "ab" if have else "wb") as f:
      read = getattr(response, "read1", response.read)  # what has arrived (an ftp response has no read1)
      for block in iter(lambda: read(CHUNK), b""):
        f.write(block)
        got += len(block)
        bar.update(len(block))
    if expected is not None and got < int(expected):  # a connection closed early reads as a short end
      raise ConnectionError(f"the connection closed after {got:,} of {int(expected):,} bytes")


def _size(path: pathlib.Path) -> int:
  return path.stat().st_size if path.exists() else 0


def _try_source(url: str, part: pathlib.Path, remote: Remote, bar) -> str | None:
  """Fetch from one source, resuming after dropped connections; None on success, else what went wrong.

  Only tries that add no bytes count against :data:`RETRIES`: a link that drops every few hundred kilobytes
  still finishes.
  """
  tries = 0
  while tries <= RETRIES:
    before = _size(part)
    try:
      _download(url, part, remote, bar)
      return None
    except urllib.error.HTTPError as e:
      if e.code == 416 and part.exists():  # asked past the end: what is there is whole (or wrong); verify it
        return None
      return f"HTTP {e.code} {e.reason}"
    except OSError as e:
      if getattr(e, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
        raise
      failure = f"{type(e).__name__}: {getattr(e, 'reason', None) or e}"
    tries += _size(part) <= before  # a try that got further starts the count again
  return f"{failure} ({RETRIES} resumed tries without a byte more)"


def fetch(remote: Remote, folder: str | os.PathLike, manual: str, progress: bool = True) -> pathlib.Path:
  """``remote`` in ``folder`` (fetched, resumed or already there), verified; a one-line ``DataError`` otherwise."""
  import tqdm

  root = _writable_folder(pathlib.Path(folder).expanduser())
  target, part = root / remote.name, root / f".{remote.name}.part"
  say = (lambda line: print(line, file=sys.stderr, flush=True)) if progress else (lambda line: None)
  with _locked(target, say):
    if verified(target, remote):
      say(f"{remote.name}: already there and verified")
      return target
    failures = [_set_aside(target, remote, say)] if target.exists() else []
    for url in remote.urls:
      shown = progress and sys.stderr.isatty()
      with tqdm.tqdm(total=remote.size, unit="B", unit_scale=True, desc=remote.name, disable=not shown) as bar:
        try:
          failure = _try_source(url, part, remote, bar)
        except OSError as e:
          free = shutil.disk_usage(root).free
          raise OutputError(f"no space left to fetch {remote.name} into {root} ({free / 2**20:.0f} MiB free, "
                            f"{(remote.size or 0) / 2**20:.0f} MiB needed): free some space and run the command again "
                            f"(it resumes from the {part.stat().st_size if part.exists() else 0:,} bytes fetched)."
                            ) from e
      fetched = failure is None  # whole, as far as the connection could tell
      failure = failure or problem(part, remote)
      if failure is None:
        os.replace(part, target)
        _marker(target).write_text(json.dumps({"stamp": _stamp(target), "sha256": remote.pin}))
        say(f"{remote.name}: fetched from {url} and verified ({target.stat().st_size:,} bytes)")
        return target
      failures.append(f"{url}: {failure}")
      if fetched:  # whole and wrong: never resumed, nor read; bytes a dropped link left are kept to resume
        part.unlink(missing_ok=True)
    kept = f" (the {_size(part):,} bytes fetched are kept: the same command resumes)" if _size(part) else ""
    raise DataError(f"could not fetch {remote.name} ({'; '.join(failures)}){kept}; get it by hand from {manual}.")


def _writable_folder(root: pathlib.Path) -> pathlib.Path:
  """``root``, made where missing; a one-line ``OutputError`` where it is a file or cannot be written (read-only,
  immutable, not ours), before anything is fetched.
  """
  if root.exists() and not root.is_dir():
    raise OutputError(f"--to {root} is a file, not a folder; choose a folder for the dataset's files.")
  try:
    root.mkdir(parents=True, exist_ok=True)
    probe = root / f".fewshot-write-test-{os.getpid()}"
    probe.write_bytes(b"")
    probe.unlink()
  except OSError as e:
    raise OutputError(f"--to {root} cannot be written ({e.strerror or e}); choose a folder you can write, or make "
                      "this one writable.") from None
  return root


def _set_aside(target: pathlib.Path, remote: Remote, say) -> str:
  """Move a file at ``target`` that failed verification to ``.<name>.failed`` (no reader opens it) and say what
  was wrong with it, for the line a failed fetch prints.
  """
  wrong = problem(target, remote) if target.is_file() else "not a file"
  aside = target.with_name(f".{target.name}.failed")
  os.replace(target, aside)
  _marker(target).unlink(missing_ok=True)
  said = f"the {target.name} in {target.parent} failed verification ({wrong}) and was moved to {aside.name}"
  say(f"{remote.name}: {said}; fetching it again")
  return said
