"""A run directory's records as analysis reads them: configuration, metrics rows, results.

``analyze``, ``plot`` and ``arms`` read runs through :func:`read_run` (no JAX, no orbax): a few-shot run's rows, or a
metric-learning run's, each fold model's ``fold<k>/metrics.jsonl`` marked with its ``fold`` (:func:`fold_runs` parts
them again); runs of both kinds are compared by neither (:func:`one_kind`). The directory itself, and the rule for
writing it, are :mod:`fewshot.records.rundir`'s.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import math
import os
import pathlib
from typing import Any, Callable

import numpy as np

from fewshot.errors import ConfigError, RunDirError
from fewshot.options import LOCATION_FIELDS
from fewshot.records.reuse import data_differences, said_data
from fewshot.records.run_kinds import DEFAULT, KINDS, run_kind
from fewshot.records.rundir import RunDir, checked_path, existing_run


@dataclasses.dataclass(frozen=True)
class Run:
  """One run directory's records, as analysis reads them."""

  path: str
  config: Any
  rows: tuple[dict, ...]
  results: dict | None
  measurements: tuple[tuple[str, dict], ...] = ()  # python -m fewshot.evaluate's records: (file name, record)
  provenance: dict | None = None  # config.json's: the code, versions and devices (None for runs from before it)
  axis: str = "episode"  # the row field that counts its checkpoints: a metric-learning run's is its "epoch"
  fold: int | None = None  # the fold model these rows are of (fold_runs); None: the whole run
  data: dict | None = None  # config.json's: what the run read (provenance.data_record; None before runs said)

  @property
  def backend(self) -> str | None:
    """The backend the run trained on, as its provenance names it."""
    return self.provenance.get("backend") if isinstance(self.provenance, dict) else None

  def series(self, key: str) -> tuple[np.ndarray, np.ndarray]:
    """Checkpoints (episodes, or a metric-learning run's epochs: :attr:`axis`) and one metric at each; an undefined
    (null or absent) value is NaN.
    """
    episodes = np.array([row[self.axis] for row in self.rows], dtype=np.int64)
    values = np.array([np.nan if row.get(key) is None else float(row[key]) for row in self.rows])
    return episodes, values

  def values(self, measure: str) -> np.ndarray:
    return self.series(measure)[1]


def _whole_count(value) -> bool:
  """A step or episode count as a row records it: a whole number from 0 to 2^53 (JSON may write 4000 as 4000.0)."""
  number = isinstance(value, (int, float)) and not isinstance(value, bool)
  return number and math.isfinite(value) and value == int(value) and 0 <= value <= 2**53


def _measurements(folder: pathlib.Path) -> dict[str, dict]:
  """What ``python -m fewshot.evaluate`` recorded in a run directory: each ``test_*.json`` by its file name (a
  few-shot test's accuracy, or a metric-learning re-test's fold models).
  """
  found = {}
  for path in sorted(folder.glob("test_*.json")):
    record = json.loads(path.read_text())
    if isinstance(record, dict) and ("test_accuracy" in record or "separated" in record):
      found[path.name] = record
  return found


def read_run(path: str | os.PathLike, config_type: Callable[[dict], Any], kind: str = "fewshot") -> Run:
  """A run's records (``config_type``: ``Config.from_dict``, or ``DMLConfig.from_dict`` for ``kind`` "dml");
  one-line ``RunDirError`` if unusable.
  """
  rundir = existing_run(path, KINDS[kind].command, kind)
  step = KINDS[kind].step
  record = rundir.read_config()
  config = rundir.read_options(config_type, record)
  folds = rundir.folds(getattr(config, "folds", 1))
  try:  # a metric-learning run's fold models each have their rows, marked with their "fold" here
    rows = tuple({**row, "fold": k} if len(folds) > 1 else row for k, fold in enumerate(folds)
                 for row in fold.read_metrics())
    results = rundir.read_results()
    measurements = tuple(_measurements(rundir.path).items())
  except (json.JSONDecodeError, TypeError, AttributeError) as e:
    raise RunDirError(f"{path} has an unreadable record ({type(e).__name__}: {e}); retrain or repair it.") from None
  if not rows:
    where = "metrics.jsonl" if len(folds) == 1 else "its fold models' fold<k>/metrics.jsonl"
    raise RunDirError(f"{path} has no metrics ({where} missing or empty); train it for at least one checkpoint.")
  if not all(isinstance(row, dict) and step in row for row in rows):
    raise RunDirError(f"{path}/metrics.jsonl has rows without an '{step}'; retrain or repair it.")
  odd = next((row[step] for row in rows if not _whole_count(row[step])), None)
  if odd is not None:
    raise RunDirError(f"{path}/metrics.jsonl has a row at {step} {odd!r}, not a whole number of {step}s (it was "
                      "edited); retrain or repair it.")
  return Run(path=str(path), config=config, rows=rows, results=results, measurements=measurements,
             provenance=record.get("provenance"), axis=step,
             data=record.get("data") if isinstance(record.get("data"), dict) else None)


