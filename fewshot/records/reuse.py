"""The one rule for reusing a run directory: a new run takes an empty one, ``--resume`` takes its own run's.

:func:`open_for_training` checks one directory and :func:`open_group_for_training` a seed group's, before anything
is written and before JAX loads; a training checks each again with :func:`check_for_training` once it holds the
directory's lock (:mod:`fewshot.records.writer_lock`: another command may have written it in between);
:func:`group_start` is where a group stopped between its runs' saves resumes from, and :func:`saved_steps` where a
directory stands, read from folder names alone; a resumed run must read the data it trained on
(:func:`check_same_data`), and :func:`record_config` says when its config.json is written again.
"""

from __future__ import annotations

import json
import os
import pathlib

from fewshot.errors import RunDirError
from fewshot.options import EXTENDABLE_FIELDS, LENGTH_FIELDS, LOCATION_FIELDS
from fewshot.records.files import check_writable
from fewshot.records.run_kinds import KINDS, run_kind
from fewshot.records.rundir import RunDir, checked_path


def group_start(dirs: list[RunDir], checkpoint_every: int | None) -> int | None:
  """The step a seed group's runs resume from together: their ``last`` checkpoint, or, where the group stopped
  between its runs' saves (at most ``checkpoint_every`` steps apart, each still holding the earlier step), the
  earlier one.
  Runs saved at checkpoints no such stop leaves are refused whole, in one line.
  """
  latest = [d.checkpoints.step("last") for d in dirs]
  if len(set(latest)) <= 1:
    return latest[0]
  start = None if None in latest else min(latest)
  every = checkpoint_every
  if every is None or not all(step is None or step == start or (step - (start or 0) <= every and (
      start is None or start in d.checkpoints.steps("last"))) for d, step in zip(dirs, latest)):
    listed = ", ".join(f"{d.path} at {step or 0}" for d, step in zip(dirs, latest))
    raise RunDirError(f"the group's runs were saved at different checkpoints ({listed})",
                      "resume them one by one with --seed, or start the group in new directories.")
  return start


def _check_resumable(rundir: RunDir) -> None:
  """Refuse to resume a run whose metrics went on past a checkpoint it no longer has (it would restart at 0).

  One row and no ``last`` is a run stopped inside its first checkpoint (rows are written first, then ``best``, then
  ``last``): it resumes from the start, dropping that ``best``, and writes the row again.
  """
  for folder in (rundir, *(RunDir(p) for p in sorted(rundir.path.glob("fold*")) if p.is_dir())):
    rows = len(folder.read_metrics())  # a damaged metrics.jsonl is refused here, before any data is loaded
    if rows > 1 and not folder.checkpoints.has("last"):
      raise RunDirError(f"{folder.path} has metrics but no checkpoints/last to resume from (it was deleted or "
                        "moved); restore it, or train the run again in a new --workdir.")


def open_for_training(path: str | os.PathLike, config, resume: bool) -> RunDir:
  """The run directory for ``config``: empty, or this run's when resuming; refuses anything else (writes nothing).

  Where the data lives (:data:`LOCATION_FIELDS`) is not part of a run: a resumed run may read it from elsewhere.
  """
  rundir = check_for_training(path, config, resume)
  if resume and not rundir.holds_run():
    state = "does not exist" if not rundir.path.exists() else "holds no run (no config.json)"
    raise RunDirError(f"--resume: {rundir.path} {state}, so there is nothing to continue",
                      "leave out --resume to start a new run, or pass the run's --workdir.")
  return rundir


def _trained_anything(rundir: RunDir) -> bool:
  """Whether a run wrote anything beyond its configuration: a row, a checkpoint or results (or a fold model did)."""
  rows = any(p.stat().st_size for p in rundir.path.rglob("metrics.jsonl"))
  return rows or any(p.name.isdigit() for p in rundir.path.rglob("checkpoints/*/*")) or rundir.results_path.exists()


# Characters orbax reads as a glob pattern where it gathers a checkpoint's files: under a path holding one, every
# checkpoint is written but none can be read back.
GLOB_CHARACTERS = "[]*?"


def check_path_characters(path: str | os.PathLike) -> pathlib.Path:
  """``path`` resolved, or a one-line ``RunDirError`` for a run directory whose absolute path holds a
  :data:`GLOB_CHARACTERS` character, a name or a path longer than the file system takes, or a loop of links
  (:func:`~fewshot.records.rundir.checked_path`).
  """
  try:
    resolved = checked_path(path)
  except RunDirError as e:
    raise RunDirError(f"--workdir {e}") from None
  absolute = os.path.abspath(path)
  found = [c for c in GLOB_CHARACTERS if c in absolute]
  if found:
    raise RunDirError(f"--workdir {absolute} holds {' '.join(found)}, which orbax reads as a glob pattern where it "
                      "gathers a checkpoint's files, so no checkpoint of the run could be read back; choose a name "
                      f"without {' '.join(GLOB_CHARACTERS)} (sweep_lr_0.001 for sweep_lr[0.001]).")
  return resolved


