"""Reproduce a published result: ``python -m fewshot.reproduce snell2017_omniglot --seeds 0-2 --data_dir DIR``.

Trains the entry's protocol (:mod:`fewshot.published`) under each seed, each model and arm a seed group, tests it as
the paper did, and prints for each cell the published value beside ours: mean ± 95% t-interval with the per-seed
values, the interval of ours − published and a verdict in fixed words under the cell's declared margin
(:mod:`fewshot.analysis.verdicts`); Lake's cells, ours beside the field's figures on the same items. Where the entry
retrains on train + val (Snell et al.), each seed's select run chooses the length on the validation split and its
final run trains that long (or, under a schedule that does not select, its fixed length at once).

Run it again to continue: finished runs are kept, interrupted ones resume, measurements already made are read back.
The runs are ordinary run directories under ``--out`` that ``evaluate``, ``analyze`` and ``plot`` read.
``--notrain`` prints what the records hold so far; ``--list`` names the entries; ``--page`` rebuilds
``docs/reproductions.md`` from the records kept in ``docs/reproductions/`` (:mod:`fewshot.published.page`).
"""

from __future__ import annotations

import os
import pathlib

from absl import flags

from fewshot import options, runner
from fewshot.config import Config
from fewshot.data import catalog
from fewshot.data.downloads import fetch_hint
from fewshot.errors import ConfigError, RunDirError
from fewshot.published import ENTRIES, plan, report
from fewshot.training import run_flags


def define_flags() -> None:
  """Define the command-line flags (only when run as a program, so importing this module defines none)."""
  with options.flag_heading("what to reproduce"):
    flags.DEFINE_string("seeds", f"{plan.SEEDS[0]}-{plan.SEEDS[-1]}", "the seeds (0-4, 0,3,5): each trains the whole protocol once")
    flags.DEFINE_string("schedule", None, "the entry's schedule: published (the paper's, the default) or a shorter "
                        "one it names (short)")
    flags.DEFINE_list("models", None, "the entry's models to run (default all, in its order), e.g. 1-shot")
    flags.DEFINE_list("arms", None, "the arms to run (default the entry's, e.g. softmax and dr: its heads)")
    flags.DEFINE_alias("heads", "arms")  # the records of runs made before arms name --heads in their command
    flags.DEFINE_bool("train", True, "train and test what is missing; --notrain: report what the records hold")
    flags.DEFINE_bool("list", False, "list the entries and exit")
  with options.flag_heading("the page"):
    flags.DEFINE_bool("page", False, "write --page_file from the records kept in --records (every entry) and exit")
    flags.DEFINE_string("keep", None, "with --page: first copy the records of the runs under this folder (the --out "
                        "of runs made) into --records")
    flags.DEFINE_string("records", "docs/reproductions", "where the page's records are kept")
    flags.DEFINE_string("page_file", "docs/reproductions.md", "the page written by --page")
  with options.flag_heading(options.DATA):
    flags.DEFINE_string("data_dir", None, "the dataset's files (the entry says which)")
    flags.DEFINE_string("tfds_dir", None, "where prepared datasets live (default $TFDS_DATA_DIR or "
                        "~/tensorflow_datasets)")
    flags.DEFINE_string("out", "runs/reproduce", "where the runs live: <out>/<entry>/<schedule>/<model>_<arm>/")


def entry_named(name: str):
  if name not in ENTRIES:
    raise ConfigError(f"no published entry {name!r}; choose one of {', '.join(ENTRIES)} (--list says what each is).")
  return ENTRIES[name]


def chosen(entry, models: list[str] | None, arms: list[str] | None, schedule=None):
  """The entry's models and arms a run asked for (by default those ``schedule`` trains), in the entry's order; a
  one-line ``ConfigError`` for others.
  """
  names = [m.name for m in (entry.models if schedule is None else entry.models_of(schedule))]
  models = names if models is None else models
  for given, known, flag in ((models, names, "models"), (arms, list(entry.arms), "arms")):
    unknown = [g for g in given or () if g not in known]
    if unknown:
      under = f" under schedule {schedule.name}" if flag == "models" and schedule is not None else ""
      raise ConfigError(f"{entry.name} has no {flag[:-1]} {unknown[0]!r}{under}; choose from {', '.join(known)}.")
  return ([m for m in entry.models if models is None or m.name in models],
          [h for h in entry.arms if arms is None or h in arms])


def check_data(entry, data_dir: str | None) -> None:
  """A one-line refusal naming the files an entry needs where --data_dir is missing or not a folder."""
  if catalog.SPECS[entry.dataset].built:  # strokes: drawn by the package, no files to read
    return
  if not data_dir or not os.path.isdir(data_dir):
    given = "no --data_dir" if not data_dir else f"--data_dir {data_dir} is not a folder"
    raise ConfigError(f"{entry.name} trains on {entry.dataset}, and {given}: pass --data_dir DIR holding "
                      f"{entry.needs}{fetch_hint(entry.dataset)}.")


def _config(group: plan.Group, data_dir: str | None, tfds_dir: str | None):
  from fewshot.config import Config

  return Config(**group.options, data_dir=data_dir, tfds_dir=tfds_dir)


