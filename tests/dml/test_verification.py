"""Pair verification against brute force over every candidate threshold and pair counting."""

from __future__ import annotations

import numpy as np
import pytest

from fewshot.dml import verification


def random_pairs(seed, n=60, ties=True):
  rng = np.random.default_rng(seed)
  same = rng.random(n) < 0.4
  d = np.where(same, rng.normal(1.0, 0.5, n), rng.normal(1.8, 0.5, n))
  if ties:
    d = np.round(d, 1)  # many equal distances, some shared by same and different pairs
  return d, same


def accuracy(d, same, t):
  return np.mean((d <= t) == same)


@pytest.mark.parametrize("seed", range(6))
def test_best_threshold_against_every_candidate(seed):
  d, same = random_pairs(seed, ties=seed % 2 == 0)
  candidates = sorted(set(d.tolist()) | {-np.inf, np.inf})
  accs = [accuracy(d, same, t) for t in candidates]
  best = max(accs)
  want = candidates[accs.index(best)]  # the smallest candidate of highest accuracy
  got = verification.best_threshold(d, same.astype(int))
  assert got == want
  assert verification.verification_rates(d, same, got).accuracy == pytest.approx(best)


def test_best_threshold_edge_choices():
  assert verification.best_threshold([1.0, 2.0], [False, False]) == -np.inf  # reject everything
  assert verification.best_threshold([1.0, 2.0], [True, True]) == 2.0  # accept everything, finitely
  assert verification.best_threshold([0.5, 0.5, 0.9], [True, False, False]) == -np.inf  # the tie at 0.5 costs as much as it gains


@pytest.mark.parametrize("threshold", [-np.inf, 0.3, 1.0, 1.4, np.inf])
def test_rates_by_counting(threshold):
  d, same = random_pairs(7)
  got = verification.verification_rates(d, same, threshold)
  fa = sum(1 for di, s in zip(d, same) if not s and di <= threshold)
  fr = sum(1 for di, s in zip(d, same) if s and di > threshold)
  num_same = int(sum(same))
  assert got.false_accept_rate == pytest.approx(fa / (len(d) - num_same))
  assert got.false_reject_rate == pytest.approx(fr / num_same)
  assert got.accuracy == pytest.approx(1 - (fa + fr) / len(d))
  assert (got.num_same, got.num_different) == (num_same, len(d) - num_same)


def test_precision_recall_curve_against_loop():
  d, same = random_pairs(8)
  precision, recall, thresholds = verification.precision_recall_curve(d, same)
  np.testing.assert_array_equal(thresholds, np.unique(d))
  for p, r, t in zip(precision, recall, thresholds):
    accepted = d <= t
    assert p == pytest.approx(np.sum(accepted & same) / np.sum(accepted))
    assert r == pytest.approx(np.sum(accepted & same) / np.sum(same))
  assert recall[-1] == 1.0 and np.all(np.diff(recall) >= 0)


def test_bad_inputs_raise_one_line_errors():
  d, same = random_pairs(9)
  cases = [
      (lambda: verification.best_threshold(d, same[:-1]), "one entry per pair"),
      (lambda: verification.best_threshold(np.where(np.arange(len(d)) == 3, np.nan, d), same), "distance 3 is NaN"),
      (lambda: verification.verification_rates(d, np.ones_like(same), 1.0), "0 different pairs"),
      (lambda: verification.verification_rates(d, np.zeros_like(same), 1.0), "0 same"),
      (lambda: verification.verification_rates(d, same, np.nan), "threshold is NaN"),
      (lambda: verification.precision_recall_curve(d, np.zeros_like(same)), "at least one same pair"),
      (lambda: verification.best_threshold(d, np.full(len(d), 2)), "0/1"),
      (lambda: verification.best_threshold([], []), "no pairs"),
  ]
  for fn, fragment in cases:
    with pytest.raises(ValueError) as excinfo:
      fn()
    assert "\n" not in str(excinfo.value) and fragment in str(excinfo.value), str(excinfo.value)
