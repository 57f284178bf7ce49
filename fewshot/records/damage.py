"""Telling a damaged checkpoint (files cut short, overwritten, emptied) from a bug, in the words of what was read.

:meth:`fewshot.records.checkpoints.Checkpoints.restore` is the one place a checkpoint is read; it asks
:func:`unreadable` whether what it caught says the files cannot be read, and names the checkpoint and the way out
if so. Anything else (a bug, or a state unlike the saved one) is raised as it is.
"""

from __future__ import annotations

import json
import logging
import pathlib
import re
import sys
import warnings

from fewshot.errors import one_line

# TensorStore (orbax's reader) reports a file it cannot read as a ValueError that starts with a status code.
_STATUS = re.compile(r"^(OUT_OF_RANGE|DATA_LOSS|FAILED_PRECONDITION|NOT_FOUND|INVALID_ARGUMENT|UNKNOWN): ")
# What the reader's message repeats: the step folder (the message names it) and the reader's own settings.
_REPEATED = re.compile(r' in OCDBT database at local file "[^"]*"|\s*\[(tensorstore_spec|source locations)=.*\]$')
# orbax's ValueError for a step folder that went (a run in training replaced it) as its metadata was to be read.
_ORBAX_FOLDER_GONE = "Checkpoint directory does not exist: "
# The JSON files of an orbax step: orbax logs, rather than raises, where _CHECKPOINT_METADATA is not JSON.
ORBAX_JSON = ("_CHECKPOINT_METADATA", "default/_METADATA")


class Unreadable(Exception):
  """A checkpoint's files cannot be read; the message says which and why."""


def unreadable(e: BaseException) -> str | None:
  """Why the checkpoint's files cannot be read, where ``e`` (or what caused it) says so; else None."""
  for link in _chain(e):
    if isinstance(link, Unreadable):
      return str(link)
    if isinstance(link, (json.JSONDecodeError, UnicodeDecodeError)):
      return f"a metadata file is not JSON: {one_line(link)}"
    if isinstance(link, OSError):
      return one_line(link)
    if _reader_error(link):
      return _REPEATED.sub("", one_line(link))
  return None


def _chain(e: BaseException | None):
  for _ in range(8):  # orbax wraps the reader's error once or twice
    if e is None:
      return
    yield e
    e = e.__cause__ or e.__context__


def _reader_error(e: BaseException) -> bool:
  return isinstance(e, ValueError) and bool(_STATUS.match(str(e)) or str(e).startswith(_ORBAX_FOLDER_GONE))


def check_orbax_step(folder: pathlib.Path) -> None:
  """Refuse (``Unreadable``) an orbax step folder emptied, or whose metadata is missing or not JSON, before orbax
  reads it (orbax logs, rather than raises, where some of these are damaged).
  """
  if not any(p.is_file() for p in folder.rglob("*")):
    raise Unreadable("its folder holds no files")
  if not (folder / ORBAX_JSON[-1]).is_file():
    raise Unreadable(f"{ORBAX_JSON[-1]}, the list of its arrays, is missing")
  for name in ORBAX_JSON:
    path = folder / name
    if path.is_file():
      try:
        json.loads(path.read_bytes())
      except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8
        raise Unreadable(f"{name} is not JSON: {one_line(e)}") from None


# ---- the reads orbax abandons --------------------------------------------------------------------------------------
_ORBAX_READ = "_read_array_index_and_device_put"  # orbax's coroutine that reads one array


def quiet_abandoned_reads() -> None:
  """Drop the reports of the reads orbax abandons when one array of a checkpoint cannot be read.

  Orbax stops a restore at its first failed read and closes its event loop with the other reads still running;
  as each ends, or is collected, it reports through Python's last-resort channels ("Exception ignored in
  <coroutine ...>", "Event loop is closed", asyncio's "exception was never retrieved", "coroutine ... was never
  awaited"): dozens of tracebacks, at any time, after the one error that names the damage. Those reports are
  dropped; any other reaches the hook or handler that was there before. Installed once per process.
  """
  # Each time: a warnings.catch_warnings block (pytest runs every test in one) drops filters added inside it.
  warnings.filterwarnings("ignore", f"coroutine '{_ORBAX_READ}' was never awaited", RuntimeWarning)
  previous = sys.unraisablehook
  if getattr(previous, "drops_abandoned_reads", False):
    return

  def hook(unraisable):
    code = getattr(unraisable.object, "cr_code", None)
    if not ((code is not None and code.co_name == _ORBAX_READ) or _abandoned(unraisable.exc_value)):
      previous(unraisable)

  hook.drops_abandoned_reads = True
  sys.unraisablehook = hook
  logging.getLogger("asyncio").addFilter(_AbandonedReads())


def _abandoned(e: BaseException | None) -> bool:
  """Whether ``e`` ends an abandoned read: the reader's error, or the closed event loop the read reports to."""
  return any(_reader_error(link) or (isinstance(link, RuntimeError) and str(link) == "Event loop is closed")
             for link in _chain(e))


class _AbandonedReads(logging.Filter):
  def filter(self, record: logging.LogRecord) -> bool:
    return not (record.exc_info and _abandoned(record.exc_info[1]))
