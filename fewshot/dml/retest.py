"""A metric-learning run's fold models re-tested from their checkpoints: what ``python -m fewshot.evaluate --workdir
RUN`` does for a run of ``python -m fewshot.dml.train``, through the experiment's ``retrieval`` evaluator
(:mod:`fewshot.dml.evaluators`), so it reproduces the test its ``results.json`` holds.

    from fewshot.dml import retest
    results = retest.retest("runs/strokes_triplet_seed0")   # {"separated": [...], "concatenated": {...}, ...}
    results = retest.retest("runs/strokes_triplet_seed0", evaluator="episodes", way=5, shot=1)  # on episodes
    retest.measure("runs/strokes_triplet_seed0")   # printed, and written as test_best_retrieval.json
"""

from __future__ import annotations

import dataclasses

from fewshot.dml.config import DMLConfig
from fewshot.errors import ConfigError, RunDirError
from fewshot.records.checkpoints import check_kind
from fewshot.records.files import check_writable, finite_json, write_json_atomic
from fewshot.records.measurements import check_measured_data
from fewshot.records.rundir import RunDir, existing_run

RETRIEVAL_FILE = "test_{checkpoint}_retrieval.json"  # a re-test of the run's own retrieval
EPISODES_FILE = "test_{checkpoint}_episodes_{way}w{shot}s{query}q_{episodes}ep_seed{seed}.json"  # a test on episodes


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


def measure(workdir: str, checkpoint: str = "best", data_dir: str | None = None, tfds_dir: str | None = None,
            shape: dict | None = None, record: bool = True) -> dict:
  """:func:`retest` as ``python -m fewshot.evaluate`` runs it: the retrieval test, or with ``shape`` (``way``,
  ``shot``, ``query``, ``episodes``, ``seed``; None: the default) a test on few-shot episodes, each fold model's
  (and their concatenation's) line printed and, with ``record``, written into the run (:data:`RETRIEVAL_FILE`,
  :data:`EPISODES_FILE`).
  """
  rundir, config, _ = resolve(workdir, checkpoint)
  if shape is not None:
    shape = episode_options(config, **shape)
    target = rundir.path / EPISODES_FILE.format(checkpoint=checkpoint, **shape)
  else:
    target = rundir.path / RETRIEVAL_FILE.format(checkpoint=checkpoint)
  if record:
    check_writable(rundir.path, "--workdir")
  results = retest(workdir, checkpoint, data_dir, tfds_dir, "retrieval" if shape is None else "episodes",
                   **(shape or {}))
  parts = [(f"fold model {s['fold']}", s) for s in results["separated"]]
  parts += [("fold models concatenated", results["concatenated"])] if "concatenated" in results else []
  for label, part in parts:
    test, where = part["test"], f"{results['loss']} ({checkpoint} checkpoint, {label}, {part['dim']}-d)"
    if shape is not None:
      print(f"{where} on {shape['way']}-way {shape['shot']}-shot {shape['query']}-query episodes of "
            f"{results['test_classes']} test classes: test accuracy {test['test_accuracy']:.2f}% ± "
            f"{test['test_ci95']:.2f}% ({test['test_episodes']} episodes, nearest mean support embedding)")
    else:
      print(f"{where} on {results['test_classes']} test classes: MAP@R {100 * test['map_at_r']:.2f}%, R-precision "
            f"{100 * test['r_precision']:.2f}%, precision@1 {100 * test['precision_at_1']:.2f}%")
  if record:
    write_json_atomic(target, finite_json(results if shape is None else {**results, "options": shape}))
    print(f"wrote {target}")
  return results
