r"""Pair verification: is a pair the same class? Decided by a threshold on its distance.

One of the measures of an embedding beside the retrieval metrics (docs/protocol.md#other-measures-of-an-embedding).

A pair is accepted as "same" iff its distance is at most the threshold. The threshold is
chosen on validation pairs (:func:`best_threshold`) and then applied to test pairs
(:func:`verification_rates`). Pure numpy on the host, by sorting and cumulative sums.
"""

from __future__ import annotations

import dataclasses

import numpy as np


def _check_pairs(distances, is_same) -> tuple[np.ndarray, np.ndarray]:
  d, same = np.asarray(distances, np.float64), np.asarray(is_same)
  if d.ndim != 1 or same.ndim != 1 or len(d) != len(same):
    raise ValueError(f"distances and is_same must be 1-D with one entry per pair, got shapes {d.shape} and {same.shape}")
  if len(d) == 0:
    raise ValueError("no pairs given; pass at least one distance")
  if np.isnan(d).any():
    raise ValueError(f"distance {int(np.argmax(np.isnan(d)))} is NaN ({int(np.isnan(d).sum())} in all); drop those pairs")
  if same.dtype != bool:
    if not np.isin(same, (0, 1)).all():
      raise ValueError(f"is_same must be booleans or 0/1, got values {np.unique(same)[:5].tolist()}")
    same = same.astype(bool)
  return d, same


def _accepted_counts(d: np.ndarray, same: np.ndarray):
  """Distinct distances ``u`` ascending, and how many same / different pairs have distance <= each."""
  order = np.argsort(d, kind="stable")
  d, same = d[order], same[order]
  last = np.r_[d[1:] != d[:-1], True]  # the last pair of each run of equal distances
  same_accepted = np.cumsum(same)[last]
  diff_accepted = np.cumsum(~same)[last]
  return d[last], same_accepted, diff_accepted


def best_threshold(distances, is_same) -> float:
  r"""The distance threshold of highest accuracy on these (validation) pairs.

  Accuracy at threshold :math:`t` is :math:`\frac{1}{n}\big(\#\{\text{same}, d \le t\} + \#\{\text{different}, d > t\}\big)`.
  Candidates are :math:`-\infty` (accept nothing), every observed distance, and
  :math:`+\infty` (accept everything); only the observed values matter, since accuracy changes
  only where :math:`t` crosses one. Ties in accuracy go to the smallest candidate, the
  strictest threshold (fewest false accepts): :math:`+\infty` ties with the largest observed
  distance and is never returned; :math:`-\infty` is, where rejecting every pair is as
  accurate as any observed threshold. By sort and cumulative sums, :math:`O(n \log n)`.
  """
  d, same = _check_pairs(distances, is_same)
  values, same_accepted, diff_accepted = _accepted_counts(d, same)
  num_diff = int((~same).sum())
  correct = np.r_[num_diff, same_accepted + (num_diff - diff_accepted)]  # candidate -inf first, then ascending
  best = int(np.argmax(correct))  # the first maximum: the smallest threshold
  return -np.inf if best == 0 else float(values[best - 1])


@dataclasses.dataclass(frozen=True)
class VerificationRates:
  accuracy: float
  false_accept_rate: float  # different pairs accepted / different pairs
  false_reject_rate: float  # same pairs rejected / same pairs
  num_same: int
  num_different: int


def verification_rates(distances, is_same, threshold: float) -> VerificationRates:
  """Accuracy, false accept rate and false reject rate of "same iff distance <= threshold"."""
  d, same = _check_pairs(distances, is_same)
  if np.isnan(threshold):
    raise ValueError("threshold is NaN; choose one with best_threshold on validation pairs")
  num_same, num_diff = int(same.sum()), int((~same).sum())
  if num_same == 0 or num_diff == 0:
    raise ValueError(f"the rates need both kinds of pair, got {num_same} same and {num_diff} different pairs")
  accepted = d <= threshold
  false_accepts, false_rejects = int((accepted & ~same).sum()), int((~accepted & same).sum())
  return VerificationRates(accuracy=1.0 - (false_accepts + false_rejects) / len(d),
                           false_accept_rate=false_accepts / num_diff, false_reject_rate=false_rejects / num_same,
                           num_same=num_same, num_different=num_diff)


def precision_recall_curve(distances, is_same) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  r"""``(precision, recall, thresholds)``: one point per distinct distance, thresholds ascending.

  At threshold :math:`t` (accept :math:`d \le t`): precision = same pairs accepted / pairs
  accepted, recall = same pairs accepted / same pairs. Every threshold accepts at least one
  pair, so precision is always defined; recall rises to 1 at the largest distance. No extra
  end point is appended (sklearn adds precision 1 at recall 0).
  """
  d, same = _check_pairs(distances, is_same)
  num_same = int(same.sum())
  if num_same == 0:
    raise ValueError("recall needs at least one same pair, got none")
  values, same_accepted, diff_accepted = _accepted_counts(d, same)
  return same_accepted / (same_accepted + diff_accepted), same_accepted / num_same, values
