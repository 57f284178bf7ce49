"""Ours beside a published number: per-seed values, their mean ± 95% t-interval, a test against the published value,
and a verdict in fixed words.

A published number is one trained model's test accuracy; ours are several seeds of the same protocol. The question is
whether the published model could be one more seed of ours, so the test is the prediction interval of one new seed,
``mean ± t(0.975, n-1) · s · sqrt(1 + 1/n)``: its two-sided p is that of ``t = (published - mean) / (s · sqrt(1 +
1/n))`` with ``n - 1`` degrees of freedom. (A test of our mean against the published value as if it were a true mean
would call any gap significant once there are enough seeds, though a single published run has spread of its own.)

    >>> v = verdict([96.1, 96.4, 95.9], 96.0)
    >>> v.words, round(v.mean, 2)
    ('matches', 96.13)

Verdicts: ``matches`` (p at or above ``level``), ``above by x points`` / ``below by x points`` (x = |mean - published|,
to one decimal), each (and ``one seed: no interval``) followed by ``(shorter schedule)`` where ours trained less than
the paper did;
``not comparable: why`` where the protocols differ too much to set side by side; ``one seed: no interval`` and ``no
seeds yet`` where there is too little to test.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from fewshot.analysis import stats

LEVEL = 0.05


@dataclasses.dataclass(frozen=True)
class Verdict:
  """Per-seed ``values`` against ``published``: mean, 95% t-interval of the mean, the prediction test's p, words."""

  values: tuple[float, ...]
  published: float | None
  mean: float | None
  ci95: float | None  # half-width of the mean's 95% t-interval
  p: float | None  # two-sided p of the published value as one more seed (the module docstring)
  words: str


def prediction_p(values, published: float) -> float | None:
  """Two-sided p of ``published`` as one more draw of the distribution ``values`` come from (Student t, n - 1 df);
  None for fewer than two values; 0 or 1 where the values do not vary (the published value differs from them or not).
  """
  import scipy.stats

  x = np.asarray(values, np.float64)
  if x.size < 2:
    return None
  spread = x.std(ddof=1) * math.sqrt(1 + 1 / x.size)
  if spread == 0:
    return float(published == x.mean())
  t = (published - x.mean()) / spread
  return float(2 * scipy.stats.t.sf(abs(t), x.size - 1))


def verdict(values, published: float | None, *, shorter: bool = False, not_comparable: str | None = None,
            level: float = LEVEL) -> Verdict:
  """The verdict on per-seed ``values`` (accuracies in %) against ``published`` (see the module docstring)."""
  values = tuple(float(v) for v in values)
  mean, ci95 = stats.t_interval(values) if values else (None, None)
  p = None if published is None else prediction_p(values, published)
  if not_comparable is not None:
    words = f"not comparable: {not_comparable}"
  elif published is None:
    words = "no published number"
  elif not values:
    words = "no seeds yet"
  elif p is None:
    words = "one seed: no interval"
  elif p >= level:
    words = "matches"
  else:
    words = f"{'above' if mean > published else 'below'} by {abs(mean - published):.1f} points"
  if shorter and (words in ("matches", "one seed: no interval") or words.startswith(("above", "below"))):
    words += " (shorter schedule)"
  return Verdict(values, published, mean, ci95, p, words)
