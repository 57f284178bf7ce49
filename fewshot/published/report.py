"""Ours beside the paper's, cell by cell, from the records of an entry's runs: what the command prints and the page
shows.

For each cell and arm: the published value, ours per seed, the interval of ours − published and the verdict under
the cell's declared margin (:mod:`fewshot.analysis.verdicts`); where the entry has two arms, their difference paired
by seed (a softmax and a DR run of one seed draw the same episodes, as far as the shorter of the two trains: exact
sign-flip p); and a pooled line across the entry's independent arms (each model and arm).
"""

from __future__ import annotations

import dataclasses
import math
import os

from fewshot.analysis import paired, verdicts
from fewshot.method_rows import METHODS
from fewshot.published import plan
from fewshot.published.registry import Cell, Entry, Schedule


@dataclasses.dataclass(frozen=True)
class CellReport:
  """One cell: the verdict of each arm (by --arm) and the arms' paired difference (second minus first)."""

  cell: Cell
  by_arm: dict[str, verdicts.Verdict]
  seeds: dict[str, tuple[int, ...]]
  paired: tuple[float, float | None, float | None, int] | None  # mean, half-width, sign-flip p, pairs
  shared: str = ""  # how much of their training the paired runs share, in words


def _verdict(measured: dict[int, tuple[float, float | None]], published: float | None, published_ci95: float | None,
             margin: float | None, entry: Entry, schedule: Schedule) -> verdicts.Verdict:
  """The verdict on per-seed ``(value, ci95)`` against a published value (a cell's, or 0 for an arm's differences)."""
  errors = [ci / verdicts.Z95 for _, ci in measured.values() if ci is not None]
  return verdicts.verdict([a for a, _ in measured.values()], published, margin=margin,
                          errors=errors if len(errors) == len(measured) else None, published_ci95=published_ci95,
                          not_comparable=entry.not_comparable, unlike=schedule.unlike)


def schedule_cells(entry: Entry, schedule: Schedule) -> tuple[Cell, ...]:
  """The cells a schedule tests: those of the models it trains."""
  return tuple(c for c in entry.cells if (schedule.models is None or c.model in schedule.models)
               and (c.schedules is None or schedule.name in c.schedules))


def cell_reports(out: str, entry: Entry, schedule: Schedule, seeds) -> list[CellReport]:
  """Every cell's report from the records under ``out`` for ``seeds``."""
  reports = []
  for cell in schedule_cells(entry, schedule):
    measured = {arm: plan.cell_measured(out, entry, schedule, cell, arm, seeds) for arm in entry.arms}
    by_arm = {arm: _verdict(m, cell.value, cell.ci95, cell.margin, entry, schedule) for arm, m in measured.items()}
    pair = None
    if len(entry.arms) == 2:
      first, second = (measured[h] for h in entry.arms)
      common = sorted(set(first) & set(second))
      if common:
        differences = [second[s][0] - first[s][0] for s in common]
        mean, half = paired.paired_interval(differences)
        pair = (mean, half, paired.sign_flip_p(differences), len(common))
    reports.append(CellReport(cell, by_arm, {h: tuple(sorted(v)) for h, v in measured.items()}, pair,
                              shared_text(out, entry, schedule, cell, common if pair else ())))
  return reports


def seeds_missing(out: str, entry: Entry, schedule: Schedule, seeds=plan.SEEDS) -> dict[str, list[int]]:
  """{arm: the seeds of ``seeds`` for which some model of the schedule has no finished tested run (its
  ``results.json``)}, for the arms that lack some: what a page built while a schedule's units still train says.
  """
  stage = plan.tested_stage(entry, schedule)
  missing = {}
  for arm in entry.arms:
    lacking = [s for s in seeds if any(plan.read_json(os.path.join(plan.run_dir(out, entry, schedule, m, arm, stage, s),
                                                                   "results.json")) is None
                                       for m in entry.models_of(schedule))]
    if lacking:
      missing[arm] = lacking
  return missing


def counted(n: int, noun: str) -> str:
  """``1 seed``, ``3 seeds``."""
  return f"{n} {noun}{'' if n == 1 else 's'}"


def shared_text(out: str, entry: Entry, schedule: Schedule, cell: Cell, seeds) -> str:
  """What the paired runs of ``seeds`` share: every episode where each pair trained equally long, else their first
  ones (a seed's two arms draw the same episodes; one that stops later trains on where the other stopped).
  """
  model = entry.model(cell.model)
  lengths = [[plan.trained_length(out, entry, schedule, model, h, s) for h in entry.arms] for s in seeds]
  if not lengths or any(None in pair for pair in lengths):
    return ""
  if all(len(set(pair)) == 1 for pair in lengths):
    return "each pair trained the same episodes"
  unequal = [pair for pair in lengths if len(set(pair)) > 1]
  gaps, firsts = [abs(a - b) for a, b in unequal], [min(pair) for pair in unequal]
  return (f"{len(unequal)} of {len(lengths)} pairs differ in length by {value_range(gaps)} episodes and share only their "
          f"first {value_range(firsts)}")


