"""Writing output files: whole (atomic), strict JSON, with the user's permissions, refused in one line if unwritable.

Every record a run or a tool writes goes through :func:`write_json_atomic`: a temporary file
renamed into place, so a reader (or a run killed mid-write) never sees half a file. The
temporary file is made private by ``mkstemp``; it is given the permissions any other new file
gets (``0o666`` less the umask) before the rename, so records are as readable as checkpoints
and figures. JSON has no NaN: records hold ``null`` for an undefined value
(:func:`finite_json`), and a stray NaN is refused rather than written as bare ``NaN``.
"""

from __future__ import annotations

import errno
import json
import math
import os
import pathlib
import shutil
import tempfile
from typing import Any

from fewshot.errors import OutputError


def current_umask() -> int:
  """The process's umask (reading it means setting it; it is set straight back)."""
  mask = os.umask(0o022)
  os.umask(mask)
  return mask


def finite_json(obj: Any) -> Any:
  """``obj`` with every non-finite float (NaN, ±inf) replaced by None, in nested dicts, lists and tuples."""
  if isinstance(obj, float):
    return obj if math.isfinite(obj) else None
  if isinstance(obj, dict):
    return {k: finite_json(v) for k, v in obj.items()}
  if isinstance(obj, (list, tuple)):
    return [finite_json(v) for v in obj]
  return obj


def _cannot_write(path: pathlib.Path, e: OSError) -> OutputError:
  reason = e.strerror or type(e).__name__
  return OutputError(f"cannot write {path} ({reason}); make its folder writable or choose another location.")


# How TensorStore (under orbax) says a full disk: a ValueError, not an OSError, e.g. "... No space left on device
# [os_error_code='28']".
_FULL_DISK_WORDS = ("No space left on device", "os_error_code='28'", "Disk quota exceeded", "os_error_code='122'")


def out_of_space(e: BaseException) -> bool:
  """Whether ``e``, or an error it wraps (orbax wraps its writers' once or twice), is a full disk (or quota): an
  ``OSError`` of ENOSPC or EDQUOT, or TensorStore's ``ValueError`` saying so.
  """
  for _ in range(8):
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
      return True
    if isinstance(e, ValueError) and any(words in str(e) for words in _FULL_DISK_WORDS):
      return True
    e = e.__cause__ or e.__context__
    if e is None:
      return False
  return False


def full_disk_error(path: pathlib.Path, needed_bytes: int, after: str) -> OutputError:
  """The one line for ``path`` not written for want of space: how much it needs, how much is free, then ``after``."""
  free = shutil.disk_usage(_nearest_existing(pathlib.Path(path))).free
  return OutputError(f"no space left on the disk to write {path} (it needs about {needed_bytes / 2**20:.1f} MiB; "
                     f"{free / 2**20:.1f} MiB free there): free some space, then {after}")


def check_writable(path: str | os.PathLike, flag: str) -> None:
  """One-line ``OutputError`` unless files can be made in the folder ``path``, or, where it does not exist yet,
  in its nearest existing parent (where it would be created). ``flag`` names the option that chose it.
  """
  path = pathlib.Path(path).absolute()
  existing = _nearest_existing(path)
  if not existing.is_dir():
    if existing == path:
      raise OutputError(f"{flag} {path} is a file; pass a folder.")
    raise OutputError(f"{flag} {path} cannot be made: its parent {existing} is a file; pass a folder.")
  if not os.access(existing, os.W_OK | os.X_OK):
    where = "it" if existing == path else f"its parent {existing}"
    raise OutputError(f"{flag} {path} cannot be written ({where} is read-only or not yours); choose a writable "
                      "folder.")


def _nearest_existing(path: pathlib.Path) -> pathlib.Path:
  """``path``, or its nearest parent that exists (where it would be created)."""
  while not path.exists() and path != path.parent:
    path = path.parent
  return path


def make_dirs(path: str | os.PathLike) -> None:
  """``mkdir -p``; an unwritable location is a one-line ``OutputError``."""
  try:
    pathlib.Path(path).mkdir(parents=True, exist_ok=True)
  except OSError as e:
    raise _cannot_write(pathlib.Path(path), e) from None


def write_json_atomic(path: pathlib.Path, obj: Any, lines: bool = False) -> None:
  """Write JSON (or JSON lines, one object per list element) so readers never see half a file.

  Refuses (``ValueError``) a non-finite float: pass records through :func:`finite_json` first.
  """
  dump = lambda o, **kw: json.dumps(o, allow_nan=False, **kw)  # noqa: E731
  write_text_atomic(path, "".join(dump(row) + "\n" for row in obj) if lines else dump(obj, indent=2) + "\n")


def write_text_atomic(path: pathlib.Path, text: str) -> None:
  """Write ``text`` (UTF-8) to ``path`` through a temporary file renamed into place (:func:`write_bytes_atomic`)."""
  write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: pathlib.Path, data: bytes) -> None:
  """Write ``data`` to ``path`` through a temporary file renamed into place, so a full disk or a kill never leaves
  half a file where the old one was; an unwritable place is a one-line ``OutputError``.
  """
  path = pathlib.Path(path)
  try:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
  except OSError as e:
    raise _cannot_write(path, e) from None
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(data)
      f.flush()
      os.fchmod(f.fileno(), 0o666 & ~current_umask())  # mkstemp's 0600, as any new file would be
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except OSError as e:
    pathlib.Path(tmp).unlink(missing_ok=True)
    raise _cannot_write(path, e) from None
  except BaseException:
    pathlib.Path(tmp).unlink(missing_ok=True)
    raise
