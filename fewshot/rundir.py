"""A run directory, the unit of record: config, per-checkpoint metrics, checkpoints, results.

Layout::

  <workdir>/config.json       the resolved configuration
  <workdir>/metrics.jsonl     one row per checkpoint
  <workdir>/checkpoints/last  the latest train state (resume from here)
  <workdir>/checkpoints/best  the train state with the best validation accuracy
  <workdir>/results.json      test accuracy of the best checkpoint

Every file is written atomically (a temporary file renamed into place; orbax does the
same for checkpoints), so a run killed at any moment leaves each file whole.
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
from typing import Any, Callable

import orbax.checkpoint as ocp

CHECKPOINT_KINDS = ("last", "best")


def write_json_atomic(path: pathlib.Path, obj: Any, lines: bool = False) -> None:
  """Write JSON (or JSON lines, one object per list element) so readers never see half a file."""
  text = "".join(json.dumps(row) + "\n" for row in obj) if lines else json.dumps(obj, indent=2) + "\n"
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
  try:
    with os.fdopen(fd, "w") as f:
      f.write(text)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    pathlib.Path(tmp).unlink(missing_ok=True)
    raise


class RunDir:
  """Reads and writes one run's directory."""

  def __init__(self, path: str | os.PathLike):
    self.path = pathlib.Path(path).resolve()
    self.config_path = self.path / "config.json"
    self.metrics_path = self.path / "metrics.jsonl"
    self.results_path = self.path / "results.json"
    self._managers: dict[str, ocp.CheckpointManager] = {}

  def holds_run(self) -> bool:
    return self.config_path.exists()

  def is_empty(self) -> bool:
    return not self.path.exists() or not any(self.path.iterdir())

  # ---- json records ----------------------------------------------------------------------
  def read_config(self) -> dict:
    return json.loads(self.config_path.read_text())

  def write_config(self, config: dict) -> None:
    self.path.mkdir(parents=True, exist_ok=True)
    write_json_atomic(self.config_path, config)

  def read_metrics(self) -> list[dict]:
    if not self.metrics_path.exists():
      return []
    return [json.loads(line) for line in self.metrics_path.read_text().splitlines() if line.strip()]

  def write_metrics(self, rows: list[dict]) -> None:
    write_json_atomic(self.metrics_path, rows, lines=True)

  def read_results(self) -> dict | None:
    return json.loads(self.results_path.read_text()) if self.results_path.exists() else None

  def write_results(self, results: dict) -> None:
    write_json_atomic(self.results_path, results)

  # ---- checkpoints -------------------------------------------------------------------------
  def _manager(self, kind: str) -> ocp.CheckpointManager:
    if kind not in self._managers:
      options = ocp.CheckpointManagerOptions(max_to_keep=1, enable_async_checkpointing=False, create=True)
      self._managers[kind] = ocp.CheckpointManager(self.path / "checkpoints" / kind, options=options)
    return self._managers[kind]

  def checkpoint_step(self, kind: str) -> int | None:
    """Episodes trained at the saved checkpoint of this kind, or None if there is none."""
    if not (self.path / "checkpoints" / kind).exists():
      return None
    return self._manager(kind).latest_step()

  def save_checkpoint(self, kind: str, step: int, state: Any) -> None:
    manager = self._manager(kind)
    if step in manager.all_steps():  # a resumed run replaying a checkpoint it had saved
      manager.delete(step)
    manager.save(step, args=ocp.args.StandardSave(state))
    manager.wait_until_finished()

  def restore_checkpoint(self, kind: str, like: Any) -> Any:
    """Restore the checkpoint of this kind into the structure, shapes and dtypes of ``like``."""
    step = self.checkpoint_step(kind)
    if step is None:
      raise FileNotFoundError(f"{self.path} has no {kind} checkpoint; train it first with python -m fewshot.train.")
    return self._manager(kind).restore(step, args=ocp.args.StandardRestore(like))

  def drop_checkpoints_after(self, step: int) -> None:
    """Forget checkpoints newer than ``step`` (a resumed run replays those episodes)."""
    for kind in CHECKPOINT_KINDS:
      saved = self.checkpoint_step(kind)
      if saved is not None and saved > step:
        self._manager(kind).delete(saved)

  def resume(self, state: Any, step_key: str, step_of: Callable[[Any], Any]) -> tuple[Any, list[dict]]:
    """Continue from the ``last`` checkpoint: ``(state, metrics rows up to it)``; ``(state, [])`` if none.

    Rows and checkpoints newer than ``last`` (written before a crash) are dropped, since
    the resumed run replays those steps and writes them again.
    """
    if self.checkpoint_step("last") is None:
      return state, []
    state = self.restore_checkpoint("last", state)
    done = int(step_of(state))
    self.drop_checkpoints_after(done)
    return state, [row for row in self.read_metrics() if row[step_key] <= done]