def fold_runs(run: Run) -> list[Run]:
  """A metric-learning run's fold models, each as a run of its own rows (its :attr:`Run.fold` set): what a figure
  draws a curve of; ``[run]`` where it trained one model.
  """
  folds = sorted({row["fold"] for row in run.rows if "fold" in row})
  return [dataclasses.replace(run, rows=tuple(r for r in run.rows if r["fold"] == k), fold=k) for k in folds] or [run]


def run_kinds(paths: list[str]) -> dict[str, str]:
  """Each path's kind of run (:data:`~fewshot.records.run_kinds.KINDS`) by its config.json: "fewshot" where it holds
  none (:func:`read_run` then says what is wrong with it).
  """
  return {path: run_kind(RunDir(path).read_config()) if RunDir(path).holds_run() else DEFAULT for path in paths}


def one_kind(paths: list[str]) -> str:
  """The kind of run every path holds; runs of both kinds are a one-line ``ConfigError``: a few-shot run's test
  accuracy and a metric-learning run's MAP@R are not one measure.
  """
  kinds = run_kinds(paths)
  if len(set(kinds.values())) > 1:
    first, second = [kind for kind in KINDS if kind in kinds.values()][:2]
    one, other = (next(p for p, k in kinds.items() if k == kind) for kind in (first, second))
    raise ConfigError(f"{one} is a {KINDS[first].label} run and {other} a {KINDS[second].label} one, whose measures "
                      "differ; analyze or plot each kind's runs apart (--exclude leaves runs out; analyze --list "
                      "lists both).")
  return next(iter(kinds.values()), DEFAULT)


def read_runs(paths: list[str], config_type: Callable[[dict], Any], measurement: str | None = None,
              kind: str = "fewshot") -> list[Run]:
  """Each run directory's records (:func:`read_run`); a run named twice, under any path, is a one-line
  ``ConfigError``: its copy would count as another run (or another seed) in every statistic. With ``measurement``,
  each run's results are the ``python -m fewshot.evaluate`` record whose file name matches it (:func:`measured`).
  """
  named: dict[str, str] = {}
  for path in paths:
    same = named.setdefault(os.path.realpath(path), str(path))
    if same != str(path) or list(map(str, paths)).count(str(path)) > 1:
      raise ConfigError(f"{path} names the run {same} names already; name each run once (a copy would count as "
                        "another run, or another seed).")
  runs = [read_run(path, config_type, kind) for path in paths]
  _refuse_copies(runs)
  return runs if measurement is None else [measured(run, measurement) for run in runs]


def _refuse_copies(runs: list[Run]) -> None:
  """One-line ``ConfigError`` for two directories holding the same run (``cp -r``: the same options, seed and
  records), or two runs of one configuration and seed whose records differ (trained again, resumed elsewhere,
  partial): every statistic would count that seed twice.
  """
  seen: dict[str, str] = {}
  configured: dict[str, str] = {}
  for run in runs:
    results = {k: v for k, v in (run.results or {}).items() if k != "workdir"}  # the one field a copy changes
    options = {k: v for k, v in run.config.to_dict().items() if k not in LOCATION_FIELDS}
    key = json.dumps([options, run.rows, results], sort_keys=True, default=str)
    first = seen.setdefault(key, run.path)
    if first != run.path:
      raise ConfigError(f"{run.path} holds the same run as {first} (the same options, seed and records: a copy); "
                        "name each run once (a copy would count as another run, or another seed).")
    other = configured.setdefault(json.dumps(options, sort_keys=True, default=str), run.path)
    if other != run.path:
      raise ConfigError(f"{run.path} and {other} are two runs of one configuration and seed whose records differ "
                        "(trained again, resumed elsewhere, or one unfinished); every statistic would count the seed "
                        f"twice: leave one out (--exclude {run.path}).")


