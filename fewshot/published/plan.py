"""Which runs reproduce an entry, where they live, and what their records say: the command's plan, read again by the
page. Nothing here trains or imports JAX.

The runs of an entry under a schedule live under ``<out>/<entry>/<schedule>/<model>_<arm>/``: ``select/seed<k>``
(trained on the training classes, stopped on the validation split) and, where the entry retrains, ``final/seed<k>``
(trained on train + val for the length ``select`` chose); a cell is tested on the final run's last checkpoint (its
``best`` there) or, without retraining, on the select run's best one. Each is an ordinary run directory.
"""

from __future__ import annotations

import dataclasses
import json
import os

from fewshot.published.registry import Cell, Entry, Model, Schedule
from fewshot.records.measurements import measurement_name
from fewshot.records.run_kinds import KINDS

SELECT, FINAL = "select", "final"
SEEDS = (0, 1, 2)  # the seeds the command trains by default: each schedule's runs, declared with it


@dataclasses.dataclass(frozen=True)
class Group:
  """A seed group to train: the options of its runs (less the seed), its seeds and their run directories."""

  model: Model
  arm: str
  stage: str
  options: dict
  seeds: tuple[int, ...]
  workdirs: tuple[str, ...]


def schedule_folder(out: str, entry: Entry, schedule: Schedule) -> str:
  """Where a schedule's runs live: the entry's schedule's folder, or the folder of the runs that stand in for the
  schedule's (:class:`fewshot.published.registry.RunsOf`).
  """
  source = schedule.runs_of
  return os.path.join(out, *((source.entry, source.schedule) if source else (entry.name, schedule.name)))


def arm_folder(out: str, entry: Entry, schedule: Schedule, model: Model, arm: str) -> str:
  name = schedule.runs_of.models[model.name] if schedule.runs_of else model.name
  return os.path.join(schedule_folder(out, entry, schedule), f"{name}_{arm}")


def run_dir(out: str, entry: Entry, schedule: Schedule, model: Model, arm: str, stage: str, seed: int) -> str:
  return os.path.join(arm_folder(out, entry, schedule, model, arm), stage, f"seed{seed}")


def retrains(entry: Entry, schedule: Schedule) -> bool:
  """Whether the schedule's tested runs train on train + val (after a select run, or at a fixed length at once)."""
  if schedule.runs_of is not None:
    return schedule.runs_of.retrains
  return entry.retrain or not schedule.selects


def tested_stage(entry: Entry, schedule: Schedule) -> str:
  return FINAL if retrains(entry, schedule) else SELECT


def read_json(path: str) -> dict | None:
  """A record's JSON object, or None where there is none yet (or it is not one)."""
  try:
    with open(path) as f:
      value = json.load(f)
  except (OSError, ValueError):
    return None
  return value if isinstance(value, dict) else None


def select_group(out: str, entry: Entry, schedule: Schedule, model: Model, arm: str, seeds) -> Group:
  """The group that trains ``model`` with ``arm`` on the training classes (stopped on val where it retrains)."""
  options = entry.run_options(model, schedule, arm)
  dirs = tuple(run_dir(out, entry, schedule, model, arm, SELECT, s) for s in seeds)
  return Group(model, arm, SELECT, options, tuple(seeds), dirs)


def final_groups(out: str, entry: Entry, schedule: Schedule, model: Model, arm: str, seeds) -> list[Group]:
  """The groups that train on train + val, one per length chosen (the select runs' best episodes, plus the
  schedule's ``retrain_beyond``): only the seeds whose select run has finished; where the schedule does not select,
  one group of every seed at its own length.
  """
  lengths: dict[int, list[int]] = {}
  if not schedule.selects:
    lengths[int(schedule.options["episodes"])] = list(seeds)
  for seed in seeds if schedule.selects else ():
    chosen = read_json(os.path.join(run_dir(out, entry, schedule, model, arm, SELECT, seed), "results.json"))
    if chosen is not None:
      lengths.setdefault(int(chosen["best_episode"]) + schedule.retrain_beyond, []).append(seed)
  base = {k: v for k, v in entry.run_options(model, schedule, arm).items() if k != "patience"}
  return [Group(model, arm, FINAL, {**base, "episodes": length, "train_splits": "train+val"}, tuple(group),
                tuple(run_dir(out, entry, schedule, model, arm, FINAL, s) for s in group))
          for length, group in sorted(lengths.items())]


