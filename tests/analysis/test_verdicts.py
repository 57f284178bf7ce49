"""The reproduction verdicts (issue 53) against scipy's one-sample t tests, two one-sided tests and by-hand intervals."""

import math

import numpy as np
import pytest
import scipy.stats

from fewshot.analysis import verdicts


def _by_scipy(values, published, margin):
  """The words from scipy's own tests: TOST at 5% each side for equivalence, the two-sided t test for a difference."""
  x = np.asarray(values, np.float64)
  differs = scipy.stats.ttest_1samp(x, published).pvalue < 0.05
  equivalent = (scipy.stats.ttest_1samp(x, published - margin, alternative="greater").pvalue < 0.05 and
                scipy.stats.ttest_1samp(x, published + margin, alternative="less").pvalue < 0.05)
  d = x.mean() - published
  if differs:
    return f"{'above' if d > 0 else 'below'} by {abs(d):.2f}" + (f", equivalent within ±{margin:g}" if equivalent else "")
  return f"equivalent within ±{margin:g}" if equivalent else f"inconclusive at {x.size} seeds"


@pytest.mark.parametrize("seed", range(60))
def test_the_words_and_intervals_are_scipy_s_t_tests_on_synthetic_seeds(seed):
  rng = np.random.default_rng(seed)
  n = int(rng.integers(2, 11))
  values = rng.normal(95.0, rng.uniform(0.05, 1.0), n)
  published, margin = float(95.0 + rng.normal(0, 0.8)), float(rng.choice([0.5, 1.0]))
  got = verdicts.verdict(values, published, margin=margin)
  assert got.words == _by_scipy(values, published, margin)
  test = scipy.stats.ttest_1samp(values, published)
  for confidence, interval in ((0.95, got.interval95), (0.90, got.interval90)):
    low, high = test.confidence_interval(confidence)
    assert interval == pytest.approx((low - published, high - published))
  assert got.mean == pytest.approx(values.mean()) and got.difference == pytest.approx(values.mean() - published)


def test_the_seeds_spread_is_floored_at_the_test_episodes_standard_error():
  # Three seeds that agree to the digit: without the floor the interval would be a point and any gap "below".
  got = verdicts.verdict([98.2, 98.2, 98.2], 98.3, margin=0.5, errors=[0.1, 0.12, 0.08])
  floor = math.sqrt((0.1 ** 2 + 0.12 ** 2 + 0.08 ** 2) / 3)
  half = scipy.stats.t.ppf(0.975, 2) * floor / math.sqrt(3)
  assert got.interval95 == pytest.approx((-0.1 - half, -0.1 + half)) and got.words == "equivalent within ±0.5"
  assert verdicts.verdict([98.2, 98.2, 98.2], 98.3, margin=0.5).words == "below by 0.10, equivalent within ±0.5"  # unfloored: a point
  wide = [97.0, 98.0, 99.0]  # a spread above the floor is left as it is
  assert verdicts.verdict(wide, 98.0, margin=1, errors=[0.1] * 3).interval95 == pytest.approx(
      verdicts.verdict(wide, 98.0, margin=1).interval95)


def test_a_published_interval_adds_its_standard_error_in_quadrature():
  values = [49.0, 50.1, 49.6, 48.8]
  got = verdicts.verdict(values, 49.42, margin=1.5, published_ci95=0.78)
  error = math.sqrt(np.var(values, ddof=1) / 4 + (0.78 / scipy.stats.norm.ppf(0.975)) ** 2)
  half = scipy.stats.t.ppf(0.975, 3) * error
  assert got.interval95 == pytest.approx((np.mean(values) - 49.42 - half, np.mean(values) - 49.42 + half))


def test_equivalence_is_claimed_at_most_five_percent_of_the_time_when_the_gap_is_the_margin():
  rng = np.random.default_rng(0)
  claimed = [verdicts.verdict(rng.normal(99.0 - 0.5, 0.3, 5), 99.0, margin=0.5).words.endswith("within ±0.5")
             for _ in range(4000)]
  assert np.mean(claimed) <= 0.05 + 0.01  # TOST's size, up to simulation error


