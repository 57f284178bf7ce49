"""Episodic training: ``python -m fewshot.train --way 5 --shot 1 --head dr``.

Trains a backbone with a few-shot head, validates every ``--eval_every`` episodes,
keeps the best checkpoint by validation accuracy, and ends with the test accuracy of
that checkpoint over ``--test_episodes`` episodes (mean ± 95% interval).

``--seeds 0-7`` trains the configuration under several seeds as one seed group
(:mod:`fewshot.training.seed_groups`): one compiled program, the runs sharded over the devices, each
run written to its own directory exactly as a single run is.

JAX, Flax and the data loaders are imported inside the functions that train, so the command
checks its flags, configuration and run directory in about a second before loading them.
"""

from __future__ import annotations

import dataclasses

from fewshot import cli, options
from fewshot.config import Config
from fewshot.errors import ConfigError
from fewshot.records import rundir as rundirs


def define_flags() -> None:
  """Define the command-line flags (only when run as a program, so importing this module defines none)."""
  options.define_flags(Config)
  options.define_run_flags("runs/<dataset>_<backbone>_<model>_<way>w<shot>s_seed<seed>")


def train(config: Config, workdir: str, resume: bool = False, progress: bool = True, placement: str = "auto", *,
          head=None, backbone=None) -> dict:
  """Train, validate and test one configuration; returns the results written to results.json.

  ``head`` (a :class:`fewshot.heads.Head` value) and ``backbone`` (a flax module, images ``[n, H, W, C]`` to
  embeddings ``[n, D]``) replace the configuration's; the run records them as ``custom:<name>``
  (:func:`fewshot.episodic.experiment.with_values`), and ``fewshot.load`` takes them again.
  """
  return _train(config, None, [workdir], resume, progress, placement, head, backbone)[0]


def train_group(config: Config, seeds: tuple[int, ...], workdirs: list[str], resume: bool = False,
                progress: bool = True, placement: str = "auto", *, head=None, backbone=None) -> list[dict | None]:
  """Train ``config`` under each of ``seeds`` as one seed group, run ``k`` in ``workdirs[k]``; returns each
  run's results, in the order of ``seeds`` (None for a run another host holds). ``head``, ``backbone``: see
  :func:`train`.
  """
  if len(seeds) != len(workdirs):
    raise ConfigError(f"a group of {len(seeds)} seeds needs as many run directories, got {len(workdirs)}.")
  return _train(config, tuple(seeds), workdirs, resume, progress, placement, head, backbone)


