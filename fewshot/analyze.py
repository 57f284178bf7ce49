"""Compare the training diagnostics of runs, as in the DR paper's Tables 3-10 (SPEC.md §6).

    python -m fewshot.analyze runs/A runs/B [runs/C ...] [--pairs first|all]
        [--format table|markdown|csv|latex] [--out FILE]

For every measure of :data:`fewshot.MEASURES` one table with a row per pair of runs:
checkpoints used (n) and left out as undefined, the geometric mean of each run, the two-sided
Mann–Whitney U p-value, and (except for the norm ratio) the proportion of properly learned
checkpoints of each run and Fisher's exact p-value; p < 0.05 is marked (``*`` in the terminal
table, bold in markdown and LaTeX, a ``*_significant`` column in CSV). Pairs are the first run
against each other run (``--pairs first``, the paper's baseline-vs-model layout) or every pair
(``--pairs all``). The statistics are :func:`fewshot.stats.compare_runs`; this module only
reads run directories and lays out tables.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import json
import pathlib
import sys

import numpy as np
from absl import flags

from fewshot import cli, stats
from fewshot.config import Config
from fewshot.errors import ConfigError, OutputError
from fewshot.measures import LABELS, MEASURES, PROPERLY_LEARNED
from fewshot.rundir import Run, protocol_warning, read_run, run_labels

PAIRINGS = ("first", "all")
FORMATS = ("table", "markdown", "csv", "latex")
MISSING = "—"


def define_flags() -> None:
  """Define the command-line flags (only when run as a program, so importing this module defines none)."""
  flags.DEFINE_enum("format", "table", FORMATS, "output format")
  flags.DEFINE_enum("pairs", "first", PAIRINGS, "first: the first run against each other run; all: every pair")
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


def compare(runs: list[Run], pairing: str = "first") -> list[Pair]:
  labels = run_labels(runs)
  pairs = []
  for i, j in pair_indices(len(runs), pairing):
    comparisons = {m: stats.compare_runs(runs[i].values(m), runs[j].values(m), m) for m in MEASURES}
    pairs.append(Pair(labels[i], labels[j], runs[i].path, runs[j].path, comparisons))
  return pairs


# ----------------------------------------------------------------------------- tables (pure)
@dataclasses.dataclass(frozen=True)
class Cell:
  """A formatted value; ``significant`` p-values are marked by each renderer in its own way."""

  text: str
  significant: bool = False


@dataclasses.dataclass(frozen=True)
class Table:
  title: str
  headers: tuple[str, ...]
  rows: tuple[tuple[Cell, ...], ...]


def format_value(x: float | None) -> str:
  """A geometric mean: five decimals near 1 (updates move the ratios by ~1e-3), else scientific."""
  if x is None:
    return MISSING
  return "0" if x == 0 else f"{x:.5f}" if 1e-2 <= abs(x) < 1e3 else f"{x:.3e}"


def format_proportion(x: float | None) -> str:
  return MISSING if x is None else f"{x:.3f}"


def format_p(p: float | None) -> str:
  return MISSING if p is None else f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


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
  headers = ["A", "B", "n A", "n B", "undefined A", "undefined B", "geo. mean A", "geo. mean B", "Mann-Whitney p"]
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


# ----------------------------------------------------------------------------- rendering (pure)
def render_text(tables: list[Table]) -> str:
  """Aligned plain-text tables; a significant p-value ends in ``*``."""
  blocks = []
  for table in tables:
    lines = [list(table.headers)] + [[c.text + ("*" if c.significant else "") for c in row] for row in table.rows]
    widths = [max(len(line[k]) for line in lines) for k in range(len(table.headers))]
    text = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    blocks.append("\n".join([table.title] + text))
  return "\n\n".join(blocks) + "\n\n* p < 0.05 (two-sided)\n"


def _markdown_cell(cell: Cell) -> str:
  text = cell.text.replace("|", "\\|")
  return f"**{text}**" if cell.significant and text else text


def render_markdown(tables: list[Table]) -> str:
  """GitHub markdown tables under ``###`` titles; significant p-values in bold."""
  blocks = []
  for table in tables:
    lines = [f"### {table.title}", "", "| " + " | ".join(table.headers) + " |",
             "|" + "|".join("---" for _ in table.headers) + "|"]
    lines += ["| " + " | ".join(_markdown_cell(c) for c in row) + " |" for row in table.rows]
    blocks.append("\n".join(lines))
  return "\n\n".join(blocks) + "\n\nBold: p < 0.05 (two-sided).\n"


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "±": r"$\pm$", "—": "--", "<": r"$<$", ">": r"$>$"}


def latex_escape(text: str) -> str:
  return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def render_latex(tables: list[Table]) -> str:
  """One ``table`` environment per table; significant p-values in bold."""
  blocks = []
  for table in tables:
    def line(cells):
      return " & ".join(cells) + r" \\"
    body = [line(latex_escape(h) for h in table.headers), r"\hline"]
    body += [line(rf"\textbf{{{latex_escape(c.text)}}}" if c.significant else latex_escape(c.text) for c in row)
             for row in table.rows]
    blocks.append("\n".join([r"\begin{table}[ht]", r"\centering", r"\caption{" + latex_escape(table.title) + "}",
                             r"\begin{tabular}{" + "l" * len(table.headers) + "}", r"\hline", *body,
                             r"\hline", r"\end{tabular}", r"\end{table}"]))
  return "% significant (p < 0.05, two-sided) in bold\n" + "\n\n".join(blocks) + "\n"


def render_csv(records: list[dict]) -> str:
  out = io.StringIO()
  writer = csv.DictWriter(out, fieldnames=CSV_FIELDS, lineterminator="\n")
  writer.writeheader()
  writer.writerows(records)
  return out.getvalue()


RENDERERS = {"table": render_text, "markdown": render_markdown, "latex": render_latex}


def report(runs: list[Run], pairing: str = "first", fmt: str = "table") -> str:
  """The whole output of ``python -m fewshot.analyze`` for runs already read."""
  if fmt not in FORMATS:
    raise ConfigError(f"unknown --format {fmt!r}; choose one of {', '.join(FORMATS)}.")
  pairs = compare(runs, pairing)
  if fmt == "csv":
    return render_csv(csv_records(pairs))
  tables = [runs_table(runs)] + [measure_table(m, pairs) for m in MEASURES]
  return RENDERERS[fmt](tables)


def analyze(paths: list[str], pairing: str = "first", fmt: str = "table") -> tuple[str, str | None]:
  """Read the run directories and return the output and the protocol warning (or None)."""
  if len(paths) < 2:
    raise ConfigError(f"need at least two run directories, got {len(paths)}; usage: python -m fewshot.analyze runs/A runs/B.")
  runs = [read_run(p, Config.from_dict) for p in paths]
  return report(runs, pairing, fmt), protocol_warning(runs)


def main(argv):
  text, warning = analyze(argv[1:], FLAGS.pairs, FLAGS.format)
  if warning:
    print(warning, file=sys.stderr)
  if FLAGS.out:
    out = pathlib.Path(FLAGS.out)
    if out.is_dir():
      raise OutputError(f"--out {out} is a folder; pass a file name such as {out / 'table.md'}.")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}")
  else:
    sys.stdout.write(text)


if __name__ == "__main__":
  define_flags()
  cli.run(main)