def test_another_schedule_never_gets_an_agreement_word():
  tight = [98.79, 98.80, 98.81]
  assert verdicts.verdict(tight, 98.8, margin=0.5).words == "equivalent within ±0.5"  # unlike None: the paper's
  assert verdicts.verdict(tight, 98.8, margin=0.5, unlike=verdicts.UNLIKE).words == (
      "not the published schedule: inconclusive at 3 seeds")
  assert verdicts.verdict([97.0, 97.1, 97.2], 98.8, margin=0.5, unlike=verdicts.UNLIKE).words == (
      "not the published schedule: below by 1.70")
  other = "not the published protocol (5-way training)"  # the verdict itself names how the runs differ
  assert verdicts.verdict([97.0, 97.1, 97.2], 98.8, margin=0.5, unlike=other).words == f"{other}: below by 1.70"
  pooled = verdicts.pooled([verdicts.verdict(v, 98.8, margin=0.5, unlike=other) for v in (
      [97.0, 97.1, 97.2], [96.9, 97.0, 97.3])], 0.5, unlike=other)
  assert pooled.words.startswith(f"{other}: below by ")


def test_the_smallest_margin_is_the_ninety_percent_half_width_at_no_difference():
  values = [95.0, 95.6, 95.3]
  got = verdicts.verdict(values, 96.0, margin=1.0)
  assert got.smallest_margin == pytest.approx(scipy.stats.t.ppf(0.95, 2) * np.std(values, ddof=1) / math.sqrt(3))
  at_it = verdicts.verdict(np.array(values) + 0.7, 96.0, margin=got.smallest_margin * 1.0001)
  assert at_it.words == f"equivalent within ±{got.smallest_margin * 1.0001:g}"  # ours centred on theirs: just in


def test_the_pool_is_the_inverse_variance_mean_of_the_arms():
  arms = [verdicts.verdict(v, p, margin=m) for v, p, m in (([98.1, 98.4, 98.2], 98.8, 0.5),
                                                            ([95.0, 95.9, 95.2], 96.0, 1.0),
                                                            ([99.1, 99.3, 99.0], 99.7, 0.5))]
  errors = np.array([np.std(v, ddof=1) / math.sqrt(3) for v in ([98.1, 98.4, 98.2], [95.0, 95.9, 95.2],
                                                                 [99.1, 99.3, 99.0])])
  differences = np.array([a.difference for a in arms])
  w = 1 / errors ** 2
  mean, error = (w * differences).sum() / w.sum(), 1 / math.sqrt(w.sum())
  got = verdicts.pooled(arms, 0.5)
  half = scipy.stats.t.ppf(0.975, 6) * error
  assert got.difference == pytest.approx(mean) and got.interval95 == pytest.approx((mean - half, mean + half))
  assert got.words == f"below by {abs(mean):.2f}" and verdicts.pooled(arms[:1], 0.5) is None


def test_too_little_to_judge_says_so():
  assert verdicts.verdict([], 96.0, margin=1).words == "no seeds yet"
  assert verdicts.verdict([95.0], 96.0, margin=1).words == "inconclusive at 1 seed: no interval"
  assert verdicts.verdict([95.0, 95.1], None, margin=1).words == "no published number"
  assert verdicts.verdict([95.0, 95.1], 96.0, margin=1, not_comparable="an ImageNet trunk").words == (
      "not comparable: an ImageNet trunk")
  assert verdicts.verdict([95.0, 95.0], 96.0, margin=None).words == "below by 1.00"  # no spread, no floor: a point


def test_a_schedule_is_the_paper_s_only_where_it_says_so():
  """A registered schedule that names no ``unlike`` is not the published one (its verdicts start with the default
  words); only ``unlike=None`` marks the paper's own, which the registry's schedules do where they are named
  "published" (or Lake's "own": each model's own length) and nowhere else.
  """
  from fewshot import published  # noqa: PLC0415
  from fewshot.published.registry import Schedule  # noqa: PLC0415

  assert Schedule("mine", {}, "mine").unlike == verdicts.UNLIKE and not Schedule("mine", {}, "mine").published
  for entry in published.ENTRIES.values():
    for schedule in entry.schedules:
      assert schedule.published == (schedule.name in ("published", "own")), (entry.name, schedule.name)