# A run directory's refusal, for runs this command places itself: its fix instead of fewshot.train's flags.
OWN_FIX = "move those runs aside (or pass another --out) and run the same command again."


def train_group(group: plan.Group, data_dir: str | None, tfds_dir: str | None) -> None:
  """Train the group's runs that have no results yet (resuming those begun); finished ones are kept."""
  from fewshot import train

  for seed, workdir in zip(group.seeds, group.workdirs):  # a finished run kept only where it is this group's
    check_trained_as(workdir, group, seed)
  todo = [(s, w) for s, w in zip(group.seeds, group.workdirs) if plan.read_json(os.path.join(w, "results.json")) is None]
  if not todo:
    return
  seeds, workdirs = zip(*todo)
  begun = any(os.path.exists(os.path.join(w, "config.json")) for w in workdirs)
  print(f"{group.model.name} {group.arm} {group.stage}: seeds {', '.join(map(str, seeds))} "
        f"({group.options['episodes']} episodes at most)", flush=True)
  try:
    train.train_group(_config(group, data_dir, tfds_dir), tuple(seeds), list(workdirs), resume=begun)
  except RunDirError as e:  # what is wrong stays; the fix is this command's, which takes no --seed or --resume
    if e.fix is None:
      raise
    raise RunDirError(e.problem, OWN_FIX) from None


def check_trained_as(workdir: str, group: plan.Group, seed: int) -> None:
  """A one-line refusal where a finished run in the group's place trained with other options than the group's (an
  entry whose options changed since): kept, it would mix two protocols in one cell.
  """
  from fewshot.published import kept

  config = plan.read_json(os.path.join(workdir, "config.json"))
  if config is None or plan.read_json(os.path.join(workdir, "results.json")) is None:
    return
  expected = {**{k: v for k, v in group.options.items() if k != "patience"}, "seed": seed}
  differs = kept.option_differences(config, expected, "the entry now")
  if differs:
    raise ConfigError(f"{workdir} was trained with {differs[0]}; move the old runs aside (or pass another --out) "
                      "so that one cell holds one protocol.")


def measure_cells(out: str, entry, schedule, model, arm: str, seeds, data_dir: str | None,
                  tfds_dir: str | None) -> None:
  """Evaluate each of ``model``'s cells that is not the run's own test, on every tested run that lacks it (by the
  entry's scorer, :data:`SCORERS`).
  """
  for cell in (c for c in report.schedule_cells(entry, schedule) if c.model == model.name
               and not plan.own_test(entry, model, c)):
    for seed in seeds:
      workdir = plan.run_dir(out, entry, schedule, model, arm, plan.tested_stage(entry, schedule), seed)
      record = plan.cell_record(workdir, entry, model, cell)
      if record is None or os.path.exists(record):
        continue
      SCORERS[entry.scored_on](workdir, record, cell.test, data_dir, tfds_dir)


def measure_on_episodes(workdir: str, record: str, test: dict, data_dir: str | None, tfds_dir: str | None) -> None:
  """Test a run's best checkpoint on the cell's episodes (``python -m fewshot.evaluate``, which names ``record``)."""
  from fewshot import evaluate

  del record  # evaluate writes the measurement under the name plan.cell_record gives it
  evaluate.measure(workdir, "best", data_dir=data_dir, tfds_dir=tfds_dir, **test)


def lake_runs_for(test: dict, data_dir: str | None, image_size: int, resize: str = "box") -> tuple[list, str]:
  """The runs a Lake cell scores, read or drawn at the model's ``image_size``, and where from: Lake's official 20
  from the Omniglot folder, or random runs of his design from its images (:mod:`fewshot.episodic.lake_design`).
  """
  from fewshot.episodic import lake, lake_design

  if test["lake_runs"] == "official":
    found = check_official(data_dir)
    return lake.read_runs(found, image_size, resize), str(found.resolve())
  if test["lake_runs"] == "design":
    return (lake_design.design_runs(data_dir, test["runs"], test["way"], test["seed"], image_size,
                                    tuple(test.get("alphabets", lake_design.ALPHABETS)), resize=resize),
            str(pathlib.Path(data_dir).expanduser().resolve()))
  raise ConfigError(f"the cell's runs {test['lake_runs']!r} are no longer drawn (fewshot's drawn runs before "
                    "2026-12-02 took their supports from several drawers); score official or design runs.")


def check_official(data_dir: str | None):
  """Lake's all_runs.zip in the Omniglot folder, or a one-line refusal saying where to put it."""
  from fewshot.episodic import lake

  found = lake.official_runs(data_dir)
  if found is None:
    raise ConfigError(f"Lake's cells score his 20 official runs, and --data_dir {data_dir} holds no all_runs.zip "
                      "(beside the image zips or in one-shot-classification/): put the Omniglot repository's file "
                      "there (python -m fewshot.data.get omniglot --to DIR fetches it).")
  return found


