"""Runs sorted into arms by configuration: one arm of seeds, or every arm found in a folder of runs.

An *arm* is the runs that share every option but ``--seed`` and where the data lives (``--data_dir``,
``--tfds_dir``: :data:`fewshot.options.LOCATION_FIELDS`), so its runs differ only in their seed. The tables:

* the arms' overview (:func:`overview_table`): a row per arm, named by its model and the options in which the arms
  differ, with its seeds' test accuracies and their mean ± 95% Student-t interval, and its run directories;
* each arm's diagnostics (:func:`diagnostics_table`): every diagnostic's geometric mean over each seed's
  checkpoints, a column per seed, and the median across seeds.

Arms are ordered by their options, field by field in the configuration's order, an option at its default before
any other value (numbers in numeric order): the baseline (the default softmax head, say) is arm A.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re

import numpy as np

from fewshot.analysis import stats
from fewshot.analysis.measures import DIAGNOSTICS
from fewshot.analysis.tables import MISSING, Cell, Table, format_mean_interval, format_value
from fewshot.errors import ConfigError
from fewshot.options import LOCATION_FIELDS
from fewshot.records.reading import Run

# Not part of an arm's configuration: its runs differ in their seed, and may read their data from anywhere.
NOT_CONFIGURATION = ("seed", *LOCATION_FIELDS)
# The options that make a model's name (ProtoNet_DR, 1-NN_S..., a metric-learning run's loss and miner): an arm's
# label names the model instead.
MODEL_FIELDS = ("classifier", "head", "distance", "loss", "miner")


def options(config) -> list[str]:
  """The names of a configuration's options that define an arm, in the configuration's order."""
  return [f.name for f in dataclasses.fields(config) if f.name not in NOT_CONFIGURATION]


def configuration(run: Run) -> tuple:
  return tuple((name, getattr(run.config, name)) for name in options(run.config))


def _order(config) -> tuple:
  def value_key(value):
    return (0, value, "") if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, 0, str(value))

  defaults = {f.name: f.default for f in dataclasses.fields(config)}
  return tuple((getattr(config, n) != defaults[n], value_key(getattr(config, n))) for n in options(config))


def arms_of(runs: list[Run]) -> list[list[Run]]:
  """The runs as arms (each in seed order), in the order of their options; a seed twice in an arm (a copied run)
  is a one-line ``ConfigError``: it would count twice in the arm's interval.
  """
  arms: dict[tuple, list[Run]] = {}
  for run in runs:
    arms.setdefault(configuration(run), []).append(run)
  for arm in arms.values():
    seen: dict[int, str] = {}
    for run in arm:
      if run.config.seed in seen:
        raise ConfigError(f"{seen[run.config.seed]} and {run.path} are the same configuration under seed "
                          f"{run.config.seed} (a copy?); name one of them, or move the other out of the folder.")
      seen[run.config.seed] = run.path
  ordered = sorted(arms.values(), key=lambda arm: _order(arm[0].config))
  return [sorted(arm, key=lambda r: r.config.seed) for arm in ordered]


def varying(configs: list, keep: tuple[str, ...] = NOT_CONFIGURATION) -> list[str]:
  """The options whose values differ among ``configs`` (one type), in the configuration's order; ``keep`` names
  the options left out (by default those that are not an arm's configuration).
  """
  names = [f.name for f in dataclasses.fields(configs[0]) if f.name not in keep]
  return [n for n in names if len({repr(getattr(c, n)) for c in configs}) > 1]


def arm_names(count: int) -> list[str]:
  return [chr(ord("A") + i) for i in range(count)] if count <= 26 else [str(i + 1) for i in range(count)]


def arm_label(arm: list[Run], differing: list[str]) -> str:
  """The arm's model and its other options among ``differing``: ``ProtoNet_DR, shot 5``."""
  config = arm[0].config
  return ", ".join([config.model_name] + [f"{n} {getattr(config, n)}" for n in differing if n not in MODEL_FIELDS])


def accuracy_of(run: Run) -> float | None:
  value = (run.results or {}).get("test_accuracy")
  return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def directories(arm: list[Run]) -> str:
  """The arm's run directories: one pattern where they differ only in their ``seed<k>`` (``runs/X_seed*``)."""
  patterns = {os.path.join(os.path.dirname(run.path), re.sub(r"seed\d+", "seed*", os.path.basename(run.path)))
              for run in arm}
  return patterns.pop() if len(patterns) == 1 and len(arm) > 1 else ", ".join(run.path for run in arm)


def per_seed(arm: list[Run], values: list[float | None]) -> str:
  return ", ".join(f"{r.config.seed}: " + (MISSING if v is None else f"{v:.2f}") for r, v in zip(arm, values))


def overview_table(arms: list[list[Run]]) -> Table:
  """A row per arm: its name and label, seeds, each seed's test accuracy, their mean ± 95% t-interval, runs."""
  differing = varying([arm[0].config for arm in arms])
  headers = ("arm", "configuration", "seeds", "test accuracy per seed (%)", "mean ± 95% t-interval (%)", "runs")
  rows = []
  for name, arm in zip(arm_names(len(arms)), arms):
    accuracies = [accuracy_of(r) for r in arm]
    cells = (name, arm_label(arm, differing), str(len(arm)), per_seed(arm, accuracies),
             format_mean_interval(accuracies), directories(arm))
    rows.append(tuple(Cell(text) for text in cells))
  title = "Test accuracy across seeds" if len(arms) == 1 else f"{len(arms)} arms: test accuracy across seeds"
  return Table(title, headers, tuple(rows))


def seed_means(arm: list[Run], diagnostic: str) -> list[float | None]:
  """Each seed's geometric mean of a diagnostic over its checkpoints (None where undefined)."""
  return [stats.finite_or_none(stats.geometric_mean(r.values(diagnostic))) for r in arm]


def _median(values: list[float | None]) -> float | None:
  finite = [v for v in values if v is not None]
  return float(np.median(finite)) if finite else None


def diagnostics_table(arm: list[Run], title: str) -> Table:
  """Every diagnostic of one arm: a column per seed (its geometric mean over its checkpoints) and their median."""
  headers = ("diagnostic", *(f"seed {r.config.seed}" for r in arm), "median across seeds")
  rows = []
  for diagnostic in DIAGNOSTICS:
    means = seed_means(arm, diagnostic.name)
    rows.append((Cell(diagnostic.label), *(Cell(format_value(m)) for m in means), Cell(format_value(_median(means)))))
  unrecorded = next((r.results["diagnostics"] for r in arm if r.results and r.results.get("diagnostics")), None)
  if unrecorded:  # a method without them (MAML, ANIL) says why, rather than a table of dashes
    return Table(f"{title}: the update diagnostics", ("diagnostics",), ((Cell(unrecorded),),))
  return Table(f"{title}: each seed's geometric mean over its checkpoints", headers, tuple(rows))


def csv_fields(arms: list[list[Run]]) -> tuple[str, ...]:
  return ("arm", "configuration", *varying([arm[0].config for arm in arms]), "seed", "directory", "test_accuracy",
          "test_ci95", *(f"geometric_mean_{d.name}" for d in DIAGNOSTICS), "arm_seeds", "arm_mean_test_accuracy",
          "arm_t95_half_width")


def csv_records(arms: list[list[Run]]) -> list[dict]:
  """A record per run, with its arm's mean test accuracy and t half-width beside it; None is empty."""
  differing = varying([arm[0].config for arm in arms])
  records = []
  for name, arm in zip(arm_names(len(arms)), arms):
    accuracies = [accuracy_of(r) for r in arm]
    finite = [a for a in accuracies if a is not None]
    mean, half = stats.t_interval(finite) if finite else (None, None)
    means = {d.name: seed_means(arm, d.name) for d in DIAGNOSTICS}
    for k, (run, accuracy) in enumerate(zip(arm, accuracies)):
      options_ = {n: getattr(run.config, n) for n in differing}
      record = {"arm": name, "configuration": arm_label(arm, differing), **options_, "seed": run.config.seed, "directory": run.path, "test_accuracy": accuracy,
                "test_ci95": (run.results or {}).get("test_ci95") if accuracy is not None else None,
                **{f"geometric_mean_{d}": m[k] for d, m in means.items()}, "arm_seeds": len(arm),
                "arm_mean_test_accuracy": mean, "arm_t95_half_width": half}
      records.append({key: "" if value is None else value for key, value in record.items()})
  return records
