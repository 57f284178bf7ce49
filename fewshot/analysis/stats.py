"""Statistics of accuracies and of training diagnostics (pure functions of arrays)."""

from __future__ import annotations

import dataclasses

import numpy as np

from fewshot.analysis.measures import MEASURES, PROPERLY_LEARNED


def mean_confidence_interval(values, z: float = 1.96) -> tuple[float, float]:
  r"""Mean and the half-width :math:`z \sigma / \sqrt{n}` of its normal-approximation interval.

  :math:`\sigma` is the population standard deviation (``ddof=0``), as in the few-shot
  literature's 600-episode protocol (Chen et al., 2019).
  """
  values = np.asarray(values, dtype=np.float64)
  if values.ndim != 1 or values.size == 0:
    raise ValueError(f"need a non-empty 1-D array of values, got shape {values.shape}.")
  return float(values.mean()), float(z * values.std() / np.sqrt(values.size))


# ----------------------------------------------------------------------------- comparing two runs
# Per-checkpoint training diagnostics of two runs (the DR paper's Tables 3-10), named in fewshot.analysis.measures.

SIGNIFICANCE_LEVEL = 0.05
# Fewest finite values a run needs before the tests are run: one value is no distribution.
MIN_VALUES = 2


def split_finite(values) -> tuple[np.ndarray, int]:
  """The finite values of a 1-D sequence as float64, and how many non-finite ones were left out.

  Non-finite values are undefined diagnostics (e.g. a norm ratio of a checkpoint whose
  embedding did not move); they are excluded from every statistic and counted.
  """
  values = np.asarray(values, dtype=np.float64)
  if values.ndim != 1:
    raise ValueError(f"need a 1-D array of values, got shape {values.shape}.")
  finite = np.isfinite(values)
  return values[finite], int(values.size - finite.sum())


def geometric_mean(values) -> float:
  r"""Geometric mean :math:`\exp(\tfrac1n \sum_i \log x_i)` of the finite values.

  NaN when no value is finite, or when one is negative (the geometric mean is undefined); a
  zero gives 0.
  """
  finite, _ = split_finite(values)
  if finite.size == 0 or np.any(finite < 0):
    return float("nan")
  with np.errstate(divide="ignore"):  # log(0) = -inf, and exp(-inf) = 0 is the right answer
    return float(np.exp(np.mean(np.log(finite))))


def _below_above(values: np.ndarray, relation: str) -> np.ndarray:
  if relation == "<1":
    return values < 1.0
  if relation == ">1":
    return values > 1.0
  raise ValueError(f"Unknown relation {relation!r}; choose '<1' or '>1'.")


def proportion(values, relation: str) -> float:
  """Fraction of the finite values with ``relation`` (``"<1"`` or ``">1"``) to 1; NaN if none."""
  finite, _ = split_finite(values)
  hits = _below_above(finite, relation)
  return float(hits.mean()) if finite.size else float("nan")


def proportion_below_one(values) -> float:
  """Fraction of the finite values below 1; NaN if none."""
  return proportion(values, "<1")


def proportion_properly_learned(values, measure: str) -> float | None:
  """Fraction of "properly learned" checkpoints (:data:`PROPERLY_LEARNED`); None for the norm ratio."""
  _check_measure(measure)
  relation = PROPERLY_LEARNED.get(measure)
  return None if relation is None else proportion(values, relation)


