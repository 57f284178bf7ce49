"""A run scored on Lake et al.'s one-shot runs: his 20 official runs (``all_runs.zip``) or random runs of his design
drawn from the Omniglot images; what ``python -m fewshot.evaluate --lake_runs`` / ``--lake_design`` measure and
write into the run directory (the design's file named as ``fewshot.reproduce`` names the same score).
"""

from __future__ import annotations

import dataclasses
import pathlib

from fewshot.config import Config
from fewshot.errors import ConfigError
from fewshot.records.files import finite_json, write_json_atomic
from fewshot.records.rundir import existing_checkpoint

LAKE_FILE = "lake_runs.json"
DESIGN_WAY, DESIGN_SEED = 20, 0  # runs of Lake's design: 20-way as his, seed 0 unless asked


def design_record(runs: int, way: int = DESIGN_WAY, seed: int = DESIGN_SEED) -> str:
  """The file holding a score on ``runs`` random runs of Lake's design (the name ``fewshot.reproduce`` uses too).

  >>> design_record(400)
  'lake_design_400runs_20way_seed0.json'
  """
  from fewshot.published import plan

  return plan.lake_record_name({"lake_runs": "design", "runs": runs, "way": way, "seed": seed})


def evaluate_lake(workdir: str, lake_runs: str | None, checkpoint: str = "best", test_shifts: int | None = None,
                  record: bool = True, design: dict | None = None, data_dir: str | None = None) -> dict:
  """Score a run's checkpoint on Lake's one-shot runs and write them to ``<workdir>/lake_runs.json`` (``record``);
  with ``design`` (``dict(runs=400, way=20, seed=0)``) in place of ``lake_runs``, on random runs of his design drawn
  from the Omniglot images in ``data_dir`` (None: the run's), written to :func:`design_record`'s file.

  Lake's runs are read (and refused) before the model is loaded, so bad input writes nothing.
  ``test_shifts`` replaces the run's ``--test_shifts`` (None keeps it).
  """
  from fewshot.episodic import lake, lake_design

  if (lake_runs is None) == (design is None):
    raise ConfigError("--lake_runs scores Lake's official runs and --lake_design runs of his design; give one of the "
                      "two (run the command twice for both).")
  rundir = existing_checkpoint(workdir, checkpoint, "--checkpoint")
  kept = rundir.read_config()  # read once: the model below is loaded from it
  config = rundir.read_options(Config.from_dict, kept)
  if test_shifts is not None:
    config = dataclasses.replace(config, test_shifts=test_shifts)  # refused here, before anything is read
  lake.check_model(config)
  if design is None:
    runs = lake.read_runs(lake_runs, config.image_size, config.resize)
    source, target = str(pathlib.Path(lake_runs).expanduser().resolve()), LAKE_FILE
  else:
    folder = data_dir or config.data_dir
    if not folder:
      raise ConfigError(f"{workdir} names no data folder: give --data_dir, the Omniglot folder holding "
                        "images_evaluation.zip, to draw runs of Lake's design from.")
    runs = lake_design.design_runs(folder, design["runs"], design["way"], design["seed"], config.image_size,
                                   resize=config.resize)
    source, target = str(pathlib.Path(folder).expanduser().resolve()), design_record(**design)
  results = score_checkpoint(rundir, kept, checkpoint, runs, source, test_shifts)
  if design is not None:
    results["design"] = dict(design)
  if record:
    write_json_atomic(rundir.path / target, finite_json(results))
  return results


def score_checkpoint(rundir, kept: dict, checkpoint: str, runs, source: str | None,
                     test_shifts: int | None = None) -> dict:
  """A run directory's ``checkpoint`` (its ``config.json`` already read as ``kept``) scored on Lake-style ``runs``
  read from ``source``: what ``evaluate --lake_runs`` / ``--lake_design`` and ``fewshot.reproduce``'s Lake cells
  record, with the checkpoint and its episode.
  """
  from fewshot import api  # the model machinery, only where a model is tested
  from fewshot.episodic import evaluators

  config, learner, state = api.restore_run(rundir, kept, checkpoint, test_shifts=test_shifts)
  results = evaluators.LakeRuns(config, learner, tuple(runs), config.test_shifts, source).run(state)
  results.update(checkpoint=checkpoint, checkpoint_episode=rundir.checkpoints.step(checkpoint))
  return results


def report(results: dict, checkpoint: str, design: dict | None) -> str:
  """What the command prints of a score: the model, checkpoint and runs scored, then the table (per run for the
  official runs).
  """
  from fewshot.episodic import lake

  views = f", mean over shifts by up to {results['test_shifts']} px" if results["test_shifts"] else ""
  which = "one-shot runs" if design is None else f"design (random runs, seed {design['seed']})"
  return (f"{results['model']} ({checkpoint} checkpoint, episode {results['checkpoint_episode']}) on Lake's {which} "
          f"({results['runs']} runs, {results['items']} items{views}):\n" + lake.table(results, per_run=design is None))
