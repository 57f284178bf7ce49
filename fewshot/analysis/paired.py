"""Paired comparisons of two arms whose runs share their seeds, and what a small design can say.

An S run and a DR run of the same seed share the initialisation and every episode, so the grid is paired by
construction: the test is on the per-seed differences B − A. With a handful of seeds every p here is exact:

* :func:`sign_flip_p`: the exact paired permutation test (every sign pattern of the differences; 5 pairs cannot
  go below 2/32 = 0.0625);
* :func:`holm`: Holm's step-down correction of the p-values within one claim;
* :func:`detectable_shift`: the smallest effect, in SDs of the differences, that the sign-flip test finds at a
  given power and level (what "not detected" could have seen, once multiplied by the differences' SD);
* :func:`verdict`: supported / partly supported / not detected / contradicted, from the corrected p-values.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from fewshot.analysis.stats import SIGNIFICANCE_LEVEL

VERDICTS = ("supported", "partly supported", "not detected", "contradicted")
_SIMULATED_PAIRS = 10  # detectable_shift simulates the exact test up to here (2^10 sign patterns per draw)
_EXACT_PAIRS = 40  # 2**20 signed sums a half at most: beyond, the exact count would not fit a page's time


def sign_flip_p(differences) -> float | None:
  """Two-sided exact p of the paired permutation (sign-flip) test of mean(differences) = 0; None for no pairs, or
  for more than :data:`_EXACT_PAIRS`.

  Every one of the 2^n sign patterns is equally likely under the null; the p is the share whose mean is at least
  as far from 0 as the observed one (ties counted in, as :func:`scipy.stats.permutation_test` does). The patterns
  are counted exactly, in two halves (each half's 2^(n/2) signed sums, the second sorted and searched), so 20 pairs
  cost milliseconds.

  >>> sign_flip_p([1.0, 2.0, 3.0, 4.0, 5.0])
  0.0625
  """
  d = np.asarray(differences, np.float64)
  d = d[np.isfinite(d)]
  if d.size == 0 or d.size > _EXACT_PAIRS:
    return None
  observed = abs(d.sum()) * (1 - 1e-12)  # a pattern as far out as the observed one, to rounding
  if observed <= 0:
    return 1.0
  left, right = _signed_sums(d[: d.size // 2]), np.sort(_signed_sums(d[d.size // 2 :]))
  # |l + r| >= observed: r >= observed - l, or r <= -observed - l (disjoint, since observed > 0).
  above = right.size - np.searchsorted(right, observed - left, side="left")
  below = np.searchsorted(right, -observed - left, side="right")
  return float((above.sum() + below.sum()) / 2.0 ** d.size)


def _signed_sums(d: np.ndarray) -> np.ndarray:
  """The 2^len(d) sums of ``d`` under every sign pattern."""
  sums = np.zeros(1)
  for x in d:
    sums = np.concatenate([sums + x, sums - x])
  return sums


def paired_interval(differences, confidence: float = 0.95) -> tuple[float, float | None]:
  """Mean of the differences and its Student-t half-width (None for fewer than two)."""
  import scipy.stats

  d = np.asarray(differences, np.float64)
  d = d[np.isfinite(d)]
  mean = float(d.mean()) if d.size else float("nan")
  if d.size < 2:
    return mean, None
  return mean, float(scipy.stats.t.ppf(0.5 + confidence / 2, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size))


def holm(ps: list[float | None]) -> list[float | None]:
  """Holm's step-down adjusted p-values (None stays None), in the order given.

  >>> holm([0.01, 0.04, 0.03])
  [0.03, 0.06, 0.06]
  """
  order = sorted((p, i) for i, p in enumerate(ps) if p is not None)
  adjusted: list[float | None] = [None] * len(ps)
  running = 0.0
  for rank, (p, i) in enumerate(order):
    running = max(running, min(1.0, (len(order) - rank) * p))
    adjusted[i] = round(running, 12)
  return adjusted


@functools.lru_cache(maxsize=None)  # a page asks for the same few designs many times
def detectable_shift(n: int, level: float = SIGNIFICANCE_LEVEL, power: float = 0.8, draws: int = 20_000,
                     seed: int = 0) -> float:
  """The smallest mean of normal per-seed differences, in their SDs, at which the two-sided exact sign-flip test on
  ``n`` pairs gives p < ``level`` with probability ``power``; inf where even a huge effect cannot (2/2^n ≥ level).

  Seeded Monte Carlo over ``draws`` samples, the same ones at every effect (so the power is monotone in it), and
  bisection to 0.001 SD: the power's own error, about 0.003 at 20,000 draws, moves the answer by about 0.004 SD
  (0.4% of it at 10 pairs), well under the two significant digits a page prints.

  >>> round(detectable_shift(10), 1)
  1.0
  """
  if 2.0 / 2**n >= level:
    return float("inf")
  if n > _SIMULATED_PAIRS:  # the permutation test is then as efficient as Student's t, whose power is exact
    return _t_detectable_shift(n, level, power)
  rng = np.random.default_rng(seed)
  noise = rng.normal(size=(draws, n)).astype(np.float32)
  signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)), np.float32)

  def found(shift: float) -> float:
    hits = 0
    for block in np.array_split(noise + np.float32(shift), max(1, draws * len(signs) // 2**22)):  # 16 MB blocks
      flipped = np.abs(block @ signs.T)
      p = np.mean(flipped >= flipped[:, :1], axis=1)  # signs[0] is all +1: the observed sum, computed alike
      hits += int(np.sum(p < level))
    return hits / draws

  low, high = 0.0, 1.0
  while found(high) < power:
    low, high = high, 2 * high
  while high - low > 1e-3:
    middle = (low + high) / 2
    low, high = (middle, high) if found(middle) < power else (low, middle)
  return high


def _t_detectable_shift(n: int, level: float, power: float) -> float:
  import scipy.optimize
  import scipy.stats

  critical = scipy.stats.t.ppf(1 - level / 2, n - 1)
  # The far tail's share is below 1e-10 at any shift that matters (scipy returns NaN for it at large ones).
  found = lambda shift: (scipy.stats.nct.sf(critical, n - 1, shift * np.sqrt(n))  # noqa: E731
                         + np.nan_to_num(scipy.stats.nct.cdf(-critical, n - 1, shift * np.sqrt(n))))
  return float(scipy.optimize.brentq(lambda shift: found(shift) - power, 0.0, 5.0, xtol=1e-6))


def verdict(differences: list[float], adjusted_ps: list[float | None], sign: int) -> str:
  """A claim's verdict over the settings it covers, from each setting's mean difference and corrected p:
  ``supported`` (every setting significant in the claimed direction), ``partly supported`` (some),
  ``contradicted`` (any significant the other way), else ``not detected`` (which says nothing of the effect's
  absence: print the design's power beside it).
  """
  significant = [p is not None and p < SIGNIFICANCE_LEVEL for p in adjusted_ps]
  agrees = [s and np.sign(d) == sign for s, d in zip(significant, differences)]
  if any(s and np.sign(d) == -sign for s, d in zip(significant, differences)):
    return "contradicted"
  if agrees and all(agrees):
    return "supported"
  return "partly supported" if any(agrees) else "not detected"


def paired_differences(a, b) -> np.ndarray:
  """B − A per seed, for arms in the same seed order (NaN where either is undefined)."""
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  if a.shape != b.shape:
    raise ValueError(f"paired arms need one value per seed each, got {a.size} and {b.size}; pair the same seeds.")
  return b - a