def measured(run: Run, pattern: str) -> Run:
  """The run with the results of its one ``python -m fewshot.evaluate`` record whose file name matches ``pattern``
  (shell-style: ``test_best@*_600ep_shot5.json``, the checkpoint's episode differing between runs); a one-line
  ``ConfigError`` where none or several match.
  """
  names = [name for name, _ in run.measurements if fnmatch.fnmatchcase(name, pattern)]
  if len(names) != 1:
    found = ", ".join(name for name, _ in run.measurements) or "none"
    raise ConfigError(f"--measurement {pattern} matches {len(names)} of {run.path}'s evaluate records ({found}); "
                      "pass a pattern that names one, e.g. test_best@*_600ep_shot5.json.")
  return dataclasses.replace(run, results=dict(run.measurements)[names[0]])


def runs_below(folder: str | os.PathLike) -> list[str]:
  """Every run directory (a folder holding ``config.json``) below ``folder``, at any depth, in path order; a run's
  own folders (its checkpoints, a metric-learning run's fold models) are not searched. Links to folders are
  followed, each folder read once (a run linked twice is one run, and a link to a parent is no loop).
  """
  found, seen = [], {os.path.realpath(folder)}
  for root, dirs, files in os.walk(folder, followlinks=True):
    if "config.json" in files and os.path.realpath(root) != os.path.realpath(folder):
      found.append(root)
      dirs.clear()
      continue
    kept = [d for d in sorted(dirs) if os.path.realpath(os.path.join(root, d)) not in seen]
    seen.update(os.path.realpath(os.path.join(root, d)) for d in kept)
    dirs[:] = kept
  return sorted(found)


def _left_out(path: str) -> str | None:
  """Why a run directory found below a folder is left out (None: it is read)."""
  try:
    config = json.loads((pathlib.Path(path) / "config.json").read_text())
  except (OSError, ValueError):
    return None  # read_run says what is wrong with it
  folds = config.get("folds", 1) if isinstance(config, dict) and "folds" in KINDS[run_kind(config)].marks else 1
  metrics = [rundir.metrics_path for rundir in RunDir(path).folds(folds)]
  return None if any(m.exists() and m.stat().st_size for m in metrics) else "no metrics row yet"


def excluded(found: list[str], patterns: list[str] | tuple[str, ...]) -> tuple[list[str], list[str]]:
  """``(kept, left out)`` of run paths by ``--exclude`` patterns (shell-style, matched against the path as found and
  as its real path); a pattern that matches no run is a one-line ``ConfigError`` (nothing is silently ignored).
  """
  matches = {p: [r for r in found if fnmatch.fnmatchcase(r, p) or fnmatch.fnmatchcase(os.path.realpath(r), p)
                 or os.path.realpath(r) == os.path.realpath(p)] for p in patterns}
  unmatched = [p for p, hit in matches.items() if not hit]
  if unmatched:
    raise ConfigError(f"--exclude {unmatched[0]} matches none of the runs named; pass a run's path or a pattern "
                      "such as 'runs/*seed3*'.")
  out = {r for hit in matches.values() for r in hit}
  return [r for r in found if r not in out], [r for r in found if r in out]


