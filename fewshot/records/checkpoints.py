"""A run's checkpoints: ``checkpoints/last`` (resume from here) and ``checkpoints/best``, one step kept in each
(``last`` holds the one before as well until a seed group's runs have all saved the new one: :data:`KEPT`).

Orbax writes them (a temporary folder renamed into place, so a run killed at any moment keeps its last whole
checkpoint), except for a run that one of several processes writes alone, which orbax refuses: those are
:mod:`fewshot.records.local_checkpoints` (Flax msgpack, written the same way), and a run stays in the kind it
started with. orbax and JAX are imported inside the methods that read or write a checkpoint, so that reading a
run's records needs neither.
"""

from __future__ import annotations

import pathlib
from typing import Any

from fewshot.errors import ConfigError, RunDirError
from fewshot.records import damage, files, held_output, local_checkpoints, writer_lock

CHECKPOINT_KINDS = ("last", "best")
# Steps kept of each kind: `last` keeps the one before until the whole seed group has saved the new one
# (:meth:`Checkpoints.commit`), so a group stopped between two runs' saves resumes from the step they all hold.
KEPT = {"last": 2, "best": 1}


def check_kind(kind: str, option: str = "checkpoint") -> str:
  """``kind`` if it names a checkpoint kind, else a one-line ``ConfigError`` naming ``option`` (the flag or
  argument that chose it).
  """
  if kind not in CHECKPOINT_KINDS:
    raise ConfigError(f"unknown {option} {kind!r}; choose one of {', '.join(CHECKPOINT_KINDS)}.")
  return kind


class Checkpoints:
  """The ``checkpoints/`` folder of one run directory."""

  def __init__(self, folder: pathlib.Path):
    self.folder = folder
    self._managers: dict = {}

  def _manager(self, kind: str):
    import orbax.checkpoint as ocp  # only where checkpoints are touched: reading records needs no orbax

    if kind not in self._managers:
      options = ocp.CheckpointManagerOptions(max_to_keep=KEPT[kind], enable_async_checkpointing=False, create=True)
      self._managers[kind] = ocp.CheckpointManager(self.folder / kind, options=options,
                                                   item_handlers=ocp.StandardCheckpointHandler())
    return self._managers[kind]

  def _local(self, kind: str, writing: bool = False) -> bool:
    """Whether this kind's checkpoint is (or, ``writing``, will be) a :mod:`fewshot.records.local_checkpoints` one:
    a run written by one of several processes, which orbax cannot write; a run then stays in that kind.
    """
    if local_checkpoints.holds(self.folder / kind):
      return True
    if not writing:
      return False
    import jax

    return jax.process_count() > 1

  def has(self, kind: str) -> bool:
    """Whether ``kind`` holds a saved step (read from its folder names: no orbax needed)."""
    folder = self.folder / kind
    return folder.is_dir() and any(p.name.isdigit() for p in folder.iterdir())

  def step(self, kind: str) -> int | None:
    """Steps trained at the latest saved checkpoint of this kind, or None if there is none."""
    saved = self.steps(kind)
    return saved[-1] if saved else None

  def steps(self, kind: str) -> list[int]:
    """The saved steps of this kind, oldest first (``last`` may hold two: see :meth:`commit`).

    Read from the step folders' names, as orbax names them (a checkpoint being written has a temporary name), not
    through orbax, which reads each step's metadata and logs, rather than raises, where that file is damaged.
    """
    return local_checkpoints.steps(self.folder / kind)

  def save(self, kind: str, step: int, state: Any) -> None:
    """Save ``state`` as this kind's checkpoint at ``step``; a full disk is one line naming the folder and the space
    (what was saved before stays whole: a checkpoint is written under a temporary name, then renamed), without
    the hundreds of lines orbax and TensorStore print of it first (:mod:`fewshot.records.held_output`).
    """
    with held_output.stderr_held() as held:
      try:
        return self._save(kind, step, state)
      except Exception as e:
        if not files.out_of_space(e):
          raise
        held.drop()  # fewshot's line below says it
    import jax

    needed = sum(getattr(leaf, "nbytes", 0) for leaf in jax.tree.leaves(state))
    raise files.full_disk_error(self.folder / kind / str(step), needed, "run the same command with --resume: it "
                                "continues from the last checkpoint saved.") from None

  def _save(self, kind: str, step: int, state: Any) -> None:
    import orbax.checkpoint as ocp

    if self._local(kind, writing=True):
      return local_checkpoints.save(self.folder / kind, step, state, keep=KEPT[kind])
    manager = self._manager(kind)
    if step in manager.all_steps():  # a resumed run replaying a checkpoint it had saved
      manager.delete(step)
    manager.save(step, args=ocp.args.StandardSave(state))
    manager.wait_until_finished()

  def restore(self, kind: str, like: Any, step: int | None = None, resuming: bool = False) -> Any:
    """The checkpoint of this kind (its latest, or ``step``) in the structure, shapes and dtypes of ``like``; one
    whose files cannot be read is a one-line ``RunDirError`` naming it and the way out (``resuming``: the run
    continues from it).
    """
    check_kind(kind)
    latest = step is None
    for _ in range(3):  # a run still training replaces its latest checkpoint as it is read: read the new one
      step = self.step(kind) if latest else step
      if step is None:
        raise RunDirError(f"{self.folder.parent} has no {kind} checkpoint; train it first (or use the other "
                          "checkpoint).")
      where = self.folder / kind / str(step)
      try:
        if self._local(kind):
          return local_checkpoints.restore(self.folder / kind, step, like)
        return _restore_orbax(self._manager(kind), where, step, like)
      except Exception as e:
        reason = damage.unreadable(e)
        if reason is None:  # not the files' fault: a bug, or a state unlike the saved one, is raised as it is
          raise
        if writer_lock.writer(self.folder.parent) is not None:  # a training replacing it as it was read
          continue
        if step in self.steps(kind):
          other = next(k for k in CHECKPOINT_KINDS if k != kind)
          raise RunDirError(f"{where} is damaged ({reason}); {_way_out(other, self.has(other), resuming)}") from None
        if not latest:
          raise RunDirError(f"{where} was replaced while it was read (the run is still training): read "
                            f"{kind} step {self.step(kind)} instead, or wait until training ends.") from None
    holder = writer_lock.writer(self.folder.parent) or "its training"
    raise RunDirError(f"{self.folder / kind} was replaced three times while it was read ({holder} is still "
                      "training the run); run the command again, or wait until its training ends.")

  def commit(self, step: int) -> None:
    """Forget the ``last`` checkpoints before ``step``, once every run of the group has saved ``step``."""
    for old in self.steps("last"):
      if old < step:
        self._delete("last", old)

  def drop_after(self, step: int) -> None:
    """Forget checkpoints newer than ``step`` (a resumed run replays those steps)."""
    for kind in CHECKPOINT_KINDS:
      for saved in self.steps(kind):
        if saved > step:
          self._delete(kind, saved)

  def _delete(self, kind: str, step: int) -> None:
    if self._local(kind):
      local_checkpoints.delete(self.folder / kind, step)
    else:
      self._manager(kind).delete(step)


