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