def fisher_critical_difference(successes_a: int, n_a: int, n_b: int, sign: int = +1,
                               level: float = SIGNIFICANCE_LEVEL) -> float | None:
  """The smallest difference of proportions B − A, in the direction ``sign``, at which Fisher's exact two-sided test
  of ``[[a, n_a − a], [b, n_b − b]]`` gives p < ``level`` with A's count held at ``successes_a``: where a design
  that pools ``n_a`` and ``n_b`` observations starts to call a difference significant. None where no count of B does.

  >>> fisher_critical_difference(20, 40, 40)  # 20/40 against 30/40 is p = 0.037; 29/40 is p = 0.065
  0.25
  """
  import scipy.stats

  counts = range(successes_a * n_b // n_a, n_b + 1) if sign > 0 else range(successes_a * n_b // n_a, -1, -1)
  for b in counts:
    table = [[successes_a, n_a - successes_a], [b, n_b - b]]
    if scipy.stats.fisher_exact(table, alternative="two-sided").pvalue < level:
      return abs(b / n_b - successes_a / n_a)
  return None


def _check_measure(measure: str) -> None:
  if measure not in MEASURES:
    raise ValueError(f"Unknown measure {measure!r}; choose one of {', '.join(MEASURES)}.")


@dataclasses.dataclass(frozen=True)
class Comparison:
  """One measure of two runs A and B. Every float is finite or None, never NaN.

  ``n_a``/``n_b`` count the finite values used; ``n_undefined_a``/``n_undefined_b`` the
  non-finite ones left out. ``note`` says why a statistic is None ("" when none is).
  """

  measure: str
  properly: str | None
  n_a: int
  n_b: int
  n_undefined_a: int
  n_undefined_b: int
  geometric_mean_a: float | None
  geometric_mean_b: float | None
  proportion_a: float | None
  proportion_b: float | None
  mannwhitney_p: float | None
  fisher_p: float | None
  mannwhitney_significant: bool | None
  fisher_significant: bool | None
  note: str = ""

  def as_dict(self) -> dict:
    return dataclasses.asdict(self)


def finite_or_none(value) -> float | None:
  """``value`` as a float, or None where it is missing or not finite (JSON has no NaN)."""
  return None if value is None or not np.isfinite(value) else float(value)


EXACT_UP_TO = 20  # values in both samples together up to which every split is enumerated (184,756 for 10 + 10)


def mann_whitney_method(n_a: int, n_b: int, tied: bool) -> str:
  """The distribution :func:`mann_whitney` uses for ``method="auto"``: where the samples hold at most
  :data:`EXACT_UP_TO` values together, the exact one (``"exact"``), or, where values tie, the exact permutation
  distribution conditional on the ties (``"permutation"``); else the normal approximation (``"asymptotic"``).
  A few seeds are never given the normal approximation, which is off there.
  """
  if n_a + n_b > EXACT_UP_TO:
    return "asymptotic"
  return "permutation" if tied else "exact"


def mann_whitney(a, b, method: str = "asymptotic") -> tuple[float | None, str]:
  """Two-sided Mann–Whitney U p-value of finite samples ``a`` and ``b``, or None and why when it is undefined (a
  sample of fewer than :data:`MIN_VALUES`, or every value equal: the statistic's variance is 0).

  ``method``: ``"asymptotic"`` (normal approximation with continuity correction: the DR paper's, on hundreds of
  checkpoints) or ``"auto"`` (:func:`mann_whitney_method`: the exact distribution for a few seeds, where the
  approximation is off: 3 seeds against 3 fully separated give exactly 0.1, the approximation 0.0809).

  >>> round(mann_whitney([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0])[0], 4)
  0.0304
  >>> round(mann_whitney([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], method="auto")[0], 4)
  0.1
  """
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  if min(a.size, b.size) < MIN_VALUES:
    return None, f"too few values for a test (A: {a.size}, B: {b.size}; each needs {MIN_VALUES})"
  pooled = np.concatenate([a, b])
  if np.all(pooled == pooled[0]):
    return None, "all values are equal: Mann-Whitney U undefined"
  import scipy.stats  # loaded on first use: the commands check their flags first

  if method == "auto":
    method = mann_whitney_method(a.size, b.size, np.unique(pooled).size < pooled.size)
  if method == "permutation":
    return _tied_exact_p(a, b), ""
  result = scipy.stats.mannwhitneyu(a, b, alternative="two-sided", method=method, use_continuity=True)
  return finite_or_none(result.pvalue), ""


def _tied_exact_p(a: np.ndarray, b: np.ndarray) -> float:
  """Two-sided p of Mann-Whitney U over every split of the pooled values into samples of ``a``'s and ``b``'s sizes,
  ties as they are: twice the smaller tail of ``a``'s rank sum (midranks, doubled to integers), counted exactly by
  a subset-sum recursion rather than by listing the C(n, k) splits.
  """
  import scipy.stats

  ranks = np.rint(2 * scipy.stats.rankdata(np.concatenate([a, b]))).astype(np.int64)
  k, observed = a.size, int(ranks[:a.size].sum())
  ways = np.zeros((k + 1, int(ranks.sum()) + 1), np.float64)  # ways[j, s]: subsets of j values summing to s
  ways[0, 0] = 1.0
  for r in ranks:
    ways[1:, r:] = ways[1:, r:] + ways[:-1, :-r]  # the right side is read whole first: each value once
  counts = ways[k] / ways[k].sum()
  return float(min(1.0, 2 * min(counts[:observed + 1].sum(), counts[observed:].sum())))


def t_interval(values, confidence: float = 0.95) -> tuple[float, float | None]:
  r"""Mean of a few values (one per seed) and the half-width :math:`t_{n-1} s / \sqrt{n}` of its interval.

  Student's t with the sample standard deviation (``ddof=1``): across a handful of seeds the
  normal approximation of :func:`mean_confidence_interval` would be too narrow. None for one value.

  >>> mean, half = t_interval([90.0, 92.0, 94.0])
  >>> mean, round(half, 3)
  (92.0, 4.968)
  """
  values = np.asarray(values, np.float64)
  if values.ndim != 1 or values.size == 0:
    raise ValueError(f"need a non-empty 1-D array of values, got shape {values.shape}.")
  if values.size < 2:
    return float(values.mean()), None
  import scipy.stats

  t = scipy.stats.t.ppf(0.5 + confidence / 2, values.size - 1)
  return float(values.mean()), float(t * values.std(ddof=1) / np.sqrt(values.size))


def welch_difference(a, b, confidence: float = 0.95) -> tuple[float, float | None]:
  """Difference of means ``mean(b) - mean(a)`` and the half-width of its Welch t interval (None below 2 each)."""
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  difference = float(b.mean() - a.mean())
  if min(a.size, b.size) < 2:
    return difference, None
  va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
  if va + vb == 0:
    return difference, 0.0
  dof = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
  import scipy.stats

  return difference, float(scipy.stats.t.ppf(0.5 + confidence / 2, dof) * np.sqrt(va + vb))


def _significant(p: float | None) -> bool | None:
  return None if p is None else bool(p < SIGNIFICANCE_LEVEL)


def compare_runs(a_values, b_values, measure: str) -> Comparison:
  r"""Geometric means, proportions and two-sided tests of one measure between runs A and B.

  * Mann–Whitney U over the per-checkpoint values, two-sided, asymptotic with continuity
    correction (the reference's setting), via :func:`scipy.stats.mannwhitneyu`;
  * Fisher's exact test, two-sided, on :math:`[[\#A<1, \#B<1], [\#A\ge1, \#B\ge1]]` via
    :func:`scipy.stats.fisher_exact` (not for the norm ratio). The split is at 1 for every
    measure; swapping the rows leaves a two-sided p unchanged, so it also tests div-alpha's
    ">1" proportions (a value of exactly 1 counts as not properly learned either way).

  A p-value is None, with the reason in ``note``, when a run has fewer than
  :data:`MIN_VALUES` finite values or, for Mann–Whitney, when all values of both runs are
  equal (the statistic's variance is 0, so the test is undefined).
  """
  _check_measure(measure)
  a, n_undefined_a = split_finite(a_values)
  b, n_undefined_b = split_finite(b_values)
  relation = PROPERLY_LEARNED.get(measure)
  notes = []

  means = []
  for name, values in (("A", a), ("B", b)):
    mean = finite_or_none(geometric_mean(values))
    if mean is None:
      notes.append(f"run {name} has no finite values" if values.size == 0
                   else f"run {name} has negative values: geometric mean undefined")
    means.append(mean)
  proportions = [None if relation is None else finite_or_none(proportion(v, relation)) for v in (a, b)]

  mannwhitney_p = fisher_p = None
  if min(a.size, b.size) < MIN_VALUES:
    notes.append(f"too few values for a test (A: {a.size}, B: {b.size}; each run needs {MIN_VALUES})")
  else:
    mannwhitney_p, note = mann_whitney(a, b)
    notes += [note] if note else []
    if relation is not None:
      table = [[int(np.sum(a < 1)), int(np.sum(b < 1))], [int(np.sum(a >= 1)), int(np.sum(b >= 1))]]
      import scipy.stats

      fisher_p = finite_or_none(scipy.stats.fisher_exact(table, alternative="two-sided").pvalue)

  return Comparison(
      measure=measure,
      properly=relation,
      n_a=int(a.size),
      n_b=int(b.size),
      n_undefined_a=n_undefined_a,
      n_undefined_b=n_undefined_b,
      geometric_mean_a=means[0],
      geometric_mean_b=means[1],
      proportion_a=proportions[0],
      proportion_b=proportions[1],
      mannwhitney_p=mannwhitney_p,
      fisher_p=fisher_p,
      mannwhitney_significant=_significant(mannwhitney_p),
      fisher_significant=_significant(fisher_p),
      note="; ".join(notes),
  )