def _restore_episode_checkpoint(manager, step: int, like: Any) -> Any:
  """A few-shot checkpoint saved before the shared TrainState, which counted its steps as "episode"."""
  import orbax.checkpoint as ocp

  target = {"episode": like.step, "params": like.params, "batch_stats": like.batch_stats, "opt_state": like.opt_state}
  restored = manager.restore(step, args=ocp.args.StandardRestore(target))
  return like.replace(step=restored["episode"], params=restored["params"], batch_stats=restored["batch_stats"],
                      opt_state=restored["opt_state"])


def _restore_orbax(manager, where: pathlib.Path, step: int, like: Any) -> Any:
  import orbax.checkpoint as ocp

  damage.check_orbax_step(where)
  damage.quiet_abandoned_reads()  # before reading: orbax's abandoned reads report as they end, at any time
  stored = set(manager.item_metadata(step).keys())
  if "episode" in stored and "step" not in stored and hasattr(like, "step"):
    return _restore_episode_checkpoint(manager, step, like)
  return manager.restore(step, args=ocp.args.StandardRestore(like))


def _way_out(other: str, other_saved: bool, resuming: bool) -> str:
  """What to do about a damaged checkpoint: the ``other`` kind where it is saved, else a backup or a new run."""
  if resuming:
    return ("the run cannot continue from it: train the run anew in a new --workdir, or restore its checkpoints "
            "folder from a backup.")
  if other_saved:
    return (f"use the {other} checkpoint instead (--checkpoint {other}; fewshot.load(..., checkpoint={other!r})), "
            "or restore the checkpoint from a backup.")
  return "restore the checkpoint from a backup, or train the run anew in a new --workdir."
