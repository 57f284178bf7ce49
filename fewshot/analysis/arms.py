"""Two arms of seed groups compared: ``python -m fewshot.analyze runs/A_seed* -- runs/B_seed*``.

Each arm is the runs of one configuration under several seeds. The tables:

* test accuracy per arm, its mean across seeds with a 95% Student-t interval, the difference
  of the arms' means (B − A) with its Welch interval, the two-sided Mann–Whitney U on the
  per-seed test accuracies and the exact sign-flip test on the seeds both arms have;
* per diagnostic, each seed's geometric mean over its checkpoints, and Mann–Whitney U between
  the arms' per-seed geometric means (seeds are the independent replicates);
* the DR paper's per-checkpoint tables, with every checkpoint of an arm pooled over its seeds,
  and seed by seed (A's seed k against B's seed k, for the seeds both arms have).
"""

from __future__ import annotations

import numpy as np

from fewshot.analysis import paired, stats
from fewshot.analysis.measures import LABELS, MEASURES
from fewshot.analysis.tables import MISSING, Cell, Table, format_mean_interval, format_p, format_value
from fewshot.errors import ConfigError
from fewshot.records.reading import Run
from fewshot.records.run_kinds import KINDS

# What must agree between two arms of few-shot runs: their protocol's options, and the queries of the training and
# test episodes too, since the verdict pairs the arms' runs by seed as runs that drew the same episodes.
ARM_OPTIONS = (*KINDS["fewshot"].protocol, "query", "test_query")


def check_arms(a: list[Run], b: list[Run], same: tuple[str, ...] = ARM_OPTIONS,
               what: str = "one dataset and episode shape") -> None:
  """One-line ``ConfigError`` unless both arms have runs and they agree in the options ``same`` (``what`` they
  are: the dataset and episode shape of few-shot runs).
  """
  for name, arm in (("A", a), ("B", b)):
    if not arm:
      raise ConfigError(f"arm {name} has no runs; pass two arms of run directories: python -m fewshot.analyze "
                        "runs/A_seed* -- runs/B_seed*.")
  differ = [f"--{f} {sorted({str(getattr(r.config, f)) for r in a + b})}" for f in same
            if len({getattr(r.config, f) for r in a + b}) > 1]
  if differ:
    raise ConfigError(f"the arms' runs differ in {', '.join(differ)}; compare arms of {what}.")


def verdict_line(a: list[Run], b: list[Run], level: float = 0.05, values=None, measure: str = "test accuracy") -> str:
  """One line that answers "does B differ from A in test accuracy?": the primary test chosen by whether the arms
  share seeds (paired exact sign-flip on the shared seeds, whose runs share every episode; else the exact
  Mann–Whitney U), the smallest p it can give at this n, the effect B − A with its 95% interval, and the answer in
  fixed words ("too few seeds to say" where even the most extreme result could not reach ``level``). ``values``:
  each run's value of another ``measure`` in percent (an arm's runs to an array; default the test accuracy).
  """
  import math

  values = values or _accuracies
  acc_a = {r.config.seed: v for r, v in zip(a, values(a)) if np.isfinite(v)}
  acc_b = {r.config.seed: v for r, v in zip(b, values(b)) if np.isfinite(v)}
  shared = sorted(set(acc_a) & set(acc_b))
  if len(shared) >= 2:
    differences = [acc_b[s] - acc_a[s] for s in shared]
    mean, half = paired.paired_interval(differences)
    p, floor = paired.sign_flip_p(differences), 2 / 2 ** len(shared)
    test = f"paired by seed ({len(shared)} shared seeds), exact sign-flip"
    interval = "t-interval of the paired differences"
  else:
    fa, fb = np.array(list(acc_a.values())), np.array(list(acc_b.values()))
    if not (fa.size and fb.size):
      return f"Verdict: no {measure} in one of the arms, nothing to compare."
    mean, half = stats.welch_difference(fa, fb)
    p = stats.mann_whitney(fa, fb, method="auto")[0]
    floor = 2 / math.comb(fa.size + fb.size, fa.size)
    test = f"unpaired ({fa.size} and {fb.size} seeds, none shared), Mann-Whitney U"
    interval = "Welch interval"
  of = "" if measure == "test accuracy" else f" of {measure}"
  effect = f"B − A {mean:+.2f}" + ("" if half is None else f" ± {half:.2f}") + f" points{of} ({interval})"
  if floor > level:
    return (f"Verdict: too few seeds to say: {test} cannot give p below {floor:.3g} at this n (level {level}); "
            f"{effect}.")
  if p is not None and p < level:
    answer = f"B {'higher' if mean > 0 else 'lower'} than A"
  else:
    answer = "no difference detected (not a proof of none)"
  return f"Verdict: {answer}: {test} p = {format_p(p)} (its floor {floor:.3g}); {effect}."


