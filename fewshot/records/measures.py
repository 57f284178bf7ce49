"""What a run's records say it measured: a measure (``test_accuracy``, ``map_at_r``, ...) read from a tested record
(``results.json``, an evaluate record, a Lake record) by its kind's reader (:attr:`fewshot.records.run_kinds.RunKind.
measure`), each ``(record, measure) -> (value in %, its 95% half-width over the test episodes or None)``, or None
where the record holds none.

    >>> few_shot_measure({"test_accuracy": 93.5, "test_ci95": 0.4}, "test_accuracy")
    (93.5, 0.4)
    >>> retrieval_measure({"concatenated": {"test": {"map_at_r": 0.25}}}, "map_at_r")
    (25.0, None)
"""

from __future__ import annotations

import numpy as np

FEW_SHOT_MEASURES = ("test_accuracy",)
RETRIEVAL_MEASURES = ("map_at_r", "r_precision", "precision_at_1")


def few_shot_measure(record: dict, measure: str) -> tuple[float, float | None] | None:
  """A few-shot run's test accuracy (%) and its 95% half-width over the test episodes, from its ``results.json``,
  an evaluate record or a Lake record (its head rule's); None where it holds none.
  """
  if measure not in FEW_SHOT_MEASURES:
    raise ValueError(f"a few-shot record holds {FEW_SHOT_MEASURES}, not {measure!r}")
  rule = record.get("rules", {}).get("head", {})
  value = record.get("test_accuracy", rule.get("accuracy"))
  if value is None:
    return None
  ci95 = record.get("test_ci95", rule.get("ci95"))
  return float(value), None if ci95 is None else float(ci95)


def retrieval_measure(record: dict, measure: str) -> tuple[float, None] | None:
  """A metric-learning run's test ``measure`` (%): its fold models' embeddings concatenated where it has several,
  else their mean (a re-test's record: the mean of its separated models); no interval. None where it holds none.
  """
  if measure not in RETRIEVAL_MEASURES:
    raise ValueError(f"a metric-learning record holds {RETRIEVAL_MEASURES}, not {measure!r}")
  tested = (record.get("concatenated") or {}).get("test") or record.get("separated_mean")
  if tested is None and record.get("separated"):
    found = [entry["test"].get(measure) for entry in record["separated"]]
    tested = {} if None in found else {measure: float(np.mean(found))}
  value = (tested or {}).get(measure)
  return None if value is None else (100.0 * float(value), None)
