"""Statistics of runs against scipy.stats and numpy on fixed samples, and the paper's decision rules."""

import itertools
import math

import numpy as np
import pytest
import scipy.stats

from fewshot.analysis import stats

# Fixed per-checkpoint samples of two runs (values around 1, as the alpha ratios are).
A = np.array([0.91, 1.07, 0.85, 0.99, 1.12, 0.78, 0.95, 1.03, 0.88, 0.97, 0.93, 1.01])
B = np.array([1.05, 1.21, 0.98, 1.15, 1.09, 1.30, 0.94, 1.11, 1.02, 1.26])


# ----------------------------------------------------------------------------- building blocks


def test_mean_confidence_interval_matches_numpy():
  values = np.random.default_rng(0).normal(0.6, 0.1, size=600)
  mean, half_width = stats.mean_confidence_interval(values)
  assert mean == pytest.approx(np.mean(values), rel=1e-12)
  assert half_width == pytest.approx(1.96 * np.std(values, ddof=0) / np.sqrt(values.size), rel=1e-12)
  with pytest.raises(ValueError):
    stats.mean_confidence_interval([])


def test_geometric_mean_matches_scipy_and_skips_non_finite():
  values = np.random.default_rng(1).lognormal(0.0, 0.5, size=50)
  assert stats.geometric_mean(values) == pytest.approx(scipy.stats.gmean(values), rel=1e-12)
  dirty = np.concatenate([values, [np.nan, np.inf, -np.inf]])
  assert stats.geometric_mean(dirty) == pytest.approx(scipy.stats.gmean(values), rel=1e-12)
  finite, n_undefined = stats.split_finite(dirty)
  np.testing.assert_array_equal(finite, values)
  assert n_undefined == 3


def test_geometric_mean_edge_cases():
  assert math.isnan(stats.geometric_mean([]))
  assert math.isnan(stats.geometric_mean([np.nan, np.inf]))
  assert math.isnan(stats.geometric_mean([1.0, -2.0]))  # undefined, not a complex number
  assert stats.geometric_mean([0.0, 4.0]) == 0.0


def test_proportions_follow_the_properly_learned_rules():
  values = [0.5, 0.9, 1.0, 1.5, np.nan]
  assert stats.proportion_below_one(values) == pytest.approx(2 / 4)
  assert stats.proportion(values, ">1") == pytest.approx(1 / 4)
  assert stats.proportion_properly_learned(values, "con_alpha") == pytest.approx(2 / 4)
  assert stats.proportion_properly_learned(values, "con_div") == pytest.approx(2 / 4)
  assert stats.proportion_properly_learned(values, "div_alpha") == pytest.approx(1 / 4)
  assert stats.proportion_properly_learned(values, "norm_ratio") is None
  assert stats.MEASURES == ("norm_ratio", "con_alpha", "div_alpha", "con_div")
  with pytest.raises(ValueError, match="relation"):
    stats.proportion(values, "<=1")
  with pytest.raises(ValueError, match="measure"):
    stats.proportion_properly_learned(values, "alpha")


# ----------------------------------------------------------------------------- comparing two runs


@pytest.mark.parametrize("measure", ["con_alpha", "div_alpha", "con_div"])
def test_compare_runs_matches_scipy(measure):
  result = stats.compare_runs(A, B, measure)
  u_p = scipy.stats.mannwhitneyu(A, B, alternative="two-sided", method="asymptotic", use_continuity=True).pvalue
  table = [[np.sum(A < 1), np.sum(B < 1)], [np.sum(A >= 1), np.sum(B >= 1)]]
  fisher_p = scipy.stats.fisher_exact(table, alternative="two-sided").pvalue
  assert result.mannwhitney_p == pytest.approx(u_p, rel=1e-12)
  assert result.fisher_p == pytest.approx(fisher_p, rel=1e-12)
  assert result.mannwhitney_significant == (u_p < 0.05)
  assert result.fisher_significant == (fisher_p < 0.05)
  assert (result.n_a, result.n_b, result.n_undefined_a, result.n_undefined_b) == (12, 10, 0, 0)
  assert result.geometric_mean_a == pytest.approx(scipy.stats.gmean(A))
  assert result.geometric_mean_b == pytest.approx(scipy.stats.gmean(B))
  above = measure == "div_alpha"
  assert result.proportion_a == pytest.approx(np.mean(A > 1) if above else np.mean(A < 1))
  assert result.proportion_b == pytest.approx(np.mean(B > 1) if above else np.mean(B < 1))
  assert result.properly == stats.PROPERLY_LEARNED[measure] and result.note == ""


def test_compare_runs_norm_ratio_has_no_proportions():
  result = stats.compare_runs(A, B, "norm_ratio")
  assert result.proportion_a is None and result.proportion_b is None and result.properly is None
  assert result.fisher_p is None and result.fisher_significant is None
  assert result.mannwhitney_p is not None
  assert set(result.as_dict()) >= {"n_a", "mannwhitney_p", "fisher_p", "note"}


