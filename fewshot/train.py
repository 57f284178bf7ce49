"""Episodic training: ``python -m fewshot.train --way 5 --shot 1 --head dr``.

Trains a backbone with a few-shot head, validates every ``--eval_every`` episodes,
keeps the best checkpoint by validation accuracy, and ends with the test accuracy of
that checkpoint over ``--test_episodes`` episodes (mean ± 95% interval).

``--seeds 0-7`` trains the configuration under several seeds as one seed group
(:mod:`fewshot.groups`): one compiled program, the runs sharded over the devices, each
run written to its own directory exactly as a single run is.

JAX, Flax and the data loaders are imported inside the functions that train, so the command
checks its flags, configuration and run directory in about a second before loading them.
"""

from __future__ import annotations

import dataclasses

from absl import flags, logging

from fewshot import cli, options
from fewshot import rundir as rundirs
from fewshot.config import Config
from fewshot.errors import ConfigError


def define_flags() -> None:
  """Define the command-line flags (only when run as a program, so importing this module defines none)."""
  options.define_flags(Config)
  options.define_run_flags("runs/<dataset>_<backbone>_<model>_<way>w<shot>s_seed<seed>")


FLAGS = flags.FLAGS


def train(config: Config, workdir: str, resume: bool = False, progress: bool = True, placement: str = "auto") -> dict:
  """Train, validate and test one configuration; returns the results written to results.json."""
  return _train(config, None, [workdir], resume, progress, placement)[0]


def train_group(config: Config, seeds: tuple[int, ...], workdirs: list[str], resume: bool = False,
                progress: bool = True, placement: str = "auto") -> list[dict | None]:
  """Train ``config`` under each of ``seeds`` as one seed group, run ``k`` in ``workdirs[k]``; returns each
  run's results, in the order of ``seeds`` (None for a run another host holds).
  """
  if len(seeds) != len(workdirs):
    raise ConfigError(f"a group of {len(seeds)} seeds needs as many run directories, got {len(workdirs)}.")
  return _train(config, tuple(seeds), workdirs, resume, progress, placement)


def _train(config: Config, seeds: tuple[int, ...] | None, workdirs: list[str], resume: bool, progress: bool,
           placement: str) -> list[dict]:
  configs = [config] if seeds is None else [dataclasses.replace(config, seed=s) for s in seeds]
  dirs = rundirs.open_group_for_training(workdirs, configs, resume)
  import jax  # the training machinery: only once the options and run directories passed
  import numpy as np

  from fewshot import episodic, groups, loop
  from fewshot.experiment import Experiment

  experiment = Experiment.build(config, placement=placement, seeds=seeds)  # fails on bad data, writes nothing
  indices = (0,) if seeds is None else tuple(experiment.group.local_runs())
  runs = loop.Runs(tuple(dirs[i] for i in indices), experiment.group, indices)
  for i, rundir in zip(indices, runs.dirs):
    rundir.record_config({**configs[i].to_dict(), "image_shape": list(experiment.image_shape)})

  def train_chunk(state, episodes):
    state, metrics, diagnosed = episodic.train_chunk(experiment.learner, state, experiment.sources["train"],
                                                     experiment.keys["train"], episodes)
    return state, (metrics, diagnosed)

  def make_rows(state, outputs):
    val = 100.0 * experiment.accuracies(state, "val", config.val_episodes)
    # The chunk's mean loss and accuracy are taken on the device (as runs before seed groups did: same bits).
    fetched = jax.device_get({"diagnosed": outputs[1], "rho": state.params["rho"], "val": val})
    values = {"metrics": outputs[0], **fetched}
    per_run = [values] if seeds is None else [groups.unstack(values, i) for i in indices]
    return [_row(int(np.asarray(state.step).ravel()[0]), v) for v in per_run]

  def postfix(row, best):
    return dict(loss=f"{row['train_loss']:.3f}", val=f"{row['val_accuracy']:.2f}%", best=f"{best['val_accuracy']:.2f}%")

  schedule = loop.Schedule(config.episodes, config.eval_every, best_by="val_accuracy", step_key="episode",
                           loss_key="train_loss")
  desc = config.model_name if seeds is None else f"{config.model_name} x{len(seeds)} seeds"
  _, bests = loop.train_until(runs, experiment.init_state(), schedule, train_chunk, make_rows, postfix,
                              progress=progress, desc=desc, unit="ep")
  like = runs.states(experiment.init_state())
  best_states = runs.join([d.restore_checkpoint("best", s) for d, s in zip(runs.dirs, like)], None)
  tested = experiment.test(best_states)
  tested = [tested] if seeds is None else [tested[i] for i in indices]
  results = [None] * len(workdirs)
  for i, rundir, best, result in zip(indices, runs.dirs, bests, tested):
    result.update(best_episode=best["episode"], best_val_accuracy=best["val_accuracy"], workdir=str(rundir.path))
    rundir.write_results(result)
    results[i] = result
  return results


def _row(episode: int, v: dict) -> dict:
  """A checkpoint's metrics row of one run from its chunk outputs and validation accuracies."""
  import jax.numpy as jnp
  import numpy as np

  from fewshot import stats

  return {
      "episode": episode,
      "train_loss": float(jnp.mean(v["metrics"]["loss"])),
      "train_accuracy": float(100.0 * jnp.mean(v["metrics"]["accuracy"])),
      "theta": float(np.exp(v["rho"])),
      "val_accuracy": float(v["val"].mean()),
      "val_ci95": stats.mean_confidence_interval(v["val"])[1],
      # Undefined diagnostics (e.g. an update that did not move the embedding) are recorded as null: JSON has no NaN.
      **{name: stats.finite_or_none(float(value)) for name, value in v["diagnosed"].items()},
  }


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
  group = options.seed_group_from_flags(config)
  if group is None:
    results = train(config, FLAGS.workdir or f"runs/{config.run_name}", resume=FLAGS.resume, placement=FLAGS.placement)
    print(format_results(config, results))
    print(f"run directory: {results['workdir']}")
    return
  seeds, workdirs = group
  for seed, workdir, results in zip(seeds, workdirs, train_group(config, seeds, workdirs, resume=FLAGS.resume,
                                                                  placement=FLAGS.placement)):
    if results is not None:  # another host's run
      print(f"seed {seed}: {format_results(config, results)}  [{workdir}]")


if __name__ == "__main__":
  define_flags()
  cli.run(main)
