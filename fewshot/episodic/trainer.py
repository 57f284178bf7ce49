"""Episodic training of one run or a seed group: what ``python -m fewshot.train`` does.

Trains a backbone with a few-shot head, validates every ``eval_every`` episodes, keeps the best checkpoint by
validation accuracy, and ends with the test accuracy of that checkpoint over ``test_episodes`` episodes (mean ±
95% interval). The bookkeeping of runs and seed groups is :mod:`fewshot.training.runs`' and the checkpoint loop
:mod:`fewshot.training.loop`'; this module supplies the episodes' chunk, the metrics rows and the test.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

from fewshot.analysis import stats
from fewshot.config import Config
from fewshot.episodic import learning
from fewshot.episodic.experiment import Experiment
from fewshot.training import loop, provenance, seed_groups
from fewshot.training.progress import say, start_lines
from fewshot.training.runs import Runs


def train_runs(config: Config, seeds: tuple[int, ...] | None, runs: Runs, progress: bool = True,
               placement: str = "auto", head=None, backbone=None) -> list[dict | None]:
  """Train, validate and test ``runs``, opened for ``config`` (under each of ``seeds``, or its own seed for one
  run), which records ``head`` and ``backbone``; every run's results in seed order, None for a run another
  process writes.
  """
  # Fails on bad data, or a backbone or head returning the wrong shapes, and writes nothing.
  experiment = Experiment.build(config, placement=placement, seeds=seeds, head=head, backbone=backbone)
  _explain_missing_diagnostics(experiment.learner)
  runs = runs.on(experiment.group)
  desc = config.model_name if seeds is None else f"{config.model_name} x{len(seeds)} seeds"
  runs.begin(image_shape=list(experiment.image_shape), provenance=provenance.provenance(), data=experiment.data)

  def train_chunk(state, episodes):
    state, metrics, diagnosed = learning.train_chunk(experiment.learner, state, experiment.sources["train"],
                                                     experiment.keys["train"], episodes)
    return state, (metrics, diagnosed)

  def make_rows(state, outputs):
    val = 100.0 * experiment.accuracies(state, "val", config.val_episodes)
    val = [val] if experiment.group is None else list(val)
    per_run = runs.states({"metrics": outputs[0], "diagnosed": outputs[1], "rho": state.params.get("rho")})
    # The chunk's mean loss and accuracy are taken on the device (as runs before seed groups did: same bits).
    per_run = [{**v, **jax.device_get({"diagnosed": v["diagnosed"], "rho": v["rho"]})} for v in per_run]
    return [_row(seed_groups.local_step(state.step), {**v, "val": run_val}) for v, run_val in zip(per_run, val)]

  def postfix(row, best):
    return dict(loss=f"{row['train_loss']:.3f}", val=f"{row['val_accuracy']:.2f}%", best=f"{best['val_accuracy']:.2f}%")

  schedule = loop.Schedule(config.episodes, config.eval_every, best_by="val_accuracy", step_key="episode",
                           loss_key="train_loss")
  _, bests = loop.train_until(runs, experiment.init_state(), schedule, train_chunk, make_rows, postfix,
                              progress=progress, desc=desc, unit="ep",
                              start=start_lines(desc, runs, config.dataset, experiment.data,
                                                config.precision))
  progress_line = f"{desc}: testing the best checkpoint on {config.test_episodes} test episodes"
  say(progress_line, progress and jax.process_index() == 0)
  tested = experiment.test(runs.restore("best", experiment.init_state()))
  tested = [tested] if experiment.group is None else tested
  return runs.finish([{**result, "best_episode": best["episode"], "best_val_accuracy": best["val_accuracy"]}
                      for result, best in zip(tested, bests)])


def _row(episode: int, v: dict) -> dict:
  """A checkpoint's metrics row of one run from its chunk outputs and validation accuracies."""
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


def _explain_missing_diagnostics(learner) -> None:
  """One line on stderr when the head has no class distance: the diagnostics built on psi will be null."""
  if learner.psi_head is None:
    print(f"warning: head {learner.head.name} has no class_distances, so psi_con, psi_div, con_alpha, div_alpha "
          "and con_div are recorded as null (alpha and norm_ratio need none; --psi_classifier proto measures psi "
          "with Euclidean prototypes instead).", file=sys.stderr)
