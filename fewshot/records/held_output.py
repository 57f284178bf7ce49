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
from collections.abc import Iterator


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


@contextlib.contextmanager
def stderr_held() -> Iterator[Held]:
  """Hold the process's stderr for the block; write it out when the block ends unless :meth:`Held.drop` was called."""
  sys.stderr.flush()
  held_fd = _memory_file()
  saved = os.dup(2)
  os.dup2(held_fd, 2)
  # Python's own writes too, where sys.stderr is not file descriptor 2 (a notebook's, pytest's).
  python_stderr, sys.stderr = sys.stderr, open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
  held = Held(held_fd)
  try:
    yield held
  finally:
    sys.stderr.flush()
    sys.stderr.close()
    sys.stderr = python_stderr
    os.dup2(saved, 2)
    os.close(saved)
    try:
      if not held.dropped:
        size = os.fstat(held_fd).st_size
        if size:
          data = os.pread(held_fd, size, 0)
          while data:  # a write to a pipe may take only part
            data = data[os.write(2, data):]
    finally:
      os.close(held_fd)
