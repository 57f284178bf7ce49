"""A run directory, the unit of record: config, per-checkpoint metrics, checkpoints, results.

Layout::

  <workdir>/config.json       the resolved configuration
  <workdir>/metrics.jsonl     one row per checkpoint
  <workdir>/checkpoints/last  the latest train state (resume from here)
  <workdir>/checkpoints/best  the train state with the best validation score
  <workdir>/results.json      test results of the best checkpoint

Every file is written atomically (a temporary file renamed into place; checkpoints likewise,
:mod:`fewshot.records.checkpoints`), so a run killed at any moment leaves each file whole. Both training commands write
through :class:`RunDir`, and ``evaluate`` and ``fewshot.load`` read through it
(``analyze`` and ``plot`` read the records through :mod:`fewshot.records.reading`):
:func:`existing_run` is the one check that a directory holds a run, and :mod:`fewshot.records.reuse` the one rule
for reusing a directory.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import pathlib
from typing import Any, Callable

from fewshot.errors import ConfigError, RunDirError, one_line
from fewshot.options import current_names
from fewshot.records import writer_lock
from fewshot.records.checkpoints import Checkpoints, check_kind
from fewshot.records.files import finite_json, make_dirs, write_json_atomic
from fewshot.records.run_kinds import KINDS, run_kind

_RESTORE = "restore the file from a backup, or train the run anew in a new --workdir."


NAME_BYTES, PATH_BYTES = 255, 4096  # what Linux's file systems take (NAME_MAX, PATH_MAX)


def checked_path(path: str | os.PathLike) -> pathlib.Path:
  """``path`` resolved, or a one-line ``RunDirError`` where no file system could hold it: a loop of links, a name
  longer than :data:`NAME_BYTES` or a path of :data:`PATH_BYTES` or more.
  """
  absolute = os.path.abspath(os.fspath(path))
  longest = max(absolute.split(os.sep), key=lambda part: len(os.fsencode(part)))
  if len(os.fsencode(longest)) > NAME_BYTES or len(os.fsencode(absolute)) >= PATH_BYTES:
    what = (f"a name of {len(os.fsencode(longest))} bytes ({longest[:20]}...)" if len(os.fsencode(longest)) >
            NAME_BYTES else f"{len(os.fsencode(absolute))} bytes")
    raise RunDirError(f"{absolute[:60]}... is {what}; the file system takes names of up to {NAME_BYTES} bytes and "
                      f"paths below {PATH_BYTES}: choose a shorter one.")
  try:
    return pathlib.Path(absolute).resolve()
  except (RuntimeError, OSError):  # pathlib's "Symlink loop" (an OSError from Python 3.13)
    raise RunDirError(f"{absolute} is a loop of links (it leads back to itself); point it at a folder.") from None


class RunDir:
  """Reads and writes one run's directory."""

  def __init__(self, path: str | os.PathLike, resolved: bool = False):
    self.path = pathlib.Path(path) if resolved else checked_path(path)
    self._config_read: tuple = (None, None)  # (the file's version, its parsed options) last read

  # Paths made when first asked for: a seed group opens up to 100,000 directories before its memory is checked.
  @functools.cached_property
  def config_path(self) -> pathlib.Path:
    return self.path / "config.json"

  @functools.cached_property
  def metrics_path(self) -> pathlib.Path:
    return self.path / "metrics.jsonl"

  @functools.cached_property
  def results_path(self) -> pathlib.Path:
    return self.path / "results.json"

  @functools.cached_property
  def checkpoints(self) -> Checkpoints:
    return Checkpoints(self.path / "checkpoints")

  def folds(self, count) -> list[RunDir]:
    """Each fold model's directory of a run that trained ``count`` (its ``folds``): ``fold<k>/``, or the run's own
    where it trained one (or ``count`` is no whole number above 1: a few-shot run's, or an edited record).
    """
    several = isinstance(count, int) and not isinstance(count, bool) and count > 1
    return [RunDir(self.path / f"fold{k}", resolved=True) for k in range(count)] if several else [self]

  def holds_run(self) -> bool:
    return self.config_path.exists()

  def is_empty(self) -> bool:
    """Whether the directory holds nothing (a lock left by a training that wrote nothing else counts as nothing)."""
    return not self.path.exists() or not any(p.name != writer_lock.NAME for p in self.path.iterdir())

  def differences(self, config, ignore: tuple[str, ...] = ()) -> list[str]:
    """The options in which the saved run's configuration differs from ``config`` (of the same type)."""
    saved = self.read_options(type(config).from_dict)
    return [name for name in saved.differences(config) if name not in ignore]

  # ---- json records ----------------------------------------------------------------------
  def read_config(self) -> dict:
    """config.json as saved, under today's field names; one cut short or edited into something else than a JSON object is a one-line
    ``RunDirError`` naming it.
    """
    if self.config_path.is_dir():
      raise RunDirError(f"{self.config_path} is a folder, not the run's options; {_RESTORE}")
    try:  # parsed once per version of the file: a command checks a run, then loads it
      stat = self.config_path.stat()
      version = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    except OSError:
      version = None
    if version is not None and self._config_read[0] == version:
      return copy.deepcopy(self._config_read[1])
    try:
      config = json.loads(self.config_path.read_bytes())
    except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8 text
      raise RunDirError(f"{self.config_path} is not JSON ({one_line(e)}): it was cut short or edited; "
                        f"{_RESTORE}") from None
    if not isinstance(config, dict):
      raise RunDirError(f"{self.config_path} holds a JSON {type(config).__name__}, not the run's options; {_RESTORE}")
    config = current_names(config)  # a run recorded before a field's rename reads as today's
    self._config_read = (version, copy.deepcopy(config))
    return config

  def read_options(self, from_dict: Callable[[dict], Any], record: dict | None = None) -> Any:
    """The saved configuration as ``from_dict`` (e.g. ``Config.from_dict``) builds it; a value it refuses (a field
    of the wrong type or out of range: the file was edited) is a one-line ``RunDirError`` naming the file and field.
    ``record``: config.json as :meth:`read_config` read it already.
    """
    record = self.read_config() if record is None else record
    try:
      return from_dict(record)
    except ConfigError as e:
      raise RunDirError(f"{self.config_path}: {str(e).rstrip('.')}; {_RESTORE}") from None

  def write_config(self, config: dict) -> None:
    make_dirs(self.path)
    write_json_atomic(self.config_path, finite_json(config))

  def read_metrics(self) -> list[dict]:
    """The rows of metrics.jsonl; a line that is not JSON (a file cut short or edited) is a one-line RunDirError."""
    return _read_rows(self.metrics_path) if self.metrics_path.exists() else []

  def write_metrics(self, rows: list[dict]) -> None:
    """Every row, undefined (non-finite) values as null: metrics.jsonl is strict JSON."""
    make_dirs(self.path)
    write_json_atomic(self.metrics_path, finite_json(rows), lines=True)

  def read_results(self) -> dict | None:
    return json.loads(self.results_path.read_text()) if self.results_path.exists() else None

  def write_results(self, results: dict) -> None:
    write_json_atomic(self.results_path, finite_json(results))

  # ---- checkpoints: ``self.checkpoints`` (fewshot.records.checkpoints), and resuming from them -------------
  def resume(self, state: Any, step_key: str, at: int | None | str = "latest") -> tuple[Any, list[dict]]:
    """Continue from the ``last`` checkpoint: ``(state, metrics rows up to it)``; ``(state, [])`` if none.

    ``at`` is the step a seed group resumes from where its runs stopped between their saves
    (:func:`group_start`): a run saved one checkpoint further goes back to it (None: to the start).
    Rows (whose step is ``row[step_key]``) and checkpoints newer than that (written before a crash) are
    dropped, since the resumed run replays those steps and writes them again.
    """
    at = self.checkpoints.step("last") if at == "latest" else at
    if at is None:
      self.checkpoints.drop_after(0)
      return state, []
    rows = self.read_metrics()
    state = self.checkpoints.restore("last", state, at, resuming=True)
    done = int(state.step)
    kept = [row for row in rows if row[step_key] <= done]
    if not kept or kept[-1][step_key] != done:
      ends = f"ends at {step_key} {kept[-1][step_key]}" if kept else "has no rows"
      raise RunDirError(f"{self.metrics_path} {ends} but checkpoints/last is at {step_key} {done}: rows are missing; "
                        "restore the file, or train the run again in a new --workdir.")
    self.checkpoints.drop_after(done)
    return state, kept


