"""A metric-learning run's fold models re-tested from their checkpoints: what ``python -m fewshot.evaluate --workdir
RUN`` does for a run of ``python -m fewshot.dml.train``, through the experiment's ``retrieval`` evaluator
(:mod:`fewshot.dml.evaluators`), so it reproduces the test its ``results.json`` holds.

    from fewshot.dml import retest
    results = retest.retest("runs/strokes_triplet_seed0")   # {"separated": [...], "concatenated": {...}, ...}
    results = retest.retest("runs/strokes_triplet_seed0", evaluator="episodes", way=5, shot=1)  # on episodes
"""

from __future__ import annotations

import dataclasses

from fewshot.dml.config import DMLConfig
from fewshot.errors import ConfigError, RunDirError
from fewshot.records.checkpoints import check_kind
from fewshot.records.measurements import check_measured_data
from fewshot.records.rundir import RunDir, existing_run


def fold_dirs(rundir: RunDir, config: DMLConfig) -> list[RunDir]:
  """Each fold model's directory: the run's own with ``--folds 1``, else its ``fold<k>/`` (:meth:`RunDir.folds`)."""
  return rundir.folds(config.folds)


def resolve(workdir: str, checkpoint: str = "best", data_dir: str | None = None,
            tfds_dir: str | None = None) -> tuple[RunDir, DMLConfig, list[RunDir]]:
  """The run, its options (the data's folders replaced where given) and its fold models' directories; a one-line
  error where it cannot be re-tested, before anything is loaded.
  """
  check_kind(checkpoint, "--checkpoint")
  rundir = existing_run(workdir, "python -m fewshot.dml.train", kind="dml")
  config = rundir.read_options(DMLConfig.from_dict)
  if config.custom_loss:
    raise ConfigError(f"{rundir.path} trained with a user-written loss ({config.loss}); re-test it from Python with "
                      "fewshot.dml.experiment.Experiment(config, loss=your_loss).evaluator('retrieval').")
  folds = fold_dirs(rundir, config)
  for fold in folds:
    if not fold.checkpoints.has(checkpoint):
      raise RunDirError(f"{fold.path} has no {checkpoint!r} checkpoint yet; train it first (python -m "
                        "fewshot.dml.train --resume), or test the other checkpoint.")
  changes = {k: v for k, v in (("data_dir", data_dir), ("tfds_dir", tfds_dir)) if v is not None}
  return rundir, dataclasses.replace(config, **changes), folds


EPISODE_DEFAULTS = {"way": 5, "shot": 1, "query": 15, "episodes": 600}  # the field's common test, 600 episodes
_EPISODE_FLAGS = {"way": ("--test_way", 2), "shot": ("--shot", 1), "query": ("--test_query", 1),
                  "episodes": ("--test_episodes", 1), "seed": ("--seed", 0)}


def episode_options(config: DMLConfig, **given) -> dict:
  """The few-shot episodes a metric-learning run is tested on: ``given`` (None: the default; the seed's is the
  run's), each checked in one line before anything is loaded.
  """
  chosen = {**EPISODE_DEFAULTS, "seed": config.seed, **{k: v for k, v in given.items() if v is not None}}
  for name, (flag, least) in _EPISODE_FLAGS.items():
    if type(chosen[name]) is not int or chosen[name] < least:
      raise ConfigError(f"{flag} {chosen[name]!r} is not a whole number of at least {least}; pass one, e.g. "
                        f"{flag} {EPISODE_DEFAULTS.get(name, 0)}.")
  return chosen


def retest(workdir: str, checkpoint: str = "best", data_dir: str | None = None, tfds_dir: str | None = None,
           evaluator: str = "retrieval", **options) -> dict:
  """Each fold model's ``checkpoint`` tested on the test split (separated, and concatenated with several), with the
  step each was saved at: by ``evaluator`` of :mod:`fewshot.dml.evaluators` (``retrieval``, the run's own test, or
  ``episodes``, few-shot episodes: ``options`` ``way``, ``shot``, ``query``, ``episodes``, ``seed``).
  """
  rundir, config, folds = resolve(workdir, checkpoint, data_dir, tfds_dir)
  from fewshot.dml.experiment import Experiment  # the model machinery, once the run passed
  from fewshot.training import compilation_cache

  compilation_cache.enable()
  experiment = Experiment(config)
  check_measured_data(rundir, experiment.data, config.data_dir, keys=None)  # its folds are drawn from every split
  states = [fold.checkpoints.restore(checkpoint, experiment.initial_state(k)) for k, fold in enumerate(folds)]
  [tested] = experiment.evaluator(evaluator, **options).run(states)
  return {"loss": config.loss, "test_classes": experiment.test.num_classes, **tested, "checkpoint": checkpoint,
          "checkpoint_steps": [fold.checkpoints.step(checkpoint) for fold in folds]}
