"""Paired comparisons (issue 32): exact sign-flip p against scipy's permutation test, Holm by its definition, the
power of small designs, and the verdicts' vocabulary.
"""

import numpy as np
import pytest
import scipy.stats

from fewshot.analysis import paired


@pytest.mark.parametrize("seed, n", [(0, 5), (1, 7), (2, 10)])
def test_the_sign_flip_p_is_scipys_exact_paired_permutation_test(seed, n):
  rng = np.random.default_rng(seed)
  a, b = rng.normal(size=n), rng.normal(0.8, 1.0, size=n)
  expected = scipy.stats.permutation_test((a, b), lambda x, y: np.mean(y - x), permutation_type="samples",
                                          n_resamples=np.inf, alternative="two-sided").pvalue
  assert paired.sign_flip_p(paired.paired_differences(a, b)) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("seed, n", [(3, 17), (4, 20)])
def test_the_sign_flip_p_of_many_pairs_counts_every_pattern(seed, n):
  """Beyond scipy's reach in a test's time: every one of the 2^n sign patterns, by brute force."""
  d = np.random.default_rng(seed).normal(0.4, 1.0, size=n)
  patterns = np.array(np.meshgrid(*[[1.0, -1.0]] * n)).reshape(n, -1)  # [n, 2^n]
  expected = np.mean(np.abs(d @ patterns) >= abs(d.sum()) * (1 - 1e-12))
  assert paired.sign_flip_p(d) == expected and 0 < expected < 1
  assert paired.sign_flip_p(np.ones(20)) == 2 / 2**20 and paired.sign_flip_p(np.zeros(3)) == 1.0


def test_five_pairs_cannot_reach_five_percent_and_six_can():
  assert paired.sign_flip_p([1.0, 2.0, 3.0, 4.0, 5.0]) == 2 / 32
  assert paired.sign_flip_p([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) == 2 / 64


@pytest.mark.parametrize("n, level", [(8, 0.05), pytest.param(10, 0.025, marks=pytest.mark.slow)])  # the page's: 5 s
def test_the_detectable_shift_is_where_the_sign_flip_test_finds_the_effect_four_times_in_five(n, level):
  """The test by its definition (every sign pattern; sign_flip_p is scipy's, above) on fresh draws."""
  shift = paired.detectable_shift(n, level)
  draws = 20_000
  samples = np.random.default_rng(123).normal(shift, 1.0, size=(draws, n))
  patterns = np.array(np.meshgrid(*[[1.0, -1.0]] * n)).reshape(n, -1)  # [n, 2^n]
  p = np.mean(np.abs(samples @ patterns) >= np.abs(samples.sum(1, keepdims=True)) - 1e-9, axis=1)
  assert abs(np.mean(p < level) - 0.8) < 4 * np.sqrt(0.8 * 0.2 / draws)  # within 4 standard errors of 80%
  assert paired.detectable_shift(5) == np.inf  # 2/32 ≥ 0.05: no effect is ever found


def test_beyond_the_simulated_pairs_the_detectable_shift_is_students_t_power():
  n, level = 20, 0.025
  shift = paired.detectable_shift(n, level)
  samples = np.random.default_rng(5).normal(shift, 1.0, size=(200_000, n))
  t = samples.mean(1) / (samples.std(1, ddof=1) / np.sqrt(n))
  assert np.mean(np.abs(t) > scipy.stats.t.ppf(1 - level / 2, n - 1)) == pytest.approx(0.8, abs=0.004)


def test_holm_is_its_definition():
  ps = [0.01, 0.04, 0.03, None, 0.2]
  order = np.argsort([p for p in ps if p is not None])
  finite = [p for p in ps if p is not None]
  m, expected, running = len(finite), [0.0] * len(finite), 0.0
  for rank, i in enumerate(order):
    running = max(running, min(1.0, (m - rank) * finite[i]))
    expected[i] = running
  adjusted = paired.holm(ps)
  assert adjusted[3] is None and [a for a in adjusted if a is not None] == pytest.approx(expected)


@pytest.mark.parametrize("differences, ps, expected", [
    ([1.0, 2.0], [0.01, 0.02], "supported"),
    ([1.0, 2.0], [0.01, 0.3], "partly supported"),
    ([1.0, 2.0], [0.2, 0.3], "not detected"),
    ([1.0, -2.0], [0.01, 0.02], "contradicted"),
    ([1.0], [None], "not detected"),
])
def test_verdicts(differences, ps, expected):
  assert paired.verdict(differences, ps, +1) == expected and expected in paired.VERDICTS


def test_arms_of_different_lengths_are_not_paired():
  with pytest.raises(ValueError, match="pair the same seeds"):
    paired.paired_differences([1.0, 2.0], [1.0])
