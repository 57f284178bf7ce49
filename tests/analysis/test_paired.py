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


def test_five_pairs_cannot_reach_five_percent_and_six_can():
  assert paired.sign_flip_p([1.0, 2.0, 3.0, 4.0, 5.0]) == 2 / 32
  assert paired.sign_flip_p([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) == 2 / 64
  assert paired.power(5) == 0.0 and paired.power(10, draws=500) > 0.5


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


def test_five_seeds_against_five_see_one_sd_about_one_time_in_five():
  """The review's figure for the unpaired design: about 20% power at an effect of one standard deviation."""
  assert 0.12 < paired.power(5, 5, draws=1000) < 0.32


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