# The folders of a run directory a training writes into (checkpoints are written into their kind's folder, then moved).
WRITTEN_FOLDERS = ("checkpoints", "checkpoints/best", "checkpoints/last", "tensorboard")


def check_for_training(path: str | os.PathLike, config, resume: bool) -> RunDir:
  """The rule for one existing or new directory, without the check that ``--resume`` finds a run to continue."""
  rundir = RunDir(check_path_characters(path), resolved=True)  # resolved once, by the check
  check_writable(rundir.path, "--workdir")
  for folder in WRITTEN_FOLDERS:  # a resumed run writes into these too: refused here, not at its first save
    if (rundir.path / folder).is_dir():
      check_writable(rundir.path / folder, "--workdir")
  if rundir.holds_run() and not resume and not _trained_anything(rundir):
    return rundir  # a run that stopped before it trained (out of memory, say): nothing to lose, so a new one may start
  if rundir.holds_run():
    saved, wanted = run_kind(rundir.read_config()), run_kind(config.to_dict())
    if saved != wanted:
      raise RunDirError(f"{rundir.path} holds a {KINDS[saved].label} run ({KINDS[saved].command}), not a "
                        f"{KINDS[wanted].label} one; choose another --workdir.")
    changed = rundir.differences(config, ignore=LOCATION_FIELDS + (EXTENDABLE_FIELDS if resume else ()))
    if changed:
      raise RunDirError(f"{rundir.path} holds a different run (it differs in {', '.join('--' + c for c in changed)})",
                        "choose another --workdir or repeat that run's options.")
    if not resume:
      raise RunDirError(f"{rundir.path} already holds this run",
                        "pass --resume to continue it or choose another --workdir.")
    _check_resumable(rundir)
    _check_extension(rundir, config)
  elif not rundir.is_empty():
    runs = sorted(p.parent for p in rundir.path.glob("*/config.json"))
    if runs:
      seeds = sorted({_recorded_seed(run) for run in runs} - {None})
      given = f"--seeds {','.join(map(str, seeds))} " if seeds else "--seeds "
      raise RunDirError(f"{rundir.path} holds no run but a folder of {len(runs)} (a seed group's)",
                        f"continue them with {given}--workdir {rundir.path} --resume, or pass one run's directory.")
    raise RunDirError(f"{rundir.path} is not empty and holds no run", "choose another --workdir.")
  return rundir


def _check_extension(rundir: RunDir, config) -> None:
  """A resumed run's raised :data:`LENGTH_FIELDS` (``--episodes``) lengthen it; shortening one is refused in one
  line: checkpoints past the new end would be another run's.
  """
  saved = rundir.read_config()
  for name in LENGTH_FIELDS:
    before, now = saved.get(name), getattr(config, name, None)
    reached = max(saved_steps(rundir.path).values(), default=0)
    if isinstance(before, int) and isinstance(now, int) and now < before and now < reached:
      raise RunDirError(f"{rundir.path} trained to {reached} of its --{name} {before}; --{name} {now} would end it "
                        f"before its last checkpoint: pass --{name} {reached} or more, or choose another --workdir.")


def _recorded_seed(run: pathlib.Path) -> int | None:
  try:
    seed = json.loads((run / "config.json").read_text()).get("seed")
  except (OSError, ValueError, AttributeError):
    return None
  return seed if isinstance(seed, int) else None


def _new(path: str | os.PathLike, folders: dict[str, pathlib.Path]) -> RunDir:
  """The directory of a run that does not exist yet, its parent folder resolved and checked once per ``folders``."""
  check_path_characters(path)
  parent, name = os.path.split(os.path.abspath(path))
  if parent not in folders:
    check_writable(parent, "--workdir")
    folders[parent] = pathlib.Path(parent).resolve()
  return RunDir(folders[parent] / name, resolved=True)