def test_non_finite_values_are_excluded_and_counted():
  dirty_a = np.concatenate([A, [np.nan, np.nan]])
  dirty_b = np.concatenate([B, [np.inf]])
  result, clean = stats.compare_runs(dirty_a, dirty_b, "norm_ratio"), stats.compare_runs(A, B, "norm_ratio")
  assert (result.n_a, result.n_b, result.n_undefined_a, result.n_undefined_b) == (12, 10, 2, 1)
  assert result.mannwhitney_p == clean.mannwhitney_p
  assert result.geometric_mean_a == clean.geometric_mean_a


def test_clearly_larger_run_is_significant():
  rng = np.random.default_rng(2)
  a = rng.lognormal(0.0, 0.2, size=30)
  b = 1.5 * rng.lognormal(0.0, 0.2, size=30)
  result = stats.compare_runs(a, b, "div_alpha")
  assert result.mannwhitney_p < 0.05 and result.mannwhitney_significant
  assert result.proportion_b > result.proportion_a


def test_identical_runs_are_not_significant():
  a = np.random.default_rng(3).lognormal(0.0, 0.2, size=30)
  result = stats.compare_runs(a, a.copy(), "con_alpha")
  assert result.mannwhitney_p > 0.9 and result.fisher_p > 0.9
  assert not result.mannwhitney_significant and not result.fisher_significant


@pytest.mark.parametrize("a,b,reason", [
    ([0.9], B, "too few"),
    (A, [np.nan, np.nan, 1.1], "too few"),
    ([], [], "no finite values"),
])
def test_too_few_values_give_none_and_a_note(a, b, reason):
  result = stats.compare_runs(a, b, "con_alpha")
  assert result.mannwhitney_p is None and result.fisher_p is None
  assert result.mannwhitney_significant is None and result.fisher_significant is None
  assert reason in result.note
  for value in result.as_dict().values():
    assert not (isinstance(value, float) and math.isnan(value))


def test_all_values_equal_leaves_mann_whitney_undefined():
  result = stats.compare_runs([1.0, 1.0, 1.0], [1.0, 1.0], "con_div")
  assert result.mannwhitney_p is None and "equal" in result.note
  assert result.fisher_p == pytest.approx(1.0)  # no value below 1 in either run: no evidence


def test_unknown_measure_raises():
  with pytest.raises(ValueError, match="measure"):
    stats.compare_runs(A, B, "alpha")


def test_mann_whitney_is_exact_for_a_few_seeds_and_asymptotic_for_the_paper_s_checkpoint_tables():
  # 3 seeds against 3, fully separated: of the C(6, 3) = 20 equally likely rank splits, 2 are as extreme (two-sided).
  a, b = [90.0, 91.0, 92.0], [93.0, 94.0, 95.0]
  assert stats.mann_whitney(a, b, method="auto")[0] == pytest.approx(2 / 20, abs=1e-15)
  assert stats.mann_whitney(a, b)[0] == pytest.approx(0.0809, abs=1e-4)  # the normal approximation
  for method in ("exact", "asymptotic"):
    expected = scipy.stats.mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue
    assert stats.mann_whitney(a, b, method=method)[0] == pytest.approx(expected, rel=1e-12)
  # Up to 20 values in all, exact (conditional on ties where values tie); more, the approximation, as the paper's
  # tables of hundreds of checkpoints use.
  assert stats.mann_whitney_method(3, 3, tied=True) == "permutation"
  assert stats.mann_whitney_method(10, 10, tied=False) == "exact"
  assert stats.mann_whitney_method(10, 11, tied=False) == "asymptotic"
  assert stats.mann_whitney_method(8, 200, tied=False) == "asymptotic"


def test_tied_seeds_get_the_exact_permutation_distribution_not_the_normal_approximation():
  """5 against 5 with ties: every one of the C(10, 5) = 252 splits counted (the review saw p = 0.0065 printed, below
  the 2 / 252 = 0.0079 that any 5-vs-5 test can give).
  """
  a, b = [100.0, 100.0, 100.0, 200.0, 200.0], [100.0, 100.0, 100.0, 100.0, 100.0]
  u = lambda x, y: scipy.stats.mannwhitneyu(x, y, method="asymptotic").statistic  # noqa: E731
  observed, pooled = u(a, b), np.array(a + b)
  splits = [u(pooled[list(i)], np.delete(pooled, list(i))) for i in itertools.combinations(range(10), 5)]
  mean = np.mean(splits)
  one_sided = min(np.mean([s >= observed for s in splits]), np.mean([s <= observed for s in splits]))
  assert stats.mann_whitney(a, b, method="auto")[0] == pytest.approx(min(1.0, 2 * one_sided))
  assert stats.mann_whitney(a, b, method="auto")[0] >= 2 / 252 and abs(observed - mean) > 0


def test_tied_exact_p_is_scipys_permutation_test_over_every_split():
  rng = np.random.default_rng(3)
  a, b = rng.integers(0, 4, 6).astype(float), rng.integers(1, 5, 7).astype(float)
  u = lambda x, y, axis: scipy.stats.mannwhitneyu(x, y, axis=axis, method="asymptotic").statistic  # noqa: E731
  expected = scipy.stats.permutation_test((a, b), u, permutation_type="independent", n_resamples=np.inf,
                                          alternative="two-sided", vectorized=True).pvalue
  assert stats.mann_whitney(a, b, method="auto")[0] == pytest.approx(min(1.0, expected), rel=1e-9)