def score_lake_runs(workdir: str, record: str, test: dict, data_dir: str | None, tfds_dir: str | None = None) -> None:
  """Score a run's best checkpoint on a Lake cell's runs (:func:`lake_runs_for`), written to ``record`` (the runs
  are read from ``data_dir``'s images, so ``tfds_dir`` is not used); read before the model is loaded.
  """
  del tfds_dir
  from fewshot import lake_scoring
  from fewshot.records.files import finite_json, write_json_atomic
  from fewshot.records.rundir import existing_checkpoint

  rundir = existing_checkpoint(workdir, "best")
  kept = rundir.read_config()
  config = rundir.read_options(Config.from_dict, kept)
  runs, source = lake_runs_for(test, data_dir or config.data_dir, config.image_size, config.resize)
  print(f"scoring {workdir} on {len(runs)} of Lake's {test['lake_runs']} one-shot runs", flush=True)
  results = lake_scoring.score_checkpoint(rundir, kept, "best", runs, source)
  write_json_atomic(record, finite_json({**results, "scored": dict(test)}))


def reproduce(name: str, seeds: tuple[int, ...], data_dir: str | None = None, tfds_dir: str | None = None,
              out: str = "runs/reproduce", schedule: str | None = None, models: list[str] | None = None,
              arms: list[str] | None = None, train: bool = True) -> str:
  """Train and test what is missing of an entry (with ``train``) and return the report of what its records hold."""
  entry = entry_named(name)
  chosen_schedule = entry.runnable(schedule) if train else entry.schedule(schedule)
  chosen_models, chosen_arms = chosen(entry, models, arms, chosen_schedule)
  if train and entry.not_comparable is None:
    check_data(entry, data_dir)
    if any(c.test.get("lake_runs") == "official" for c in report.schedule_cells(entry, chosen_schedule)):
      check_official(data_dir)  # before hours of training, not after
    for model in chosen_models:
      for arm in chosen_arms:
        if chosen_schedule.selects:
          train_group(plan.select_group(out, entry, chosen_schedule, model, arm, seeds), data_dir, tfds_dir)
        if plan.retrains(entry, chosen_schedule):
          for group in plan.final_groups(out, entry, chosen_schedule, model, arm, seeds):
            train_group(group, data_dir, tfds_dir)
        measure_cells(out, entry, chosen_schedule, model, arm, seeds, data_dir, tfds_dir)
  return REPORTS[entry.scored_on](out, entry, chosen_schedule, seeds)


def _episode_report(out: str, entry, schedule, seeds) -> str:
  return report.format_reports(entry, schedule, report.cell_reports(out, entry, schedule, seeds),
                               report.pooled(out, entry, schedule, seeds))


def _lake_report(out: str, entry, schedule, seeds) -> str:
  from fewshot.published import lake_report

  table = lake_report.table_lines(out, entry, schedule, seeds, report.arm_label)
  return "\n".join([f"{entry.name}: {entry.source}", f"schedule {schedule.name}: {schedule.about}",
                    *(table or ["no runs scored yet"])])


REPORTS = {"episodes": _episode_report, "lake_runs": _lake_report}  # by Entry.scored_on
SCORERS = {"episodes": measure_on_episodes, "lake_runs": score_lake_runs}  # by Entry.scored_on


def list_entries() -> str:
  return "\n".join(f"{e.name}: {e.source} (schedules: {', '.join(s.name for s in e.schedules)})"
                   for e in ENTRIES.values())


def write_page(records: str, page_file: str, keep_from: str | None = None) -> None:
  """Keep ``keep_from``'s records (where given), build the page, and only then write it (atomically): a refusal
  leaves the page as it was.
  """
  from fewshot.published import kept, page
  from fewshot.records.files import write_text_atomic

  folder = os.path.dirname(os.path.abspath(page_file))
  if not os.path.isdir(folder):
    raise ConfigError(f"--page_file {page_file}: its folder {folder} does not exist; run from the checkout, or pass "
                      "--page_file and --records.")
  if keep_from:
    print(f"kept the records of {len(kept.keep(keep_from, records, ENTRIES))} runs in {records}")
  text = page.build(records, list(ENTRIES.values()))
  write_text_atomic(page_file, text)
  print(f"wrote {page_file}")


def main(argv):
  from absl import logging

  logging.set_verbosity(logging.WARNING)
  values = flags.FLAGS
  if values.list:
    print(list_entries())
    return
  if values.page:
    write_page(values.records, values.page_file, values.keep)
    return
  if len(argv) != 2:
    raise ConfigError(f"name one entry to reproduce, e.g. python -m fewshot.reproduce snell2017_omniglot; one of "
                      f"{', '.join(ENTRIES)}.")
  if values.train:  # where every run goes: refused before the data is read, under the flag that chose it
    from fewshot.records.files import check_writable

    check_writable(values.out, "--out")
  print(reproduce(argv[1], run_flags.parse_seeds(values.seeds), values.data_dir, values.tfds_dir, values.out,
                  values.schedule, values.models, values.arms, values.train))


if __name__ == "__main__":
  define_flags()
  runner.run(main, takes_paths=True, resume="again")  # it continues what is begun by itself: no --resume