def value_range(values) -> str:
  low, high = min(values), max(values)
  return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def arm_verdicts(out: str, entry: Entry, schedule: Schedule, seeds) -> list[verdicts.Verdict]:
  """Each independent arm's verdict (a model and a arm; the model's cells share its runs, so each seed's
  differences from the published values are averaged over them, under the smallest of their margins).
  """
  arms = []
  for model in {c.model: None for c in schedule_cells(entry, schedule) if c.value is not None}:
    cells = [c for c in schedule_cells(entry, schedule) if c.model == model and c.value is not None]
    for arm in entry.arms:
      measured = [plan.cell_measured(out, entry, schedule, c, arm, seeds) for c in cells]
      common = sorted(set.intersection(*(set(m) for m in measured)))
      if not common:
        continue
      mean_difference = {s: (sum(m[s][0] - c.value for m, c in zip(measured, cells)) / len(cells),
                             _mean_error(m[s][1] for m in measured)) for s in common}
      margins = [c.margin for c in cells if c.margin is not None]
      arms.append(_verdict(mean_difference, 0.0, _mean_error(c.ci95 for c in cells),
                           min(margins) if margins else None, entry, schedule))
  return arms


def _mean_error(ci95s) -> float | None:
  """The 95% half-width of a mean over cells measured on their own test episodes (None where one is missing)."""
  values = list(ci95s)
  if not values or any(v is None for v in values):
    return None
  return math.sqrt(sum(v * v for v in values)) / len(values)


def pooled(out: str, entry: Entry, schedule: Schedule, seeds) -> verdicts.Verdict | None:
  """The entry's pooled verdict across its independent arms (:func:`verdicts.pooled`), None with fewer than two."""
  arms = arm_verdicts(out, entry, schedule, seeds)
  margins = [a.margin for a in arms if a.margin is not None]
  return verdicts.pooled(arms, min(margins) if margins else None, unlike=schedule.unlike)


def arm_label(entry: Entry, arm: str) -> str:
  """What the page calls a arm's runs: the model's name (``ProtoNet_DR``; ``MAML`` for a meta-learned entry)."""
  return METHODS[entry.options.get("method", "protonet")].model_name({**entry.options, **entry.arms[arm]})


def ours_text(v: verdicts.Verdict) -> str:
  if v.mean is None:
    return "no runs measured"
  interval = "" if v.ci95 is None else f" ± {v.ci95:.2f}"
  seeds = ", ".join(f"{x:.2f}" for x in v.values)
  return f"{v.mean:.2f}{interval} ({counted(len(v.values), 'seed')}: {seeds})"


def difference_text(v: verdicts.Verdict) -> str:
  """ours − published with its 95% interval and the smallest margin the design establishes."""
  if v.interval95 is None:
    return "–"
  low, high = v.interval95
  return f"{v.difference:+.2f} [{low:+.2f}, {high:+.2f}]; smallest margin ±{v.smallest_margin:.2f}"


def published_text(cell: Cell) -> str:
  """The published value (± its interval), or what the paper's text states where its number is not at hand."""
  if cell.value is None:
    return f"– (the paper's text: {cell.direction})" if cell.direction else "–"
  code = "" if cell.code_value is None else f" (code, third-party: {cell.code_value:.2f})"
  return f"{cell.value:.2f}" + ("" if cell.ci95 is None else f" ± {cell.ci95:.2f}") + code


def pooled_text(v: verdicts.Verdict | None) -> str | None:
  if v is None:
    return None
  margin = "no margin" if v.margin is None else f"margin ±{v.margin:g}"
  return (f"pooled over the independent arms (each model and arm; a model's cells averaged per seed): ours − "
          f"published {difference_text(v)}, {margin}: {v.words}")


def format_reports(entry: Entry, schedule: Schedule, reports: list[CellReport],
                   pool: verdicts.Verdict | None = None) -> str:
  """The command's printout: the source, the schedule, then a block per cell, then the pooled line."""
  lines = [f"{entry.name}: {entry.source}", f"schedule {schedule.name}: {schedule.about}"]
  if entry.not_comparable:
    lines.append(f"not comparable: {entry.not_comparable}")
  for report in reports:
    margin = "" if report.cell.margin is None else f" (margin ±{report.cell.margin:g})"
    lines.append(f"{report.cell.name}: published {published_text(report.cell)}{margin}")
    for arm, v in report.by_arm.items():
      lines.append(f"  {arm_label(entry, arm)}: {ours_text(v)}; ours − published {difference_text(v)}: {v.words}")
    if report.paired is not None:
      mean, half, p, n = report.paired
      interval = "" if half is None else f" ± {half:.2f}"
      p_text = "" if p is None else f", sign-flip p = {p:.3g} (its floor at {n} pairs: {2 / 2 ** n:.3g})"
      first, second = (arm_label(entry, h) for h in entry.arms)
      shared = f"; {report.shared}" if report.shared else ""
      lines.append(f"  {second} − {first} paired by seed: {mean:+.2f}{interval} points ({counted(n, 'pair')}{p_text}{shared})")
  said = pooled_text(pool)
  return "\n".join(lines + ([said] if said else []))
