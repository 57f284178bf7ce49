"""The reproduction verdicts (issue 37) against an independent computation of the prediction interval."""

import math

import numpy as np
import pytest
import scipy.stats

from fewshot.analysis import verdicts


def _by_hand(values, published, level=0.05):
  """The verdict from the prediction interval itself: does the published value fall inside mean ± t·s·sqrt(1+1/n)?"""
  x = np.asarray(values, np.float64)
  n = x.size
  t = scipy.stats.t.ppf(1 - level / 2, n - 1)
  half = t * x.std(ddof=1) * math.sqrt(1 + 1 / n)
  if abs(published - x.mean()) <= half:
    return "matches"
  return f"{'above' if x.mean() > published else 'below'} by {abs(x.mean() - published):.1f} points"


@pytest.mark.parametrize("seed", range(40))
def test_the_verdict_is_the_prediction_intervals_on_synthetic_seeds(seed):
  rng = np.random.default_rng(seed)
  n = int(rng.integers(2, 11))
  values = rng.normal(95.0, rng.uniform(0.05, 1.0), n)
  published = float(95.0 + rng.normal(0, 1.5))
  got = verdicts.verdict(values, published)
  assert got.words == _by_hand(values, published)
  mean, half = values.mean(), scipy.stats.t.ppf(0.975, n - 1) * values.std(ddof=1) / math.sqrt(n)
  assert got.mean == pytest.approx(mean) and got.ci95 == pytest.approx(half)
  # p against a simulation of the null: the published value one more draw of the same normal
  t = (published - values.mean()) / (values.std(ddof=1) * math.sqrt(1 + 1 / n))
  assert got.p == pytest.approx(2 * (1 - scipy.stats.t.cdf(abs(t), n - 1)))


def test_the_p_is_the_chance_a_new_seed_falls_that_far_out_by_simulation():
  rng = np.random.default_rng(0)
  n, trials = 4, 20000
  draws = rng.normal(0.0, 1.0, (trials, n + 1))
  ps = np.array([verdicts.prediction_p(d[:n], d[n]) for d in draws])
  assert np.mean(ps < 0.05) == pytest.approx(0.05, abs=0.006)  # a valid test: 5% false alarms under its null


def test_the_fixed_words_for_what_cannot_be_tested():
  assert verdicts.verdict([], 96.0).words == "no seeds yet"
  assert verdicts.verdict([95.0], 96.0).words == "one seed: no interval"
  assert verdicts.verdict([95.0, 95.1], None).words == "no published number"
  assert verdicts.verdict([95.0, 95.1], 96.0, not_comparable="an ImageNet trunk").words == (
      "not comparable: an ImageNet trunk")
  assert verdicts.verdict([95.0, 95.0], 95.0).words == "matches"  # no spread: equal or not
  assert verdicts.verdict([95.0, 95.0], 96.0).words == "below by 1.0 points"
  assert verdicts.verdict([95.0, 95.0, 95.1], 99.0, shorter=True).words == "below by 4.0 points (shorter schedule)"
  assert verdicts.verdict([98.7, 98.9, 98.8], 98.8, shorter=True).words == "matches (shorter schedule)"