def _read_rows(path: pathlib.Path) -> list[dict]:
  rows = []
  for number, line in enumerate(path.read_text().splitlines(), 1):
    if line.strip():
      try:
        rows.append(json.loads(line))
      except json.JSONDecodeError:
        raise RunDirError(f"{path} line {number} is not JSON (the file was cut short or edited); restore it, or "
                          "delete that line and the ones after it to resume from the rows before.") from None
  return rows


def existing_run(path: str | os.PathLike, made_by: str = "python -m fewshot.train", kind: str = "fewshot") -> RunDir:
  """The run directory at ``path`` holding a run of ``kind`` (:data:`~fewshot.records.run_kinds.KINDS`); a missing, empty or non-run one,
  or one of the other kind, is a one-line ``RunDirError``.
  """
  rundir, fix = RunDir(path), f"pass the directory of a {made_by} run"
  if not rundir.path.exists():
    raise RunDirError(f"run directory {path} does not exist; {fix}.")
  if not rundir.path.is_dir():
    raise RunDirError(f"{path} is not a directory; {fix}.")
  if rundir.is_empty():
    raise RunDirError(f"run directory {path} is empty; {fix}.")
  if not rundir.holds_run():
    raise RunDirError(f"{path} holds no run (no config.json); {fix}.")
  found = run_kind(rundir.read_config())
  if found != kind:  # a run of another kind is tested by the same command, which reads its kind's row
    raise RunDirError(f"{path} holds a {KINDS[found].label} run ({KINDS[found].command}), not a {KINDS[kind].label} "
                      f"one: its test results are in its {rundir.results_path.name} (python -m fewshot.evaluate "
                      f"re-tests it); {fix}.")
  return rundir


def existing_checkpoint(path: str | os.PathLike, kind: str, option: str = "checkpoint") -> RunDir:
  """The run directory at ``path``, refused in one line unless it holds a run with a ``kind`` checkpoint
  (``option`` names the flag or argument that chose the kind).
  """
  rundir = existing_run(path)
  check_kind(kind, option)
  if not rundir.checkpoints.has(kind):
    raise RunDirError(f"{rundir.path} has no {kind!r} checkpoint yet; train it first (python -m fewshot.train "
                      "--resume), or test the other checkpoint.")
  return rundir