def arm_label(arm: list[Run]) -> str:
  names = sorted({r.config.model_name for r in arm})
  return "+".join(names)


def _accuracies(arm: list[Run]) -> np.ndarray:
  values = [r.results.get("test_accuracy") if r.results else None for r in arm]
  return np.array([np.nan if v is None else float(v) for v in values])


def _compared(values_a: np.ndarray, values_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, float | None, str]:
  """Each arm's finite per-seed values and the two-sided Mann–Whitney U between them: ``(fa, fb, p, note)``."""
  fa, fb = values_a[np.isfinite(values_a)], values_b[np.isfinite(values_b)]
  p, note = stats.mann_whitney(fa, fb, method="auto")
  return fa, fb, p, note


def _welch(fa: np.ndarray, fb: np.ndarray) -> tuple[float | None, float | None]:
  """B − A and its Welch half-width (None without values on both sides)."""
  return stats.welch_difference(fa, fb) if fa.size and fb.size else (None, None)


def _paired_p(a: list[Run], b: list[Run], values_a: np.ndarray, values_b: np.ndarray) -> float | None:
  """The exact sign-flip p of B − A over the seeds both arms have a value of (None under two such seeds)."""
  of_b = {r.config.seed: v for r, v in zip(b, values_b) if np.isfinite(v)}
  shared = [of_b[r.config.seed] - v for r, v in zip(a, values_a) if np.isfinite(v) and r.config.seed in of_b]
  return paired.sign_flip_p(shared) if len(shared) >= 2 else None


def compared_rows(a: list[Run], b: list[Run], values_a: np.ndarray, values_b: np.ndarray, lead) -> list[tuple]:
  """Arms A and B on one measure (each run's value, NaN where it has none), a row each: ``lead(name, arm)``'s cells,
  each seed's value, the mean ± 95% t-interval, and on B's row B − A ± 95% Welch, the Mann–Whitney p and the exact
  sign-flip p over the seeds both arms have (their runs drew the same episodes or batches).
  """
  fa, fb, p, _ = _compared(values_a, values_b)
  difference, half = _welch(fa, fb)
  diff = MISSING if difference is None else f"{difference:+.2f}" + ("" if half is None else f" ± {half:.2f}")
  paired_p = _paired_p(a, b, values_a, values_b)
  rows = []
  for name, arm, values in (("A", a, values_a), ("B", b, values_b)):
    last = name == "B"
    per_seed = ", ".join(f"{r.config.seed}: " + (MISSING if np.isnan(v) else f"{v:.2f}") for r, v in zip(arm, values))
    rows.append((*lead(name, arm), Cell(per_seed), Cell(format_mean_interval(values)), Cell(diff if last else ""),
                 Cell(format_p(p) if last else "", bool(last and p is not None and p < 0.05)),
                 Cell(format_p(paired_p) if last else "", bool(last and paired_p is not None and paired_p < 0.05))))
  return rows


COMPARED_HEADERS = ("mean ± 95% t-interval", "B − A ± 95% Welch", "Mann-Whitney p", "paired sign-flip p")


def accuracy_table(a: list[Run], b: list[Run]) -> Table:
  """Test accuracy of each arm across its seeds, and the comparison of the arms (:func:`compared_rows`)."""
  acc_a, acc_b = _accuracies(a), _accuracies(b)
  fa, fb, _, note = _compared(acc_a, acc_b)
  rows = compared_rows(a, b, acc_a, acc_b, lambda name, arm: (Cell(name), Cell(arm_label(arm)), Cell(str(len(arm)))))
  title = f"Test accuracy across seeds (Mann-Whitney U: {_distribution(fa, fb)})" + (f" ({note})" if note else "")
  return Table(title, ("arm", "model", "seeds", "test accuracy per seed (%)", *COMPARED_HEADERS), tuple(rows))


def _distribution(a: np.ndarray, b: np.ndarray) -> str:
  """Which distribution the per-seed Mann–Whitney U test used (exact for a few seeds without ties)."""
  tied = np.unique(np.concatenate([a, b])).size < a.size + b.size
  method = stats.mann_whitney_method(a.size, b.size, tied)
  return {"exact": "exact distribution", "permutation": "exact permutation, ties as they are"}.get(
      method, "normal approximation")


def seed_means(arm: list[Run], measure: str) -> np.ndarray:
  """Each run's geometric mean of a diagnostic over its checkpoints (NaN where undefined)."""
  return np.array([stats.geometric_mean(r.values(measure)) for r in arm])


