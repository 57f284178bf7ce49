"""Run directories written without training, with chosen diagnostics: inputs for analyze, plot and figures."""

import numpy as np

from fewshot.analysis import stats
from fewshot.records.rundir import RunDir

N = 20  # checkpoints per synthetic run: the ">= 20 checkpoints"


def write_run(path, head="softmax", values=None, n=N, seed=0, results=None, run_seed=0, **config):
  """A run directory whose diagnostics are ``values[measure]`` (random near 1 where not given)."""
  rng = np.random.default_rng(seed)
  values = values or {}
  columns = {m: values.get(m, rng.lognormal(0.0, 0.01, n)) for m in ("alpha", "psi_con", "psi_div") + stats.MEASURES}
  rundir = RunDir(path)
  rundir.write_config(dict(dict(dataset="omniglot", backbone="conv4", head=head, classifier="proto", way=5, shot=1,
                                query=16, episodes=100 * n, seed=run_seed), **config))
  rows = []
  for i in range(n):
    row = dict(episode=100 * (i + 1), train_loss=1.0 / (i + 1), train_accuracy=50.0 + i, theta=7.39,
               val_accuracy=60.0 + i, val_ci95=1.5, seconds=2.0)
    row.update({m: None if columns[m][i] is None else float(columns[m][i]) for m in columns})
    rows.append(row)
  rundir.write_metrics(rows)
  if results is not None:
    rundir.write_results(results)
  return str(path)


def write_curves_run(path, head, n=12, seed=0):
  """A run directory with random diagnostics, one of them null (undefined)."""
  rng = np.random.default_rng(seed)
  rundir = RunDir(path)
  rundir.write_config(dict(dataset="omniglot", backbone="conv4", head=head, classifier="proto", way=5, shot=1, seed=seed))
  rows = []
  for i in range(n):
    row = dict(episode=100 * (i + 1), val_accuracy=50.0 + 3 * i + rng.normal(), val_ci95=1.0,
               norm_ratio=float(rng.uniform(0.2, 0.8)))
    row.update({m: float(rng.lognormal(0.0, 0.01)) for m in ("con_alpha", "div_alpha", "con_div")})
    rows.append(row)
  rows[3]["norm_ratio"] = rows[5]["con_alpha"] = None
  rundir.write_metrics(rows)
  return str(path)


def write_dml_run(path, loss="triplet", seed=0, map_at_r=0.3, folds=1, epochs=3, **config):
  """A metric-learning run's records as ``python -m fewshot.dml.train`` leaves them (no JAX): a row per epoch at its
  top with one fold model, else in each ``fold<k>/`` (validation values drawn, seeded by the path); results.json's
  ``separated`` (the best epoch each fold model's), ``separated_mean`` and, with several, ``concatenated``. Its test
  retrieval, concatenated where it has several fold models: MAP@R ``map_at_r``, R-precision ``map_at_r + 0.1``,
  precision@1 ``map_at_r + 0.3``.
  """
  import zlib  # noqa: PLC0415

  from fewshot.dml.config import DMLConfig  # noqa: PLC0415

  options = DMLConfig(dataset="strokes", loss=loss, seed=seed, folds=folds, epochs=epochs, **config)
  rundir = RunDir(path)
  rundir.write_config({**options.to_dict(), "input_shape": [28, 28, 1]})
  rng = np.random.default_rng(zlib.crc32(str(path).encode()))
  test = {"map_at_r": map_at_r, "r_precision": map_at_r + 0.1, "precision_at_1": map_at_r + 0.3}
  separated = []
  for fold, model in enumerate(rundir.folds(folds)):
    rows = [{"epoch": e, "step": e * options.steps_per_epoch, "loss": float(rng.uniform(0.05, 0.5)),
             **{f"val_{m}": float(rng.uniform(0.1, 0.6)) for m in test}, "seconds": 1.0} for e in range(1, epochs + 1)]
    model.write_metrics(rows)
    best = max(rows, key=lambda row: row["val_map_at_r"])
    alone = test if folds == 1 else {m: v - 0.1 + 0.01 * fold for m, v in test.items()}
    separated.append({"fold": fold, "best_epoch": best["epoch"], "best_val_map_at_r": best["val_map_at_r"],
                      "dim": options.embedding_dim, "test": {**alone, "num_queries": 4000}})
  mean = {m: float(np.mean([s["test"][m] for s in separated])) for m in test}
  results = {"dataset": "strokes", "loss": loss, "miner": options.miner, "folds": folds, "test_classes": 200,
             "test_images": 4000, "separated": separated, "separated_mean": mean, "workdir": str(path)}
  if folds > 1:
    results["concatenated"] = {"dim": folds * options.embedding_dim, "test": {**test, "num_queries": 4000}}
  rundir.write_results(results)
  return str(path)
