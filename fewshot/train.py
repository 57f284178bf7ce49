"""Episodic training: ``python -m fewshot.train --way 5 --shot 1 --head dr``.

Trains a backbone with a few-shot head, validates every ``--eval_every`` episodes,
keeps the best checkpoint by validation accuracy, and ends with the test accuracy of
that checkpoint over ``--test_episodes`` episodes (mean ± 95% interval).
"""

from __future__ import annotations

import numpy as np
from absl import flags, logging

from fewshot import cli, episodic, loop, options, stats
from fewshot import rundir as rundirs
from fewshot.config import Config
from fewshot.experiment import Experiment
from fewshot.train_state import TrainState


def define_flags() -> None:
  """Define the command-line flags (only when run as a program, so importing this module defines none)."""
  options.define_flags(Config)
  options.define_run_flags("runs/<dataset>_<backbone>_<model>_<way>w<shot>s_seed<seed>")


FLAGS = flags.FLAGS


def _theta(state: TrainState) -> float:
  return float(np.exp(np.asarray(state.params["rho"])))


def train(config: Config, workdir: str, resume: bool = False, progress: bool = True, placement: str = "auto") -> dict:
  """Train, validate and test one configuration; returns the results written to results.json."""
  rundir = rundirs.open_for_training(workdir, config, resume)
  experiment = Experiment.build(config, placement=placement)  # fails on bad data before anything is written
  if rundir.checkpoint_step("last") is None:
    rundir.write_config({**config.to_dict(), "image_shape": list(experiment.image_shape)})

  def train_chunk(state, episodes):
    state, metrics, diagnosed = episodic.train_chunk(experiment.learner, state, experiment.sources["train"],
                                                     experiment.keys["train"], episodes)
    return state, (metrics, diagnosed)

  def make_row(state, outputs):
    train_metrics, diagnosed = outputs
    val = 100.0 * experiment.accuracies(state, "val", config.val_episodes)
    return {
        "episode": int(state.step),
        "train_loss": float(np.mean(train_metrics["loss"])),
        "train_accuracy": float(100.0 * np.mean(train_metrics["accuracy"])),
        "theta": _theta(state),
        "val_accuracy": float(val.mean()),
        "val_ci95": stats.mean_confidence_interval(val)[1],
        # Undefined diagnostics (e.g. an update that did not move the embedding) are
        # recorded as null: JSON has no NaN.
        **{name: stats.finite_or_none(float(value)) for name, value in diagnosed.items()},
    }

  def postfix(row, best):
    return dict(loss=f"{row['train_loss']:.3f}", val=f"{row['val_accuracy']:.2f}%", best=f"{best['val_accuracy']:.2f}%")

  schedule = loop.Schedule(config.episodes, config.eval_every, best_by="val_accuracy", step_key="episode")
  _, best = loop.train_until(rundir, experiment.init_state(), schedule, train_chunk, make_row, postfix,
                             progress=progress, desc=config.model_name, unit="ep")
  results = experiment.test(rundir.restore_checkpoint("best", experiment.init_state()))
  results.update(best_episode=best["episode"], best_val_accuracy=best["val_accuracy"], workdir=str(rundir.path))
  rundir.write_results(results)
  return results


def format_results(config: Config, results: dict) -> str:
  return (
      f"{results['model']} {config.dataset} {config.way}-way {config.shot}-shot: test accuracy "
      f"{results['test_accuracy']:.2f}% ± {results['test_ci95']:.2f}% ({results['test_episodes']} episodes, "
      f"best checkpoint at episode {results['best_episode']})"
  )


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  config = options.from_flags(Config)
  workdir = FLAGS.workdir or f"runs/{config.run_name}"
  results = train(config, workdir, resume=FLAGS.resume, placement=FLAGS.placement)
  print(format_results(config, results))
  print(f"run directory: {results['workdir']}")


if __name__ == "__main__":
  define_flags()
  cli.run(main)
