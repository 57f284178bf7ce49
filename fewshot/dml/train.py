"""Metric-learning training: ``python -m fewshot.dml.train --dataset cars196 --loss triplet --miner semi_hard``.

The reality check's protocol (Musgrave, Belongie & Lim 2020, arXiv 2003.08505; docs/protocol.md): the
training classes are cut into 4 class-disjoint folds; each fold model trains on 3 of them and is validated
(P@1, R-Precision, MAP@R) on the 4th every epoch, keeping its best checkpoint by validation MAP@R. The best
checkpoints are then tested on the test classes, each model alone ("separated") and, with ``--folds 4``, the
4 models' L2-normalised embeddings concatenated and re-normalised ("concatenated"). ``--folds 1`` trains fold model 0
only, or, where the dataset has a 'val' split (strokes, omniglot, mini_imagenet),
trains on all of 'train' and validates on 'val'.

Folds are contiguous blocks of the training split's class order (its labels, the
dataset's default order) under ``--class_order default``; under ``--class_order random``
the split's classes are first permuted by ``--split_seed`` (the split holds its classes
sorted, so without this the folds would keep the default order's related classes together).

A seed group (``--seeds 0-4``) prints each run's results, then one line: test MAP@R's mean ± 95% Student-t
interval across the seeds (of the concatenated models and the separated ones' mean with ``--folds 4``).

The training itself is :mod:`fewshot.dml.experiment` under :mod:`fewshot.training.trainer`, imported once the
flags, configuration and run directory passed, so a bad option is refused before JAX loads.

Run directory (``--folds 1``: the fold's files are at the top)::

  <workdir>/config.json                 the resolved configuration (+ input_shape, the backbone's input)
  <workdir>/results.json                test metrics of the best checkpoint(s)
  <workdir>/fold<k>/metrics.jsonl       one row per epoch: loss, validation metrics, seconds
  <workdir>/fold<k>/checkpoints/{last,best}
"""
from __future__ import annotations

import dataclasses

from absl import flags

from fewshot import choices, options, runner
from fewshot.analysis import tables
from fewshot.dml import config as dml_config
from fewshot.dml.config import DMLConfig
from fewshot.records.rundir import RunDir
from fewshot.training import compilation_cache, run_flags
from fewshot.training.runs import Runs


def define_flags() -> None:
  """Define the command-line flags (only when run as a program, so importing this module defines none)."""
  options.define_flags(DMLConfig)
  run_flags.define_run_flags("runs/dml_<dataset>_<backbone>_<loss>_seed<seed>")
  with options.flag_heading(dml_config.TRAINING):
    flags.DEFINE_bool("data_parallel", None, "shard each batch over the devices (default: on when there are several, "
                      "off with --seeds, whose runs are sharded instead)")


FLAGS = flags.FLAGS


def train(config: DMLConfig, workdir: str, resume: bool = False, progress: bool = True,
          placement: str = "auto", data_parallel: bool | None = None, loss=None) -> dict:
  """Train, validate and test one configuration; returns the results written to results.json.

  ``data_parallel`` shards each batch over the devices (default: when there are several). ``loss``, a
  :class:`fewshot.dml.losses.Loss` (a user's own), replaces ``config.loss``, which records it as
  ``custom:<name>``; resuming such a run takes the same ``loss`` again.
  """
  return _train(config, None, [workdir], resume, progress, placement, data_parallel, loss)[0]


def train_group(config: DMLConfig, seeds: tuple[int, ...], workdirs: list[str], resume: bool = False,
                progress: bool = True, placement: str = "auto", loss=None) -> list[dict | None]:
  """Train ``config`` under each of ``seeds`` as one seed group, run ``k`` in ``workdirs[k]``; each run's results."""
  return _train(config, tuple(seeds), workdirs, resume, progress, placement, None, loss)


def _train(config: DMLConfig, seeds: tuple[int, ...] | None, workdirs: list[str], resume: bool, progress: bool,
           placement: str, data_parallel: bool | None, loss) -> list[dict | None]:
  config = _with_loss(config, loss, workdirs, resume)
  runs = Runs.open(config, seeds, workdirs, resume, checkpoint_every=config.steps_per_epoch)
  from fewshot.dml.experiment import Experiment  # JAX and the data loaders: once the options and directories passed
  from fewshot.training import trainer

  compilation_cache.enable()
  # The experiment fails on bad data (and a loss that does not return a scalar) before anything is written.
  experiment = Experiment(config, placement, seeds, data_parallel=data_parallel, loss=loss)
  return trainer.train_runs(experiment, runs, progress)


def _with_loss(config: DMLConfig, loss, workdirs: list[str], resume: bool) -> DMLConfig:
  """``config`` recording ``loss``; a user-written loss's run without its function is a one-line ConfigError."""
  if loss is not None:
    return dataclasses.replace(config, loss=loss.label)
  for saved in (RunDir(workdir) for workdir in workdirs):
    if resume and saved.holds_run():
      choices.require_values(saved.read_config(), {"loss": None}, f"resume {saved.path} from Python with "
                             "fewshot.dml.train.train(config, workdir, resume=True, loss=<that Loss>).")
  choices.require_values(config, {"loss": None}, "pass it, fewshot.dml.train.train(config, workdir, loss=<the Loss>).")
  return config


def format_results(config: DMLConfig, results: dict) -> str:
  def metrics(m):
    return ", ".join(f"{name} " + ("n/a" if m[name] is None else f"{100 * m[name]:.2f}")
                     for name in ("precision_at_1", "r_precision", "map_at_r"))

  lines = [f"{config.dataset} {config.loss} ({results['test_classes']} test classes): test retrieval, %"]
  for s in results["separated"]:
    model = "model" if config.folds == 1 else f"fold {s['fold']}"  # one model: no fold to name
    lines.append(f"  {model} ({s['dim']}-d, best epoch {s['best_epoch']}): {metrics(s['test'])}")
  if "concatenated" in results:
    lines.append(f"  separated mean: {metrics(results['separated_mean'])}")
    lines.append(f"  concatenated ({results['concatenated']['dim']}-d): {metrics(results['concatenated']['test'])}")
  return "\n".join(lines)


def format_group(config: DMLConfig, seeds: tuple[int, ...], results: list[dict]) -> str:
  """The line after a seed group's results: test MAP@R's mean ± 95% t-interval across the seeds, of the
  concatenated models and the separated ones' mean where the runs hold several folds, else of the one model.
  """
  def percent(metrics):
    return None if metrics.get("map_at_r") is None else 100 * metrics["map_at_r"]

  if all("concatenated" in r for r in results):
    measures = {"test MAP@R concatenated": [percent(r["concatenated"]["test"]) for r in results],
                "separated mean": [percent(r["separated_mean"]) for r in results]}
  else:
    measures = {"test MAP@R": [percent(r["separated_mean"]) for r in results]}
  return tables.group_line(seeds, len(results), measures)


def main(argv):
  del argv
  run_flags.train_from_flags(DMLConfig, train, train_group, format_results, format_group, data_parallel=FLAGS.data_parallel)


if __name__ == "__main__":
  define_flags()
  runner.run(main)