def expand(paths: list[str], exclude: list[str] | tuple[str, ...] = ()) -> tuple[list[str], bool, str | None]:
  """The run directories the paths name (a folder: every run below it) less those ``exclude`` matches
  (:func:`excluded`), whether a folder was named, and a warning line naming the runs left out (or None).
  """
  found, folder, left_out = [], False, []
  for path in paths:
    checked_path(path)  # a loop of links or a name no file system holds: one line
    p = pathlib.Path(path)
    if not p.is_dir() or (p / "config.json").exists() or not any(p.iterdir()):
      found.append(str(path))  # read_run refuses what is not a run, in one line
      continue
    folder = True
    below = runs_below(p)
    reasons = {run: _left_out(run) for run in below}
    found += [run for run, why in reasons.items() if why is None]
    left_out += [f"{run} ({why})" for run, why in reasons.items() if why is not None]
    if not below or all(reasons.values()):
      held = "holds no run directory (none below it has a config.json)" if not below else "holds no run to analyze"
      raise RunDirError(f"{path} {held}; pass run directories of python -m fewshot.train or python -m "
                        "fewshot.dml.train, or a folder of them.")
  found, dropped = excluded(found, exclude)
  left_out += [f"{run} (--exclude)" for run in dropped]
  shown = ", ".join(left_out[:3]) + (f" and {len(left_out) - 3} more" if len(left_out) > 3 else "")
  return found, folder, f"warning: left out {len(left_out)} runs: {shown}." if left_out else None


def run_precision(run: Run) -> str:
  """The arithmetic a run's backbone ran in (docs/numerics.md): ``float32``, or its ``--precision`` and backend where
  that is not float32 (a CPU computes float32 under every name; a run recording none ran before the option existed,
  on a CPU).
  """
  precision = getattr(run.config, "precision", "float32")
  if precision == "float32" or run.backend in (None, "cpu"):
    return "float32"
  return f"{precision} on {run.backend}"


def numerics_warning(runs: list[Run]) -> str | None:
  """One line where the runs' backbones ran in different arithmetic (:func:`run_precision`), else None."""
  seen = list(dict.fromkeys(run_precision(run) for run in runs))
  if len(seen) < 2:
    return None
  return (f"warning: the runs' backbones were computed in different precisions ({' vs '.join(seen)}; "
          "docs/numerics.md), so their embeddings differ beyond seed noise; comparing them anyway.")


def data_warning(arms: list[list[Run]], names: list[str]) -> str | None:
  """One line where runs pooled in an arm (or arms compared with each other) read different data (their records'
  split sizes, files or class lists: :func:`fewshot.records.reuse.data_differences`), else None.
  """
  def first_difference(runs):
    recorded = [r for r in runs if r.data is not None]
    for run in recorded[1:]:
      differ = data_differences(recorded[0].data, run.data) or data_differences(run.data, recorded[0].data)
      if differ:
        key = differ[0]
        return (f"{key} {said_data(recorded[0].data.get(key))} in {recorded[0].path} vs "
                f"{said_data(run.data.get(key))} in {run.path}")
    return None

  lines = [f"arm {name} pools runs that read different data ({found})" for name, arm in zip(names, arms)
           if (found := first_difference(arm))]
  if not lines and len(arms) > 1 and (found := first_difference([arm[0] for arm in arms if arm])):
    lines.append(f"the arms read different data ({found})")
  return f"warning: {'; '.join(lines)}; comparing them anyway." if lines else None


def run_labels(runs: list[Run]) -> list[str]:
  """Model names, made unique with the directory name (and then a position) where they repeat."""
  names = [run.config.model_name for run in runs]
  labels = [f"{name} [{pathlib.Path(run.path).name}]" if names.count(name) > 1 else name
            for name, run in zip(names, runs)]
  return [label if labels.count(label) == 1 else f"{label} #{i + 1}" for i, label in enumerate(labels)]


def protocol_warning(runs: list[Run]) -> str | None:
  """One line naming the protocol options (of the runs' kind) in which the runs differ, or None if they agree."""
  kind = run_kind(runs[0].config.to_dict()) if runs else DEFAULT
  values = {name: [str(getattr(run.config, name)) for run in runs] for name in KINDS[kind].protocol}
  differ = [f"{name} " + " vs ".join(dict.fromkeys(v)) for name, v in values.items() if len(set(v)) > 1]
  if not differ:
    return None
  return f"warning: the runs come from different protocols ({'; '.join(differ)}); comparing them anyway."
