"""One writer per run directory: a training holds ``<run directory>/.lock`` (an OS lock, ``fcntl.flock``) while it
writes there.

A second training of the same directory is refused in one line naming the process that holds it. The OS releases
the lock when its process ends, killed or not, so a stopped run's ``--resume`` is never blocked by it; the file
stays, naming its last holder. A process trains one directory after another under the same lock (``train`` then
``train(..., resume=True)`` from Python), and releases it when a training finishes.
"""

from __future__ import annotations

import datetime
import fcntl
import os
import pathlib
import socket

from fewshot.errors import RunDirError
from fewshot.records import files

NAME = ".lock"
_held: dict[str, int] = {}  # run directory -> the open file whose lock this process holds


def hold(run_path: pathlib.Path) -> None:
  """Hold ``run_path``'s lock (making the directory), or refuse in one line naming the process that holds it (or
  the full disk that keeps the lock from being written).
  """
  key = str(pathlib.Path(run_path).resolve())
  if key in _held:
    return
  try:
    _hold(run_path, key)
  except OSError as e:
    if not files.out_of_space(e):
      raise
    raise files.full_disk_error(pathlib.Path(run_path) / NAME, 1024, "run the same command again.") from None


def _hold(run_path: pathlib.Path, key: str) -> None:
  pathlib.Path(run_path).mkdir(parents=True, exist_ok=True)
  try:
    fd = os.open(pathlib.Path(run_path) / NAME, os.O_RDWR | os.O_CREAT, 0o644)
  except IsADirectoryError:
    raise RunDirError(f"{pathlib.Path(run_path) / NAME} is a folder, not the run's lock file; remove it (rmdir) if "
                      "no command is writing the run, then run the command again.") from None
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except OSError:
    holder = os.read(fd, 1024).decode(errors="replace").strip() or "another process"
    os.close(fd)
    raise RunDirError(f"{run_path} is being written by {holder}; wait for that training to end (or stop it), then "
                      "resume, or choose another --workdir.") from None
  started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
  try:
    os.ftruncate(fd, 0)
    os.write(fd, f"process {os.getpid()} on {socket.gethostname()} (since {started})\n".encode())
  except OSError:
    os.close(fd)  # and with it the lock: nothing of this process stays held
    raise
  _held[key] = fd


def release(run_path: pathlib.Path) -> None:
  """Let ``run_path`` go (closing the file releases its lock); nothing where this process does not hold it."""
  fd = _held.pop(str(pathlib.Path(run_path).resolve()), None)
  if fd is not None:
    os.close(fd)


def writer(run_path: pathlib.Path) -> str | None:
  """The process another command runs that holds ``run_path``'s lock (a training writing it), or None: where the
  lock is free, missing, or this process's own.
  """
  if str(pathlib.Path(run_path).resolve()) in _held:
    return None
  try:
    fd = os.open(pathlib.Path(run_path) / NAME, os.O_RDONLY)
  except OSError:
    return None
  try:
    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    fcntl.flock(fd, fcntl.LOCK_UN)
    return None
  except OSError:
    return os.read(fd, 1024).decode(errors="replace").strip() or "another process"
  finally:
    os.close(fd)