def open_group_for_training(paths: list, configs: list, resume: bool,
                            checkpoint_every: int | None = None) -> list[RunDir]:
  """Every run's directory of a seed group, refused as a whole (nothing written) if any is another run's or
  their last checkpoints disagree (a group trains its runs in step) beyond a stop between their saves, one
  checkpoint of ``checkpoint_every`` steps apart (:func:`group_start`).
  """
  if len(paths) == 1:
    return [open_for_training(paths[0], configs[0], resume)]
  folders: dict[str, pathlib.Path] = {}  # each parent folder resolved and checked once: a group may hold 100,000 runs
  dirs = [check_for_training(path, config, resume) if os.path.lexists(path) else _new(path, folders)
          for path, config in zip(paths, configs)]
  if resume and not any(d.holds_run() for d in dirs):
    raise RunDirError(f"--resume: none of the group's run directories ({', '.join(str(d.path) for d in dirs)}) "
                      "holds a run, so there is nothing to continue", "leave out --resume to start the group.")
  group_start(dirs, checkpoint_every)
  return dirs


def saved_steps(path: str | os.PathLike) -> dict[str, int] | None:
  """Where a run directory stands, read from folder names alone (no orbax, no JAX): each ``checkpoints/last`` in it
  (a metric-learning run's fold models have one each) and its step; None where the directory does not exist.
  """
  root = pathlib.Path(path)
  if not root.is_dir():
    return None
  steps = {}
  for model in [root, *sorted(p for p in root.glob("fold*") if p.is_dir())]:
    last = model / "checkpoints" / "last"
    saved = [int(p.name) for p in last.iterdir() if p.name.isdigit()] if last.is_dir() else []
    if saved:
      steps[str(last.relative_to(root))] = max(saved)
  return steps


def check_same_data(run: RunDir, data: dict) -> None:
  """A one-line ``RunDirError`` where ``run``, begun on data recorded otherwise (another dataset folder, other
  classes or images per split, other files, other class lists), would be resumed with ``data``: half a run on
  other data would read as one run. A moved copy of the same files records the same.

  Any begun run is compared, its ``config.json`` written, also one stopped before its first ``last`` checkpoint
  (between the ``best`` and ``last`` saves, say), which resumes from the start but as the run it is.
  """
  if not run.holds_run():  # a new run: nothing to compare
    return
  recorded = run.read_config().get("data")
  differ = data_differences(recorded, data)
  if not differ:
    return
  key, record = differ[0], run.read_config()
  if key == "class_lists_sha256":  # the lists changed, not the folder of images
    raise RunDirError(f"{run.path} trained on class lists whose SHA-256 was {str(recorded[key])[:12]}..., but "
                      f"--split_lists {record.get('split_lists')} now hold lists whose SHA-256 is "
                      f"{str(data.get(key))[:12]}...; restore the lists it trained on, or train the edited lists "
                      "in a new --workdir.")
  raise RunDirError(f"{run.path} trained on data whose {key} was {said_data(recorded.get(key))}, but its "
                    f"--data_dir now yields {said_data(data.get(key))}; resume it with the data it trained on "
                    f"(--data_dir {record.get('data_dir')}), or train the other data in a new --workdir.")


def data_differences(recorded, data: dict, keys: tuple[str, ...] | None = None) -> list[str]:
  """The entries of a run's recorded data (:func:`fewshot.training.provenance.data_record`) that ``data`` does not
  match, of ``keys`` (default all it recorded); none for a run recorded before runs said what they read.
  ``not_read`` (what the folder held beside its data) is no part of the data.
  """
  if not isinstance(recorded, dict):
    return []
  # The files now read must be among those recorded: older runs listed all a folder held at its top.
  same = lambda key, value: (set(data.get(key) or ()) <= set(value) if key == "files" and isinstance(value, list)  # noqa: E731
                             else data.get(key) == value)
  return [key for key, value in recorded.items() if key != "not_read" and (keys is None or key in keys)
          and not same(key, value)]


def record_config(run: RunDir, record: dict) -> None:
  """Write the run's configuration where the run is new (no ``last`` checkpoint yet), where it now reads its
  data from another place (a resumed run may: :data:`LOCATION_FIELDS` are not part of the run), or where it is
  trained further (:data:`EXTENDABLE_FIELDS`; its results, of the shorter run, are removed until it is tested).
  """
  saved = run.read_config() if run.holds_run() else {}
  moved = bool(saved) and any(saved.get(f) != record.get(f) for f in LOCATION_FIELDS)
  extended = bool(saved) and any(saved.get(f) != record.get(f) for f in EXTENDABLE_FIELDS)
  if extended and run.results_path.exists():
    run.results_path.unlink()
  if not run.checkpoints.has("last") or moved or extended:
    run.write_config(record)


def said_data(value) -> str:
  """A data record's entry in words: ``145 classes / 2900 images``, a file list, or the value itself."""
  if isinstance(value, dict) and {"classes", "images"} <= set(value):
    return f"{value['classes']} classes / {value['images']} images"
  if isinstance(value, list):
    return ", ".join(map(str, value)) or "nothing"
  return "nothing" if value is None else str(value)
