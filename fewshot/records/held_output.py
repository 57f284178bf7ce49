"""What a library prints while it writes, held back until the write's outcome is known.

orbax and TensorStore report a failed write on their own before they raise: absl E-lines, their worker threads'
tracebacks ("Event loop is closed") and each of its futures' errors, hundreds of lines on stderr, before the one line
fewshot prints for a full disk. :func:`stderr_held` holds everything written to the process's stderr (file descriptor
2, so C++ threads' output too) in memory; the caller drops it where the failure is one fewshot words itself, and
anything else is written out when the block ends, as it would have been, only later.

    with held_output.stderr_held() as held:
      try:
        manager.save(step, args=...)
      except ValueError as e:
        if files.out_of_space(e):
          held.drop()   # fewshot's own line replaces the library's
        raise
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import Iterator

from fewshot import runner


class Held:
  """The output held by :func:`stderr_held`: :meth:`drop` discards it instead of writing it out at the end."""

  def __init__(self, fd: int):
    self._fd = fd
    self.dropped = False

  def drop(self) -> None:
    self.dropped = True

  def text(self) -> str:
    """What was held so far (for tests)."""
    sys.stderr.flush()
    return os.pread(self._fd, os.fstat(self._fd).st_size, 0).decode("utf-8", "replace")


def _memory_file() -> int:
  """A file descriptor of a file in memory (a full disk cannot refuse it), or of a temporary file where there is
  no ``memfd_create`` (not Linux).
  """
  with contextlib.suppress(AttributeError, OSError):
    return os.memfd_create("fewshot-held-stderr")
  handle, path = tempfile.mkstemp(prefix="fewshot-held-stderr-")
  os.unlink(path)
  return handle


_holding: list = []  # the hold in force: (held, the real stderr's saved fd, Python's sys.stderr), at most one
_lock = threading.Lock()


@contextlib.contextmanager
def stderr_held() -> Iterator[Held]:
  """Hold the process's stderr for the block; write it out when the block ends unless :meth:`Held.drop` was called.
  A process that exits from another thread meanwhile (Ctrl-C, SIGTERM) calls :func:`release` first, so its line
  and what was held reach the terminal.
  """
  sys.stderr.flush()
  held_fd = _memory_file()
  saved = os.dup(2)
  os.dup2(held_fd, 2)
  held = Held(held_fd)
  # Python's own writes too, where sys.stderr is not file descriptor 2 (a notebook's, pytest's).
  python_stderr, sys.stderr = sys.stderr, open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
  with _lock:
    _holding.append((held, saved, python_stderr))
  try:
    yield held
  finally:
    release()


def release() -> None:
  """End the hold in force, if any: stderr restored, and what it held written out unless dropped."""
  data = take()
  while data:  # a write to a pipe may take only part
    data = data[os.write(2, data):]


def take() -> bytes:
  """End the hold in force, if any: stderr restored, and what it held returned (b"" where dropped) instead of
  written out. A process about to stop on a fault it words itself reads the library's records from it.
  """
  with _lock:
    if not _holding:
      return b""
    held, saved, python_stderr = _holding.pop()
    sys.stderr.flush()
    sys.stderr.close()
    sys.stderr = python_stderr
    os.dup2(saved, 2)
    os.close(saved)
    try:
      size = 0 if held.dropped else os.fstat(held._fd).st_size
      return os.pread(held._fd, size, 0) if size else b""
    finally:
      os.close(held._fd)


runner.AT_EXIT.release = release  # a command exiting mid-save (Ctrl-C, SIGTERM) ends the hold first