# The file holding a model's score on Lake's one-shot runs, by the cell's ``lake_runs``: his official 20
# (all_runs.zip), random runs of his design (fewshot.episodic.lake_design), or the runs fewshot drew before
# 2026-12-02 from the prepared test split (kept records only: their supports came from several drawers).
LAKE_RECORDS = {
    "official": lambda test: "lake_official.json",
    "design": lambda test: f"lake_design_{test['runs']}runs_{test['way']}way_seed{test['seed']}.json",
    "drawn": lambda test: f"lake_drawn_{test['runs']}runs_{test['way']}way_seed{test['seed']}.json",
}


def lake_record_name(test: dict) -> str:
  """The file of a Lake cell's measurement in a tested run's folder (:data:`LAKE_RECORDS`)."""
  return LAKE_RECORDS[test["lake_runs"]](test)


def own_test(entry: Entry, model: Model, cell: Cell) -> bool:
  """Whether a cell is the run's own test (results.json) rather than an evaluate measurement."""
  if entry.scored_on == "lake_runs":
    return False
  options = {**entry.options, **model.options}
  return all(options.get(k) == v for k, v in cell.test.items())


def cell_record(workdir: str, entry: Entry, model: Model, cell: Cell, results: dict | None = None) -> str | None:
  """The file holding a cell's measurement of a tested run (None where the run has not been tested yet);
  ``results``: the run's ``results.json`` where the caller has read it.
  """
  results = read_json(os.path.join(workdir, "results.json")) if results is None else results
  if results is None:
    return None
  if entry.scored_on == "lake_runs":
    return os.path.join(workdir, lake_record_name(cell.test))
  if own_test(entry, model, cell):
    return os.path.join(workdir, "results.json")
  options = {**entry.options, **model.options}
  name = measurement_name(options, {**options, **cell.test}, "best", int(results["best_episode"]),
                          int(cell.test.get("test_episodes", options["test_episodes"])))
  return os.path.join(workdir, name)


def cell_measured(out: str, entry: Entry, schedule: Schedule, cell: Cell, arm: str,
                  seeds) -> dict[int, tuple[float, float | None]]:
  """{seed: (the cell's measure in %, its 95% half-width over the test episodes, None where not recorded)} for the
  seeds measured so far, read by the entry's kind of run (:attr:`fewshot.records.run_kinds.RunKind.measure`).
  """
  model, read = entry.model(cell.model), KINDS[entry.kind].measure
  measured_seeds = {}
  for seed in seeds:
    workdir = run_dir(out, entry, schedule, model, arm, tested_stage(entry, schedule), seed)
    own = os.path.join(workdir, "results.json")
    results = read_json(own)
    record = cell_record(workdir, entry, model, cell, results)
    measured = results if record == own else read_json(record) if record else None
    value = None if measured is None else read(measured, cell.measure)
    if value is not None:
      measured_seeds[seed] = value
  return measured_seeds


def trained_length(out: str, entry: Entry, schedule: Schedule, model: Model, arm: str, seed: int) -> int | None:
  """How many episodes a seed's tested run trained (its config's ``episodes``), None where it has no config."""
  config = read_json(os.path.join(run_dir(out, entry, schedule, model, arm, tested_stage(entry, schedule), seed), "config.json"))
  return None if config is None or "episodes" not in config else int(config["episodes"])


def cell_values(out: str, entry: Entry, schedule: Schedule, cell: Cell, arm: str, seeds) -> dict[int, float]:
  """{seed: test accuracy in %} of a cell for the seeds measured so far."""
  return {seed: accuracy for seed, (accuracy, _) in cell_measured(out, entry, schedule, cell, arm, seeds).items()}


def seeds_found(out: str, entry: Entry, schedule: Schedule) -> list[int]:
  """Every seed with a run directory under the entry's schedule, in order."""
  found = set()
  for model in entry.models_of(schedule):
    for arm in entry.arms:
      for stage in (SELECT, FINAL):
        folder = os.path.join(arm_folder(out, entry, schedule, model, arm), stage)
        if os.path.isdir(folder):
          found.update(int(n[4:]) for n in os.listdir(folder) if n.startswith("seed") and n[4:].isdigit())
  return sorted(found)
