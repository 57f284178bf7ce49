"""Metric-learning training of one run or a seed group: what ``python -m fewshot.dml.train`` does.

Each fold model trains in the shared checkpoint loop (:mod:`fewshot.training.loop`), one row of validation
retrieval metrics per epoch, its best checkpoint kept by validation MAP@R (the earliest of ties); the best
checkpoints are then tested on the test classes, each model alone ("separated") and, with 4 folds, the
concatenation of their L2-normalised embeddings, re-normalised ("concatenated"). The bookkeeping of runs and seed
groups is :mod:`fewshot.training.runs`'; this module supplies the batches' chunk, the rows and the test.
"""

from __future__ import annotations

import jax
import numpy as np

from fewshot import distances
from fewshot.analysis import stats
from fewshot.data import Split
from fewshot.dml import embedding
from fewshot.dml.config import DMLConfig
from fewshot.dml.experiment import Experiment
from fewshot.dml.metrics import retrieval_metrics
from fewshot.training import loop, provenance, seed_groups
from fewshot.training.progress import say, start_lines
from fewshot.training.runs import Runs

RECALL_AT = (1, 2, 4, 8)
REPORTED = ("precision_at_1", "r_precision", "map_at_r")


def retrieval(embeddings: np.ndarray, labels: np.ndarray) -> dict:
  """Retrieval metrics of a split against itself, the query left out of its own list; NaN as null."""
  recall_at = tuple(k for k in RECALL_AT if k < len(labels))
  m = retrieval_metrics(embeddings, labels, embeddings, labels, ref_includes_query=True, recall_at=recall_at)
  return {name: stats.finite_or_none(v) if isinstance(v, float) else v for name, v in m.as_dict().items()}


def _percent(fraction: float | None) -> str:
  """A retrieval metric as the progress bar shows it: a percentage."""
  return "n/a" if fraction is None else f"{100 * fraction:.2f}%"


def _mean(values: list) -> float | None:
  return None if any(v is None for v in values) else float(np.mean(values))


def train_runs(experiment: Experiment, runs: Runs, progress: bool = True) -> list[dict | None]:
  """Train every fold model of ``runs`` (opened for ``experiment.config``), test them, write their results; every
  run's results in seed order, None for a run another process writes.
  """
  c = experiment.config
  if c.custom_loss:  # a user's loss is traced once before anything is written (the registered ones are tested)
    embedding.check_loss(experiment.fold_learner(0), experiment.stored_shape)
  runs = runs.on(experiment.group)
  runs.begin(image_shape=list(experiment.input_shape), provenance=provenance.provenance(), data=experiment.data)
  seeds = len(runs.configs)
  start = start_lines(c.loss if seeds == 1 else f"{c.loss} x{seeds} seeds", runs, c.dataset, experiment.data, c.precision)
  folds = [runs.under(None if c.folds == 1 else f"fold{k}") for k in range(len(experiment.folds))]
  bests = [train_fold(experiment, fold_runs, k, progress, start if k == 0 else ())  # [fold][run]
           for k, fold_runs in enumerate(folds)]
  say(f"{c.loss}: testing the best checkpoint{'s' * (len(folds) > 1)} on {experiment.test.num_classes} test classes",
      progress and jax.process_index() == 0)
  embeddings = [experiment.embed(k, fold_runs.restore("best", experiment.initial_state(k)), experiment.test,
                                 runs.written) for k, fold_runs in enumerate(folds)]
  return runs.finish([results(c, experiment.test, [b[k] for b in bests], [e[k] for e in embeddings])
                      for k in range(len(runs.written))])


def train_fold(experiment: Experiment, runs: Runs, fold: int, progress: bool = True,
               start: tuple[str, ...] = ()) -> list[dict]:
  """Train (or finish training) fold model ``fold`` of each run; returns each written run's best validation row
  (``start``: the lines to print once the runs resumed).
  """
  c, val_split = experiment.config, experiment.folds[fold][1]
  learner, source, train_key = experiment.fold_learner(fold), experiment.train_source(fold), experiment.train_keys(fold)

  def make_rows(state, losses):
    step = seed_groups.local_step(state.step)
    rows = []
    for run_losses, run_embedded in zip(runs.states(losses), experiment.embed(fold, state, val_split, runs.written)):
      val = retrieval(run_embedded, val_split.labels)
      rows.append({"epoch": step // c.steps_per_epoch, "step": step,
                   "loss": stats.finite_or_none(float(np.mean(run_losses))),
                   **{f"val_{name}": val[name] for name in REPORTED}})
    return rows

  schedule = loop.Schedule(c.epochs * c.steps_per_epoch, c.steps_per_epoch, best_by="val_map_at_r")
  _, bests = loop.train_until(
      runs, experiment.initial_state(fold), schedule,
      lambda state, steps: embedding.train_chunk(learner, state, source, train_key, steps), make_rows,
      lambda row, best: dict(loss=row["loss"], val_map_at_r=_percent(row["val_map_at_r"]),
                             best=_percent(best["val_map_at_r"])),
      progress=progress, desc=c.loss if c.folds == 1 else f"{c.loss} fold {fold}", start=tuple(start))
  return bests


def results(c: DMLConfig, test: Split, bests: list[dict], embeddings: list[np.ndarray]) -> dict:
  """One run's results from each fold model's best validation row and test embeddings."""
  separated = [{"fold": k, "best_epoch": best["epoch"], "best_val_map_at_r": best["val_map_at_r"],
                "dim": int(e.shape[1]), "test": retrieval(e, test.labels)}
               for k, (best, e) in enumerate(zip(bests, embeddings))]
  out = {"dataset": c.dataset, "loss": c.loss, "miner": c.miner, "folds": c.folds,
         "test_classes": test.num_classes, "test_images": len(test.labels), "separated": separated,
         "separated_mean": {name: _mean([s["test"][name] for s in separated]) for name in REPORTED}}
  if c.folds > 1:
    # Each model's embedding is unit-length; their concatenation is re-normalised (the reality check's 512-d).
    concatenated = distances.l2_normalize(np.concatenate(embeddings, axis=1))
    out["concatenated"] = {"dim": int(concatenated.shape[1]), "test": retrieval(concatenated, test.labels)}
  return out
