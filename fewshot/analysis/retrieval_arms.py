"""Two arms of metric-learning runs compared by their test retrieval: ``python -m fewshot.analyze runs/A_seed*
-- runs/B_seed*`` on ``python -m fewshot.dml.train`` runs.

A run's test retrieval is its ``results.json``'s: the fold models' embeddings concatenated where it trained several
(``--folds``, Musgrave et al.'s protocol), else its one model's. Per metric (MAP@R first, the primary one; then
R-precision and precision@1, in percent): each arm's per-seed values, their mean with a 95% Student-t interval, B − A
with its Welch interval, the two-sided Mann–Whitney U and, for the seeds both arms share, the exact paired sign-flip
test; the verdict line is :func:`fewshot.analysis.arms.verdict_line`'s on MAP@R.

>>> [name for name, _ in METRICS]
['map_at_r', 'r_precision', 'precision_at_1']
"""

from __future__ import annotations

import numpy as np

from fewshot.analysis import arms, paired, stats
from fewshot.analysis.tables import MISSING, Cell, Table, format_mean_interval, format_p
from fewshot.records.reading import PROTOCOL_OPTIONS, Run

METRICS = (("map_at_r", "MAP@R"), ("r_precision", "R-precision"), ("precision_at_1", "precision@1"))
ARM_OPTIONS = PROTOCOL_OPTIONS["dml"]  # what two arms of metric-learning runs must share: their protocol's options


def test_retrieval(run: Run, metric: str) -> float:
  """The run's test ``metric`` in percent: its concatenated fold models' where it has them, else its mean model's."""
  results = run.results or {}
  tested = (results.get("concatenated") or {}).get("test") or results.get("separated_mean")
  if tested is None and results.get("separated"):  # a re-test's record (python -m fewshot.evaluate) has no mean
    found = [entry["test"].get(metric) for entry in results["separated"]]
    tested = {} if None in found else {metric: float(np.mean(found))}
  value = (tested or {}).get(metric)
  return float("nan") if value is None else 100.0 * float(value)


def values(arm: list[Run], metric: str = "map_at_r") -> np.ndarray:
  return np.array([test_retrieval(run, metric) for run in arm])


def check_arms(a: list[Run], b: list[Run]) -> None:
  """One-line ``ConfigError`` unless both arms have runs of one dataset, backbone, embedding and protocol."""
  arms.check_arms(a, b, ARM_OPTIONS, "one dataset, backbone and protocol")


def retrieval_table(a: list[Run], b: list[Run]) -> Table:
  """Per metric and arm: the seeds' values, mean ± t-interval; for B, B − A (Welch), Mann–Whitney and paired p."""
  rows = []
  for metric, label in METRICS:
    va, vb = values(a, metric), values(b, metric)
    fa, fb = va[np.isfinite(va)], vb[np.isfinite(vb)]
    difference, half = stats.welch_difference(fa, fb) if fa.size and fb.size else (None, None)
    p = stats.mann_whitney(fa, fb, method="auto")[0]
    seeds_b = {r.config.seed: v for r, v in zip(b, vb)}
    shared = [(v, seeds_b[r.config.seed]) for r, v in zip(a, va) if r.config.seed in seeds_b]
    paired_p = paired.sign_flip_p([y - x for x, y in shared]) if len(shared) >= 2 else None
    diff = MISSING if difference is None else f"{difference:+.2f}" + ("" if half is None else f" ± {half:.2f}")
    for name, arm, vals in (("A", a, va), ("B", b, vb)):
      per_seed = ", ".join(f"{r.config.seed}: " + (MISSING if np.isnan(v) else f"{v:.2f}") for r, v in zip(arm, vals))
      last = name == "B"
      rows.append((Cell(label if name == "A" else ""), Cell(name), Cell(arms.arm_label(arm)), Cell(per_seed),
                   Cell(format_mean_interval(vals)), Cell(diff if last else ""),
                   Cell(format_p(p) if last else "", bool(last and p is not None and p < 0.05)),
                   Cell(format_p(paired_p) if last else "", bool(last and paired_p is not None and paired_p < 0.05))))
  return Table("Test retrieval across seeds (%): the fold models concatenated where a run has several",
               ("metric", "arm", "loss", "per seed", "mean ± 95% t-interval", "B − A ± 95% Welch", "Mann-Whitney p",
                "paired sign-flip p"), tuple(rows))


def verdict_line(a: list[Run], b: list[Run]) -> str:
  """The arms' verdict on MAP@R (:func:`fewshot.analysis.arms.verdict_line`)."""
  return arms.verdict_line(a, b, values=values, measure="test MAP@R")
