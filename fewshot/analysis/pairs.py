"""The DR paper's tables of run pairs (its Tables 3-10): each measure's comparison of two runs, a row per pair.

For every measure of :data:`fewshot.analysis.measures.MEASURES` one table with a row per pair of runs:
checkpoints used (n) and left out as undefined, the geometric mean of each run, the two-sided
Mann–Whitney U p-value, and (except for the norm ratio) the proportion of properly learned
checkpoints of each run and Fisher's exact p-value. Pairs are the first run against each other run
(``first``, the paper's baseline-vs-model layout) or every pair (``all``); two arms of seeds are compared
pooled, then seed by seed. The statistics are :func:`fewshot.analysis.stats.compare_runs`.
"""

from __future__ import annotations

import dataclasses
import itertools

from fewshot.analysis import arms, stats
from fewshot.analysis.measures import LABELS, MEASURES, PROPERLY_LEARNED
from fewshot.analysis.tables import MISSING, Cell, Table, format_p, format_proportion, format_value
from fewshot.errors import ConfigError
from fewshot.records.reading import Run, run_labels

PAIRINGS = ("first", "all")


@dataclasses.dataclass(frozen=True)
class Pair:
  """Every measure's comparison of runs A and B."""

  label_a: str
  label_b: str
  path_a: str
  path_b: str
  comparisons: dict[str, stats.Comparison]


def pair_indices(n: int, pairing: str = "first") -> list[tuple[int, int]]:
  if pairing not in PAIRINGS:
    raise ConfigError(f"unknown --pairs {pairing!r}; choose one of {', '.join(PAIRINGS)}.")
  return [(0, j) for j in range(1, n)] if pairing == "first" else list(itertools.combinations(range(n), 2))


def pair(a: Run, b: Run, label_a: str, label_b: str) -> Pair:
  comparisons = {m: stats.compare_runs(a.values(m), b.values(m), m) for m in MEASURES}
  return Pair(label_a, label_b, a.path, b.path, comparisons)


def compare(runs: list[Run], pairing: str = "first") -> list[Pair]:
  labels = run_labels(runs)
  return [pair(runs[i], runs[j], labels[i], labels[j]) for i, j in pair_indices(len(runs), pairing)]


def compare_arms(a: list[Run], b: list[Run]) -> list[Pair]:
  """The arms pooled over their seeds, then seed by seed (A's seed k against B's seed k)."""
  label_a, label_b = arms.arm_label(a), arms.arm_label(b)
  if label_a == label_b:
    label_a, label_b = f"A {label_a}", f"B {label_b}"
  pairs = [pair(arms.pooled(a, label_a), arms.pooled(b, label_b), f"{label_a} (pooled)", f"{label_b} (pooled)")]
  pairs += [pair(ra, rb, f"{label_a} seed {ra.config.seed}", f"{label_b} seed {rb.config.seed}")
            for ra, rb in arms.seed_pairs(a, b)]
  return pairs


def runs_table(runs: list[Run]) -> Table:
  headers = ("run", "model", "dataset", "way", "shot", "backbone", "seed", "checkpoints", "last episode",
             "test accuracy (%)", "directory")
  rows = []
  for label, run in zip(run_labels(runs), runs):
    c, res = run.config, run.results or {}
    accuracy, ci = res.get("test_accuracy"), res.get("test_ci95")
    test = MISSING if not isinstance(accuracy, (int, float)) else f"{accuracy:.2f}" + (
        f" ± {ci:.2f}" if isinstance(ci, (int, float)) else "")
    cells = (label, c.model_name, c.dataset, c.way, c.shot, c.backbone, c.seed, len(run.rows),
             run.rows[-1]["episode"], test, run.path)
    rows.append(tuple(Cell(str(v)) for v in cells))
  return Table("Runs", headers, tuple(rows))


def measure_table(measure: str, pairs: list[Pair], pooled: bool = False) -> Table:
  """The paper's table of one measure: a row per pair of runs. ``pooled``: the pairs are arms' checkpoints pooled
  over their seeds (and seed by seed), whose checkpoints are not independent replicates: said in the title, and no
  p is starred.
  """
  star = (lambda significant: False) if pooled else bool
  relation = PROPERLY_LEARNED.get(measure)
  name = LABELS[measure]
  headers = ["A", "B", "n A", "n B", "undefined A", "undefined B", "geo. mean A", "geo. mean B",
             "Mann-Whitney p (normal approx.)"]
  if relation is not None:
    headers += [f"P({relation}) A", f"P({relation}) B", "Fisher p"]
  headers.append("note")
  rows = []
  for pair in pairs:
    c = pair.comparisons[measure]
    row = [Cell(str(v)) for v in (pair.label_a, pair.label_b, c.n_a, c.n_b, c.n_undefined_a, c.n_undefined_b)]
    row += [Cell(format_value(c.geometric_mean_a)), Cell(format_value(c.geometric_mean_b)),
            Cell(format_p(c.mannwhitney_p), star(c.mannwhitney_significant))]
    if relation is not None:
      row += [Cell(format_proportion(c.proportion_a)), Cell(format_proportion(c.proportion_b)),
              Cell(format_p(c.fisher_p), star(c.fisher_significant))]
    rows.append(tuple(row) + (Cell(c.note),))
  title = name if relation is None else f"{name} (properly learned: {name} {relation[0]} 1)"
  if pooled:
    title += (" — the paper's per-checkpoint tests, checkpoints pooled over seeds (not independent: exploratory, "
              "never starred; the seeds are the replicates above)")
  return Table(title, tuple(headers), tuple(rows))


CSV_FIELDS = ("measure", "run_a", "run_b", "dir_a", "dir_b") + tuple(
    f.name for f in dataclasses.fields(stats.Comparison) if f.name != "measure")


def csv_records(pairs: list[Pair]) -> list[dict]:
  """Long format, one record per (measure, pair), numbers at full precision; None is empty."""
  records = []
  for measure in MEASURES:
    for pair in pairs:
      record = dict(run_a=pair.label_a, run_b=pair.label_b, dir_a=pair.path_a, dir_b=pair.path_b,
                    **pair.comparisons[measure].as_dict())
      records.append({k: "" if record[k] is None else record[k] for k in CSV_FIELDS})
  return records
