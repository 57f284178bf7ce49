"""Ours beside the paper's, cell by cell, from the records of an entry's runs: what the command prints and the page
shows.

For each cell and head: the published value, ours per seed, their mean ± 95% t-interval, the prediction test's p and
its verdict (:mod:`fewshot.analysis.verdicts`); where the entry has two heads, their difference paired by seed (a
softmax and a DR run of one seed share every episode: exact sign-flip p).
"""

from __future__ import annotations

import dataclasses

from fewshot.analysis import paired, verdicts
from fewshot.choices import method_model_name, model_name
from fewshot.published.plan import cell_values
from fewshot.published.registry import Cell, Entry, Schedule


@dataclasses.dataclass(frozen=True)
class CellReport:
  """One cell: the verdict of each head (by --head) and the heads' paired difference (second minus first)."""

  cell: Cell
  by_head: dict[str, verdicts.Verdict]
  seeds: dict[str, tuple[int, ...]]
  paired: tuple[float, float | None, float | None, int] | None  # mean, half-width, sign-flip p, pairs


def cell_reports(out: str, entry: Entry, schedule: Schedule, seeds) -> list[CellReport]:
  """Every cell's report from the records under ``out`` for ``seeds``."""
  reports = []
  for cell in entry.cells:
    values = {head: cell_values(out, entry, schedule, cell, head, seeds) for head in entry.heads}
    by_head = {head: verdicts.verdict(list(v.values()), cell.value, shorter=not schedule.published,
                                      not_comparable=entry.not_comparable) for head, v in values.items()}
    pair = None
    if len(entry.heads) == 2:
      first, second = (values[h] for h in entry.heads)
      common = sorted(set(first) & set(second))
      if common:
        differences = [second[s] - first[s] for s in common]
        mean, half = paired.paired_interval(differences)
        pair = (mean, half, paired.sign_flip_p(differences), len(common))
    reports.append(CellReport(cell, by_head, {h: tuple(sorted(v)) for h, v in values.items()}, pair))
  return reports


def head_label(entry: Entry, head: str) -> str:
  """What the page calls a head's runs: the model's name (``ProtoNet_DR``; ``MAML`` for a meta-learned entry)."""
  method = entry.options.get("method", "protonet")
  if method != "protonet":
    return method_model_name(method, entry.options.get("first_order", False), entry.options.get("meta_head", "linear"))
  return model_name(entry.options.get("classifier", "proto"), head, entry.options.get("distance", "squared_euclidean"))


def ours_text(v: verdicts.Verdict) -> str:
  if v.mean is None:
    return "no runs measured"
  interval = "" if v.ci95 is None else f" ± {v.ci95:.2f}"
  seeds = ", ".join(f"{x:.2f}" for x in v.values)
  p = "" if v.p is None else f", p = {v.p:.3g}"
  return f"{v.mean:.2f}{interval} ({len(v.values)} seeds: {seeds}{p})"


def published_text(cell: Cell) -> str:
  """The published value (± its interval), or what the paper's text states where its number is not at hand."""
  if cell.value is None:
    return f"– (the paper's text: {cell.direction})" if cell.direction else "–"
  return f"{cell.value:.2f}" + ("" if cell.ci95 is None else f" ± {cell.ci95:.2f}")


def format_reports(entry: Entry, schedule: Schedule, reports: list[CellReport]) -> str:
  """The command's printout: the source, the schedule, then a block per cell."""
  lines = [f"{entry.name}: {entry.source}", f"schedule {schedule.name}: {schedule.about}"]
  if entry.not_comparable:
    lines.append(f"not comparable: {entry.not_comparable}")
  for report in reports:
    published = published_text(report.cell)
    lines.append(f"{report.cell.name}: published {published}")
    for head, v in report.by_head.items():
      lines.append(f"  {head_label(entry, head)}: {ours_text(v)}: {v.words}")
    if report.paired is not None:
      mean, half, p, n = report.paired
      interval = "" if half is None else f" ± {half:.2f}"
      p_text = "" if p is None else f", sign-flip p = {p:.3g} (its floor at {n} pairs: {2 / 2 ** n:.3g})"
      first, second = (head_label(entry, h) for h in entry.heads)
      lines.append(f"  {second} − {first} paired by seed: {mean:+.2f}{interval} points ({n} pairs{p_text})")
  return "\n".join(lines)
