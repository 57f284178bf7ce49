"""Checkpoints one process writes alone: the runs a process holds when a seed group spans several processes.

Orbax, which writes every other checkpoint, refuses a process's own (fully addressable) arrays once
``jax.distributed`` runs several processes, and writes host arrays from process 0 only: it saves
arrays that the processes hold together. A group's runs are each held by one process, so that
process writes them here instead, with :mod:`flax.serialization`: the same train state, in the same
place (``checkpoints/<kind>/<step>/``, the steps :data:`fewshot.records.checkpoints.KEPT` says), as
``state.msgpack`` written into a temporary folder that is renamed into place, so a run killed at any moment
leaves the last whole checkpoint.
:class:`fewshot.records.rundir.RunDir` reads either kind, and keeps writing a run in the kind it started with.
"""

from __future__ import annotations

import os
import pathlib
import shutil
from typing import Any

import numpy as np

from fewshot.errors import RunDirError, one_line
from fewshot.records.damage import Unreadable

FILENAME = "state.msgpack"


def steps(folder: pathlib.Path) -> list[int]:
  """The saved steps under ``checkpoints/<kind>`` (folders named by their step), oldest first."""
  if not folder.is_dir():
    return []
  return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit() and p.is_dir())


def holds(folder: pathlib.Path) -> bool:
  """Whether the latest checkpoint under ``folder`` is one of these (not orbax's)."""
  saved = steps(folder)
  return bool(saved) and (folder / str(saved[-1]) / FILENAME).is_file()


def save(folder: pathlib.Path, step: int, state: Any, keep: int = 1) -> None:
  """Write ``state`` as step ``step`` under ``folder``, atomically, keeping the ``keep`` latest steps."""
  import flax.serialization  # JAX and Flax only where checkpoints are written or read: records need neither
  import jax

  data = flax.serialization.to_bytes(jax.device_get(state))
  temporary = folder / f".{step}.tmp-{os.getpid()}"
  shutil.rmtree(temporary, ignore_errors=True)
  temporary.mkdir(parents=True)
  with open(temporary / FILENAME, "wb") as f:
    f.write(data)
    f.flush()
    os.fsync(f.fileno())
  final = folder / str(step)
  if final.exists():  # a resumed run replaying a checkpoint it had saved
    shutil.rmtree(final)
  os.replace(temporary, final)
  for old in steps(folder)[:-keep]:
    shutil.rmtree(folder / str(old))


def restore(folder: pathlib.Path, step: int, like: Any) -> Any:
  """Step ``step`` under ``folder`` in the structure of ``like``, each array where ``like``'s is."""
  import flax.serialization
  import jax

  path = folder / str(step) / FILENAME
  try:
    restored = flax.serialization.from_bytes(like, path.read_bytes())
  except (ValueError, TypeError) as e:  # msgpack's and flax's words for bytes that are not a train state
    raise Unreadable(f"{FILENAME}: {one_line(e)}") from None

  def place(value, target):
    if np.shape(value) != np.shape(target):
      raise RunDirError(f"{path} holds an array of shape {np.shape(value)} where this run has {np.shape(target)}; "
                        "it is another configuration's checkpoint.")
    return jax.device_put(value, target.sharding) if isinstance(target, jax.Array) else value

  return jax.tree.map(place, restored, like)


def delete(folder: pathlib.Path, step: int) -> None:
  shutil.rmtree(folder / str(step), ignore_errors=True)