def _train(config: Config, seeds: tuple[int, ...] | None, workdirs: list[str], resume: bool, progress: bool,
           placement: str, head=None, backbone=None) -> list[dict]:
  _check_values_passed(config, head, backbone)
  if head is not None or backbone is not None:
    from fewshot.episodic.experiment import with_values  # JAX: only for values passed from Python

    config = with_values(config, head, backbone)
  configs = [config] if seeds is None else [dataclasses.replace(config, seed=s) for s in seeds]
  dirs = rundirs.open_group_for_training(workdirs, configs, resume)
  import jax  # the training machinery: only once the options and run directories passed

  from fewshot.episodic import learning
  from fewshot.episodic.experiment import Experiment
  from fewshot.training import compilation_cache, distributed, loop, seed_groups

  compilation_cache.enable()
  # Fails on bad data, or a backbone or head returning the wrong shapes, and writes nothing.
  experiment = Experiment.build(config, placement=placement, seeds=seeds, head=head, backbone=backbone)
  _explain_missing_diagnostics(experiment.learner)
  indices = experiment.written
  distributed.barrier("fewshot: every process checked the group's run directories")  # before any is written
  runs = loop.Runs(tuple(dirs[i] for i in indices), experiment.group, indices)
  for i, rundir in zip(indices, runs.dirs):
    rundir.record_config({**configs[i].to_dict(), "image_shape": list(experiment.image_shape)})

  def train_chunk(state, episodes):
    state, metrics, diagnosed = learning.train_chunk(experiment.learner, state, experiment.sources["train"],
                                                     experiment.keys["train"], episodes)
    return state, (metrics, diagnosed)

  def make_rows(state, outputs):
    val = 100.0 * experiment.accuracies(state, "val", config.val_episodes)
    val = [val] if seeds is None else list(val)
    per_run = runs.states({"metrics": outputs[0], "diagnosed": outputs[1], "rho": state.params.get("rho")})
    # The chunk's mean loss and accuracy are taken on the device (as runs before seed groups did: same bits).
    per_run = [{**v, **jax.device_get({"diagnosed": v["diagnosed"], "rho": v["rho"]})} for v in per_run]
    return [_row(seed_groups.local_step(state.step), {**v, "val": run_val}) for v, run_val in zip(per_run, val)]

  def postfix(row, best):
    return dict(loss=f"{row['train_loss']:.3f}", val=f"{row['val_accuracy']:.2f}%", best=f"{best['val_accuracy']:.2f}%")

  schedule = loop.Schedule(config.episodes, config.eval_every, best_by="val_accuracy", step_key="episode",
                           loss_key="train_loss")
  desc = config.model_name if seeds is None else f"{config.model_name} x{len(seeds)} seeds"
  _, bests = loop.train_until(runs, experiment.init_state(), schedule, train_chunk, make_rows, postfix,
                              progress=progress, desc=desc, unit="ep")
  initial = experiment.init_state()
  best_states = runs.join([d.restore_checkpoint("best", s) for d, s in zip(runs.dirs, runs.states(initial))])
  tested = experiment.test(best_states)
  tested = [tested] if seeds is None else tested
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

  from fewshot.analysis import stats

  return {
      "episode": episode,
      "train_loss": float(jnp.mean(v["metrics"]["loss"])),
      "train_accuracy": float(100.0 * jnp.mean(v["metrics"]["accuracy"])),
      "theta": None if v["rho"] is None else float(np.exp(v["rho"])),  # a head without the DR's rho has no theta
      "val_accuracy": float(v["val"].mean()),
      "val_ci95": stats.mean_confidence_interval(v["val"])[1],
      # Undefined diagnostics (e.g. an update that did not move the embedding) are recorded as null: JSON has no NaN.
      **{name: stats.finite_or_none(float(value)) for name, value in v["diagnosed"].items()},
  }


def _check_values_passed(config: Config, head, backbone) -> None:
  """A configuration naming a value passed from Python (``--head custom:x``) cannot run without it: refused at once."""
  from fewshot import choices

  for kind, value in (("head", head), ("backbone", backbone)):
    if value is None and choices.is_custom(getattr(config, kind)):
      raise ConfigError(f"--{kind} {getattr(config, kind)} names a {kind} passed as a value from Python; pass it "
                        f"there (fewshot.train.train(config, workdir, {kind}=...)), or choose a built-in --{kind}.")


def _explain_missing_diagnostics(learner) -> None:
  """One line on stderr when the head has no class distance: the diagnostics built on psi will be null."""
  import sys

  if learner.psi_head is None:
    print(f"warning: head {learner.head.name} has no class_distances, so psi_con, psi_div, con_alpha, div_alpha "
          "and con_div are recorded as null (alpha and norm_ratio need none; --psi_classifier proto measures psi "
          "with Euclidean prototypes instead).", file=sys.stderr)


def format_results(config: Config, results: dict) -> str:
  return (
      f"{results['model']} {config.dataset} {config.test_way}-way {config.shot}-shot: test accuracy "
      f"{results['test_accuracy']:.2f}% ± {results['test_ci95']:.2f}% ({results['test_episodes']} episodes, "
      f"best checkpoint at episode {results['best_episode']})"
  )


def main(argv):
  del argv
  options.train_from_flags(Config, train, train_group, format_results)


if __name__ == "__main__":
  define_flags()
  cli.run(main)