def seed_means_table(a: list[Run], b: list[Run]) -> Table:
  """Per diagnostic: the arms' per-seed geometric means and Mann–Whitney U between them."""
  headers = ("measure", "per-seed geo. means A", "per-seed geo. means B", "median A", "median B", "Mann-Whitney p",
             "note")
  rows = []
  for measure in MEASURES:
    ma, mb = seed_means(a, measure), seed_means(b, measure)
    fa, fb, p, note = _compared(ma, mb)
    listed = lambda m: ", ".join(format_value(stats.finite_or_none(v)) for v in m)  # noqa: E731
    median = lambda f: format_value(float(np.median(f))) if f.size else MISSING  # noqa: E731
    rows.append((Cell(LABELS[measure]), Cell(listed(ma)), Cell(listed(mb)), Cell(median(fa)), Cell(median(fb)),
                 Cell(format_p(p), bool(p is not None and p < 0.05)), Cell(note or _distribution(fa, fb))))
  return Table("Diagnostics across seeds: each seed's geometric mean over its checkpoints", headers, tuple(rows))


def pooled(arm: list[Run], label: str) -> Run:
  """The arm as one run: its seeds' checkpoints one after another."""
  rows = tuple(row for r in arm for row in r.rows)
  return Run(path=f"{label} ({len(arm)} seeds)", config=arm[0].config, rows=rows, results=None)


def seed_pairs(a: list[Run], b: list[Run]) -> list[tuple[Run, Run]]:
  """A's and B's runs of the same seed, in seed order."""
  by_seed = {r.config.seed: r for r in b}
  return [(r, by_seed[r.config.seed]) for r in sorted(a, key=lambda r: r.config.seed) if r.config.seed in by_seed]


# Beside the per-checkpoint comparisons' columns (fewshot.analysis.pairs.CSV_FIELDS), what the arms' CSV adds so that
# it carries what their tables show: test accuracy across seeds, and each diagnostic's per-seed geometric means.
CSV_EXTRA_FIELDS = ("values_a", "values_b", "mean_a", "ci95_a", "mean_b", "ci95_b", "median_a", "median_b",
                    "difference", "difference_ci95", "paired_p")


def _seed_values(arm: list[Run], values: np.ndarray) -> str:
  return "; ".join(f"{r.config.seed}: {'' if np.isnan(v) else repr(float(v))}" for r, v in zip(arm, values))


def _finite_or_empty(x) -> float | str:
  return "" if x is None or not np.isfinite(x) else float(x)


def csv_records(a: list[Run], b: list[Run]) -> list[dict]:
  """The arms' test accuracy (``measure`` ``test_accuracy``) and each diagnostic's per-seed geometric means
  (``<measure>_seed_means``), one record each, numbers at full precision, the per-seed values as ``seed: value; ...``.
  """
  acc_a, acc_b = _accuracies(a), _accuracies(b)
  fa, fb, p, note = _compared(acc_a, acc_b)
  (mean_a, ci_a), (mean_b, ci_b) = (stats.t_interval(f) if f.size else (None, None) for f in (fa, fb))
  difference, half = _welch(fa, fb)
  common = dict(run_a=arm_label(a), run_b=arm_label(b), dir_a="; ".join(r.path for r in a),
                dir_b="; ".join(r.path for r in b))
  records = [dict(common, measure="test_accuracy", n_a=fa.size, n_b=fb.size, values_a=_seed_values(a, acc_a),
                  values_b=_seed_values(b, acc_b), mean_a=_finite_or_empty(mean_a), ci95_a=_finite_or_empty(ci_a),
                  mean_b=_finite_or_empty(mean_b), ci95_b=_finite_or_empty(ci_b),
                  difference=_finite_or_empty(difference), difference_ci95=_finite_or_empty(half),
                  mannwhitney_p=_finite_or_empty(p), paired_p=_finite_or_empty(_paired_p(a, b, acc_a, acc_b)),
                  note=note or _distribution(fa, fb))]
  for measure in MEASURES:
    ma, mb = seed_means(a, measure), seed_means(b, measure)
    fa, fb, p, note = _compared(ma, mb)
    records.append(dict(common, measure=f"{measure}_seed_means", n_a=fa.size, n_b=fb.size,
                        values_a=_seed_values(a, ma), values_b=_seed_values(b, mb),
                        median_a=float(np.median(fa)) if fa.size else "",
                        median_b=float(np.median(fb)) if fb.size else "", mannwhitney_p=_finite_or_empty(p),
                        note=note or _distribution(fa, fb)))
  return records
