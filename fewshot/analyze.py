"""Compare the training diagnostics of runs, as in the DR paper's Sec. 5, Tables 3-10 (arXiv 2201.08676).

    python -m fewshot.analyze runs/A runs/B [runs/C ...] [--pairs first|all]
        [--format table|markdown|csv|latex] [--out FILE]
    python -m fewshot.analyze runs/A_seed* -- runs/B_seed*      # two arms of seed groups (fewshot.analysis.arms)

For every measure of :data:`fewshot.analysis.measures.MEASURES` one table with a row per pair of runs:
checkpoints used (n) and left out as undefined, the geometric mean of each run, the two-sided
Mann–Whitney U p-value, and (except for the norm ratio) the proportion of properly learned
checkpoints of each run and Fisher's exact p-value; p < 0.05 is marked (``*`` in the terminal
table, bold in markdown and LaTeX, a ``*_significant`` column in CSV). Pairs are the first run
against each other run (``--pairs first``, the paper's baseline-vs-model layout) or every pair
(``--pairs all``). The statistics are :func:`fewshot.analysis.stats.compare_runs`; this module only
reads run directories and lays out tables.
"""

from __future__ import annotations

import dataclasses
import itertools
import pathlib
import sys

from absl import flags

from fewshot import cli, options
from fewshot.analysis import arms, stats
from fewshot.analysis import tables as tables_mod
from fewshot.analysis.measures import LABELS, MEASURES, PROPERLY_LEARNED
from fewshot.analysis.tables import MISSING, Cell, Table, format_p, format_proportion, format_value, render_csv
from fewshot.config import Config
from fewshot.errors import ConfigError, OutputError
from fewshot.records.files import check_writable, make_dirs, write_text_atomic
from fewshot.records.reading import Run, protocol_warning, read_runs, run_labels

PAIRINGS = ("first", "all")
FORMATS = ("table", "markdown", "csv", "latex")


def define_flags() -> None:
  """Define the command-line flags (only when run as a program, so importing this module defines none)."""
  with options.flag_group("comparison"):
    flags.DEFINE_enum("pairs", "first", PAIRINGS, "first: the first run against each other run; all: every pair")
  with options.flag_group("output"):
    flags.DEFINE_enum("format", "table", FORMATS, "output format")
    flags.DEFINE_string("out", None, "write the output to this file instead of standard output")


FLAGS = flags.FLAGS


# ----------------------------------------------------------------------------- comparing (pure)
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


# ----------------------------------------------------------------------------- tables (pure)
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


def measure_table(measure: str, pairs: list[Pair]) -> Table:
  """The paper's table of one measure: a row per pair of runs."""
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
            Cell(format_p(c.mannwhitney_p), bool(c.mannwhitney_significant))]
    if relation is not None:
      row += [Cell(format_proportion(c.proportion_a)), Cell(format_proportion(c.proportion_b)),
              Cell(format_p(c.fisher_p), bool(c.fisher_significant))]
    rows.append(tuple(row) + (Cell(c.note),))
  title = name if relation is None else f"{name} (properly learned: {name} {relation[0]} 1)"
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


def report(runs: list[Run], pairing: str = "first", fmt: str = "table") -> str:
  """The whole output of ``python -m fewshot.analyze`` for runs already read."""
  if fmt not in FORMATS:
    raise ConfigError(f"unknown --format {fmt!r}; choose one of {', '.join(FORMATS)}.")
  pairs = compare(runs, pairing)
  if fmt == "csv":
    return render_csv(csv_records(pairs), CSV_FIELDS)
  tables = [runs_table(runs)] + [measure_table(m, pairs) for m in MEASURES]
  return tables_mod.RENDERERS[fmt](tables)


def report_arms(a: list[Run], b: list[Run], fmt: str = "table") -> str:
  """The output of ``python -m fewshot.analyze A... -- B...``: two arms of seed groups."""
  if fmt not in FORMATS:
    raise ConfigError(f"unknown --format {fmt!r}; choose one of {', '.join(FORMATS)}.")
  arms.check_arms(a, b)
  pairs = compare_arms(a, b)
  if fmt == "csv":
    return render_csv(csv_records(pairs), CSV_FIELDS)
  tables = [arms.accuracy_table(a, b), arms.seed_means_table(a, b)] + [measure_table(m, pairs) for m in MEASURES]
  return tables_mod.RENDERERS[fmt](tables)


def analyze_arms(paths_a: list[str], paths_b: list[str], fmt: str = "table") -> str:
  """Read two arms of run directories and return the output."""
  runs = read_runs([*paths_a, *paths_b], Config.from_dict)
  return report_arms(runs[: len(paths_a)], runs[len(paths_a):], fmt)


def analyze(paths: list[str], pairing: str = "first", fmt: str = "table") -> tuple[str, str | None]:
  """Read the run directories and return the output and the protocol warning (or None)."""
  if len(paths) < 2:
    raise ConfigError(f"need at least two run directories, got {len(paths)}; usage: python -m fewshot.analyze runs/A runs/B.")
  runs = read_runs(paths, Config.from_dict)
  return report(runs, pairing, fmt), protocol_warning(runs)


def main(argv):
  # absl drops the "--" that separates two arms; the raw command line still has it.
  if "--" in sys.argv[1:]:
    arm_b = sys.argv[sys.argv.index("--") + 1:]
    paths = argv[1:]
    text, warning = analyze_arms(paths[: len(paths) - len(arm_b)], arm_b, FLAGS.format), None
  else:
    text, warning = analyze(argv[1:], FLAGS.pairs, FLAGS.format)
  if warning:
    print(warning, file=sys.stderr)
  if FLAGS.out:
    out = pathlib.Path(FLAGS.out)
    if out.is_dir():
      raise OutputError(f"--out {out} is a folder; pass a file name such as {out / 'table.md'}.")
    check_writable(out.parent, "--out's folder")
    make_dirs(out.parent)
    write_text_atomic(out, text)
    print(f"wrote {out}")
  else:
    sys.stdout.write(text)


if __name__ == "__main__":
  define_flags()
  cli.run(main)
