"""Tables of statistics as plain text, GitHub markdown, LaTeX or CSV: what analysis prints.

A :class:`Table` holds formatted :class:`Cell` values; a significant p-value is marked by
each renderer in its own way (``*`` in text, bold in markdown and LaTeX).
"""

from __future__ import annotations

import csv
import dataclasses
import io

MISSING = "—"


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


_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "±": r"$\pm$", "—": "--", "<": r"$<$", ">": r"$>$"}


def latex_escape(text: str) -> str:
  return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in text)


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


def render_csv(records: list[dict], fields: tuple[str, ...]) -> str:
  out = io.StringIO()
  writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
  writer.writeheader()
  writer.writerows(records)
  return out.getvalue()


RENDERERS = {"table": render_text, "markdown": render_markdown, "latex": render_latex}
