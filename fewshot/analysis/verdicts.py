"""Ours beside a published number, under a margin declared before the runs: the interval of ours − published and a
verdict in fixed words.

A published number is one trained model's test accuracy; ours are ``n`` seeds of the same protocol. The difference
``D = mean(ours) − published`` has the standard error ``sqrt(s² / n + e²)``: ``s`` the seeds' standard deviation,
floored at the test episodes' own standard error (the root mean square of each seed's, so three seeds that happen
to agree do not make an interval of nothing), ``e`` the published interval's standard error (its 95% half-width /
1.96) where the paper gives one, else 0. Intervals use Student's t with ``n − 1`` degrees of freedom.

* ``equivalent within ±δ``: the 90% interval of ``D`` lies inside ``(−δ, δ)``, ``δ`` the cell's declared margin (two
  one-sided tests at 5% each);
* ``below by x`` / ``above by x``: the 95% interval of ``D`` excludes 0 (x = ``|D|``; where the 90% interval also lies
  inside the margin, ``, equivalent within ±δ`` follows: a real difference smaller than the margin);
* ``inconclusive at n seeds``: neither.

A schedule that is not the published one never gets an agreement word: its cell reads ``unlike``'s words (``not the
published schedule:`` where only the length differs, e.g. ``not the published protocol (5-way training):`` where more
does; ``unlike=None``: the published protocol itself) followed by ``below by x`` / ``above by x`` where the 95% interval excludes 0, else ``inconclusive at n seeds``.
Beside each verdict, :attr:`Verdict.smallest_margin`: the smallest δ the design establishes were ``D`` exactly 0
(``t(0.95, n − 1)`` standard errors), what more seeds or a tighter test would buy.

    >>> v = verdict([98.1, 98.3, 98.2], 98.8, margin=0.5, errors=[0.09, 0.09, 0.09])
    >>> v.words, round(v.difference, 2), [round(x, 2) for x in v.interval95]
    ('below by 0.60', -0.6, [-0.85, -0.35])
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from fewshot.analysis import stats

Z95 = 1.959963984540054  # a published 95% half-width / Z95 = its standard error
UNLIKE = "not the published schedule"  # a verdict's first words where the runs are not the published protocol


@dataclasses.dataclass(frozen=True)
class Verdict:
  """Per-seed ``values`` against ``published`` under ``margin``: see the module docstring."""

  values: tuple[float, ...]
  published: float | None
  mean: float | None
  ci95: float | None  # half-width of our mean's own 95% t-interval (the seeds alone)
  difference: float | None  # mean − published
  interval90: tuple[float, float] | None  # of the difference: the equivalence test's
  interval95: tuple[float, float] | None  # of the difference: the difference test's
  margin: float | None
  smallest_margin: float | None
  words: str
  error: float | None = None  # the difference's standard error (difference_error), None without an interval


def difference_error(values, errors=None, published_ci95: float | None = None) -> float | None:
  """Standard error of ``mean(values) − published``: the seeds' SD floored at the root mean square of ``errors``
  (each seed's test standard error), over √n, with the published interval's standard error added in quadrature.
  None for fewer than two values.

  >>> round(difference_error([90.0, 90.0, 90.0], errors=[0.3, 0.3, 0.3]), 4)
  0.1732
  """
  x = np.asarray(values, np.float64)
  if x.size < 2:
    return None
  floor = 0.0 if errors is None or len(errors) == 0 else math.sqrt(float(np.mean(np.square(errors))))
  spread = max(float(x.std(ddof=1)), floor)
  published = 0.0 if published_ci95 is None else published_ci95 / Z95
  return math.sqrt(spread ** 2 / x.size + published ** 2)


def _interval(centre: float, error: float, df: int, confidence: float) -> tuple[float, float]:
  import scipy.stats

  half = float(scipy.stats.t.ppf(0.5 + confidence / 2, df)) * error
  return centre - half, centre + half


def verdict(values, published: float | None, *, margin: float | None, errors=None,
            published_ci95: float | None = None, not_comparable: str | None = None,
            unlike: str | None = None) -> Verdict:
  """The verdict on per-seed ``values`` (in %) against ``published`` under ``margin`` (points); ``errors``: each
  seed's test standard error; ``unlike``: how the runs differ from the published protocol (e.g. :data:`UNLIKE`),
  None where they follow it; see the module docstring.
  """
  values = tuple(float(v) for v in values)
  mean, ci95 = stats.t_interval(values) if values else (None, None)
  error = difference_error(values, errors, published_ci95) if published is not None else None
  difference = None if published is None or mean is None else mean - published
  i90 = i95 = smallest = None
  if error is not None:
    i90, i95 = (_interval(difference, error, len(values) - 1, c) for c in (0.90, 0.95))
    smallest = _interval(0.0, error, len(values) - 1, 0.90)[1]
  words = _words(values, published, difference, i90, i95, margin, not_comparable, unlike)
  return Verdict(values, published, mean, ci95, difference, i90, i95, margin, smallest, words, error)


def _words(values, published, difference, i90, i95, margin, not_comparable, unlike) -> str:
  if not_comparable is not None:
    return f"not comparable: {not_comparable}"
  if published is None:
    return "no published number"
  if not values:
    return "no seeds yet"
  prefix = "" if unlike is None else f"{unlike}: "
  if i95 is None:
    return f"{prefix}inconclusive at 1 seed: no interval"
  equivalent = margin is not None and -margin < i90[0] and i90[1] < margin
  within = f"equivalent within ±{margin:g}" if margin is not None else ""
  if i95[0] > 0 or i95[1] < 0:
    direction = f"{'above' if difference > 0 else 'below'} by {abs(difference):.2f}"
    return prefix + direction + (f", {within}" if equivalent and unlike is None else "")
  if equivalent and unlike is None:
    return within
  return f"{prefix}inconclusive at {len(values)} seeds"


def pooled(verdicts: list[Verdict], margin: float | None, *, unlike: str | None = None) -> Verdict | None:
  """The fixed-effect pool of independent arms' differences (each weighted by its inverse variance, ``n − 1``
  degrees of freedom summed), judged by the same words under ``margin`` (the caller's: the page takes the smallest
  of the arms' margins); None where fewer than two arms have an interval of some width.

  >>> a = verdict([98.1, 98.3, 98.2], 98.8, margin=0.5)
  >>> b = verdict([95.0, 95.4, 95.2], 96.0, margin=1.0)
  >>> p = pooled([a, b], 0.5)
  >>> p.words, round(p.difference, 2)
  ('below by 0.64', -0.64)
  """
  arms = [v for v in verdicts if v.error]  # an arm without an interval, or with a point for one, has no weight
  if len(arms) < 2:
    return None
  weights = np.array([1 / v.error ** 2 for v in arms])
  difference = float(np.sum(weights * [v.difference for v in arms]) / weights.sum())
  error = float(1 / math.sqrt(weights.sum()))
  df = sum(len(v.values) - 1 for v in arms)
  i90, i95 = (_interval(difference, error, df, c) for c in (0.90, 0.95))
  values = tuple(x for v in arms for x in v.values)
  words = _words(values, 0.0, difference, i90, i95, margin, None, unlike)
  words = words.replace(f"at {len(values)} seeds", f"at {len(arms)} arms")
  return Verdict(values, None, None, None, difference, i90, i95, margin, _interval(0.0, error, df, 0.90)[1], words,
                 error)
