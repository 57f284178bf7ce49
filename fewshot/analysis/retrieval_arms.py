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

from fewshot.analysis import arms
from fewshot.analysis.tables import Cell, Table
from fewshot.records.measures import retrieval_measure
from fewshot.records.reading import Run
from fewshot.records.run_kinds import KINDS

METRICS = (("map_at_r", "MAP@R"), ("r_precision", "R-precision"), ("precision_at_1", "precision@1"))
ARM_OPTIONS = KINDS["dml"].protocol  # what two arms of metric-learning runs must share: their protocol's options


def test_retrieval(run: Run, metric: str) -> float:
  """The run's test ``metric`` in percent (:func:`fewshot.records.measurements.retrieval_measure`); nan where
  untested.
  """
  measured = retrieval_measure(run.results or {}, metric)
  return float("nan") if measured is None else measured[0]


def values(arm: list[Run], metric: str = "map_at_r") -> np.ndarray:
  return np.array([test_retrieval(run, metric) for run in arm])


def check_arms(a: list[Run], b: list[Run]) -> None:
  """One-line ``ConfigError`` unless both arms have runs of one dataset, backbone, embedding and protocol."""
  arms.check_arms(a, b, ARM_OPTIONS, "one dataset, backbone and protocol")


def retrieval_table(a: list[Run], b: list[Run]) -> Table:
  """Per metric and arm: the seeds' values, mean ± t-interval; for B, B − A (Welch), Mann–Whitney and paired p."""
  rows = []
  for metric, label in METRICS:
    lead = lambda name, arm, label=label: (Cell(label if name == "A" else ""), Cell(name), Cell(arms.arm_label(arm)))  # noqa: E731
    rows += arms.compared_rows(a, b, values(a, metric), values(b, metric), lead)
  return Table("Test retrieval across seeds (%): the fold models concatenated where a run has several",
               ("metric", "arm", "loss", "per seed", *arms.COMPARED_HEADERS), tuple(rows))


def verdict_line(a: list[Run], b: list[Run]) -> str:
  """The arms' verdict on MAP@R (:func:`fewshot.analysis.arms.verdict_line`)."""
  return arms.verdict_line(a, b, values=values, measure="test MAP@R")
