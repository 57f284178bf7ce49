"""Tables of statistics as plain text, GitHub markdown, LaTeX or CSV: what analysis prints.

A :class:`Table` holds formatted :class:`Cell` values; a significant p-value is marked by
each renderer in its own way (``*`` in text, bold in markdown and LaTeX).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import re
import unicodedata

from fewshot.analysis import stats

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


def format_mean_interval(values, unit: str = "") -> str:
  """The mean of the finite values (one per seed) ± the half-width of its 95% Student-t interval: ``91.23 ± 1.45``;
  the mean alone for one value, ``—`` for none.
  """
  finite = [float(v) for v in values if v is not None and math.isfinite(v)]
  if not finite:
    return MISSING
  mean, half = stats.t_interval(finite)
  return f"{mean:.2f}{unit}" + ("" if half is None else f" ± {half:.2f}{unit}")


def group_line(seeds: tuple[int, ...], held: int, measures: dict[str, list[float | None]]) -> str:
  """One line after a seed group's per-seed results: each measure's mean ± 95% Student-t interval across the seeds
  (values in %; a run's missing value is left out), e.g.
  ``seed group of 3 seeds: test accuracy 91.23% ± 1.45% (mean ± 95% t-interval)``.
  """
  whose = f"{len(seeds)} seeds" if held == len(seeds) else f"{len(seeds)} seeds ({held} of them this process's)"
  shown = ", ".join(f"{name} {format_mean_interval(values, '%')}" for name, values in measures.items())
  return f"seed group of {whose}: {shown} (mean ± 95% t-interval)"


def _width(text: str) -> int:
  """Columns a cell takes in a terminal: a combining accent (the hat of α̂) takes none."""
  return sum(not unicodedata.combining(ch) for ch in text)


def _any_significant(tables: list[Table]) -> bool:
  """Whether a cell is marked: the key to the mark is printed only then."""
  return any(cell.significant for table in tables for row in table.rows for cell in row)


def _numeric(text: str) -> bool:
  """A cell LaTeX right-aligns: a number, with a sign, a ± interval, a % or a significance mark (or empty)."""
  return bool(re.fullmatch(r"[-+−]?(\d[\d.,e+-]*|—)?( ± [\d.]+)?%?", text.strip())) and any(ch.isdigit() for ch in text)


def render_text(tables: list[Table]) -> str:
  """Aligned plain-text tables; a significant p-value ends in ``*``."""
  blocks = []
  for table in tables:
    lines = [list(table.headers)] + [[c.text + ("*" if c.significant else "") for c in row] for row in table.rows]
    widths = [max(_width(line[k]) for line in lines) for k in range(len(table.headers))]
    text = ["  ".join(cell + " " * (w - _width(cell)) for cell, w in zip(line, widths)).rstrip() for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    blocks.append("\n".join([table.title] + text))
  return "\n\n".join(blocks) + ("\n\n* p < 0.05 (two-sided)\n" if _any_significant(tables) else "\n")


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
  return "\n\n".join(blocks) + ("\n\nBold: p < 0.05 (two-sided).\n" if _any_significant(tables) else "\n")


# pdflatex's special characters, then the non-ASCII ones analysis writes (its headers' minus, ±, α̂, ψ, dashes),
# as LaTeX: the output of --format latex is ASCII, so it compiles without inputenc or a Unicode engine.
_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"$<$",
                  ">": r"$>$", "|": r"\textbar{}", "±": r"$\pm$", "−": r"$-$", "—": "--", "–": "--", "…": r"\ldots{}",
                  "×": r"$\times$", "·": r"$\cdot$", "≤": r"$\leq$", "≥": r"$\geq$", "α̂": r"$\hat\alpha$",
                  "α": r"$\alpha$", "θ": r"$\theta$", "ψ": r"$\psi$", "ρ": r"$\rho$", "σ": r"$\sigma$",
                  "²": r"$^2$"}
# Longest first, so that α followed by a combining circumflex is α̂, not α and a stray accent.
_LATEX_PATTERN = re.compile("|".join(re.escape(k) for k in sorted(_LATEX_ESCAPES, key=len, reverse=True)))


# LaTeX's accent commands, by the combining mark that NFD splits an accented letter into.
_ACCENTS = {"\u0300": "`", "\u0301": "'", "\u0302": "^", "\u0303": "~", "\u0304": "=", "\u0306": "u", "\u0307": ".",
            "\u0308": '"', "\u030a": "r", "\u030b": "H", "\u030c": "v", "\u0327": "c", "\u0328": "k"}


def _ascii(text: str) -> str:
  r"""What is left after the escapes, losslessly in ASCII (two paths stay two labels): an accented letter as LaTeX's
  accent command (a path's é as \'{e}), any other character as its code point, [U+8FD0].
  """
  out = []
  for ch in unicodedata.normalize("NFD", text):
    if ch.isascii():
      out.append(ch)
    elif ch in _ACCENTS and out and out[-1].isalpha():
      out[-1] = f"\\{_ACCENTS[ch]}{{{out[-1]}}}"
    else:
      out.append(f"[U+{ord(ch):04X}]")
  return "".join(out)


def latex_escape(text: str) -> str:
  """``text`` as ASCII LaTeX: its special characters escaped, the symbols analysis writes as LaTeX commands."""
  parts, end = [], 0
  for match in _LATEX_PATTERN.finditer(text):
    parts += [_ascii(text[end:match.start()]), _LATEX_ESCAPES[match.group()]]
    end = match.end()
  return "".join(parts + [_ascii(text[end:])])


def render_latex(tables: list[Table]) -> str:
  """One ``table`` environment per table, booktabs rules (the booktabs package), numeric columns right-aligned;
  significant p-values in bold.
  """
  blocks = []
  for table in tables:
    def line(cells):
      return " & ".join(cells) + r" \\"
    blank = lambda text: text.strip() in ("", MISSING)  # noqa: E731  (a missing value aligns as its column does)
    columns = "".join("r" if all(_numeric(row[k].text) or blank(row[k].text) for row in table.rows)
                      and any(_numeric(row[k].text) for row in table.rows) else "l" for k in range(len(table.headers)))
    body = [line(latex_escape(h) for h in table.headers), r"\midrule"]
    body += [line(rf"\textbf{{{latex_escape(c.text)}}}" if c.significant else latex_escape(c.text) for c in row)
             for row in table.rows]
    blocks.append("\n".join([r"\begin{table}[ht]", r"\centering", r"\caption{" + latex_escape(table.title) + "}",
                             r"\begin{tabular}{" + columns + "}", r"\toprule", *body,
                             r"\bottomrule", r"\end{tabular}", r"\end{table}"]))
  key = "% significant (p < 0.05, two-sided) in bold\n" if _any_significant(tables) else ""
  return "% needs \\usepackage{booktabs}\n" + key + "\n\n".join(blocks) + "\n"


def render_csv(records: list[dict], fields: tuple[str, ...]) -> str:
  out = io.StringIO()
  writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
  writer.writeheader()
  writer.writerows(records)
  return out.getvalue()


RENDERERS = {"table": render_text, "markdown": render_markdown, "latex": render_latex}


def with_verdict(line: str, text: str, fmt: str) -> str:
  """Two arms' verdict line before their tables rendered as ``fmt`` (a comment in LaTeX, so the file still
  compiles).
  """
  if fmt == "latex":  # ASCII, after the preamble's comment line (pdflatex reads the file as it is)
    first, _, rest = text.partition("\n")
    return f"{first}\n% {line.replace('−', '-').replace('±', '+/-')}\n{rest}"
  return (f"**{line}**\n\n" if fmt == "markdown" else f"{line}\n\n") + text
