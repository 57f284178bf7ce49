"""Ours on Lake's one-shot runs beside the field's figures: numbers side by side on the same items, never a verdict.

Each seed's score is a count of correct items, so its interval is binomial (Clopper–Pearson, 95%); across seeds the
mean ± 95% t-interval. The field's figures (people, BPL, other methods) were measured on Lake's 20 runs, so they are
set beside ours on those 400 items only; runs of his design (:mod:`fewshot.episodic.lake_design`) are other items of
the same kind, and their difference from the official 20, paired by seed, says how typical the 20 are for a model.
"""

from __future__ import annotations

import dataclasses

from fewshot.analysis import paired, stats
from fewshot.published import plan
from fewshot.published.registry import Cell, Entry, Schedule


@dataclasses.dataclass(frozen=True)
class Score:
  """One seed's score on a cell's runs: items correct of items, accuracy in %."""

  seed: int
  correct: int
  items: int

  @property
  def accuracy(self) -> float:
    return 100.0 * self.correct / self.items


def binomial_interval(correct: int, items: int) -> tuple[float, float]:
  """The exact (Clopper–Pearson) 95% interval of an accuracy of ``correct`` of ``items``, in %.

  >>> [round(x, 2) for x in binomial_interval(373, 400)]
  [90.36, 95.48]
  """
  import scipy.stats

  found = scipy.stats.binomtest(correct, items).proportion_ci(0.95, method="exact")
  return 100.0 * found.low, 100.0 * found.high


def scores(out: str, entry: Entry, schedule: Schedule, cell: Cell, arm: str, seeds) -> list[Score]:
  """The seeds' scores on a cell's runs, from each tested run's record (seeds without one are left out)."""
  model = entry.model(cell.model)
  found = []
  for seed in seeds:
    workdir = plan.run_dir(out, entry, schedule, model, arm, plan.tested_stage(entry, schedule), seed)
    record = plan.cell_record(workdir, entry, model, cell)
    measured = plan.read_json(record) if record else None
    if measured is not None:
      rule = measured["rules"]["head"]
      found.append(Score(seed, int(rule["correct"]), int(rule["items"])))
  return found


def _seeds_text(found: list[Score]) -> str:
  return "; ".join(f"seed {s.seed}: {s.accuracy:.2f} [{low:.1f}, {high:.1f}]" for s in found
                   for low, high in [binomial_interval(s.correct, s.items)])


def _mean_text(found: list[Score]) -> str:
  mean, half = stats.t_interval([s.accuracy for s in found])
  return f"{mean:.2f}" + ("" if half is None else f" ± {half:.2f}") + f" ({len(found)} seeds, {found[0].items} items)"


def table_lines(out: str, entry: Entry, schedule: Schedule, seeds, arm_label) -> list[str]:
  """The schedule's table (a row per cell and arm with scores), the field's figures, and official − design."""
  lines = ["| cell | arm | ours per seed: accuracy [95% binomial] | ours: mean ± 95% t |", "|---|---|---|---|"]
  by_cell = {}
  for cell in (c for c in entry.cells if schedule.models is None or c.model in schedule.models):
    for arm in entry.arms:
      found = scores(out, entry, schedule, cell, arm, seeds)
      if found:
        by_cell[cell.name, cell.model, arm] = found
        lines.append(f"| {cell.model}: {cell.name} | {arm_label(entry, arm)} | {_seeds_text(found)} | "
                     f"{_mean_text(found)} |")
  if len(lines) == 2:
    return []
  if entry.comparisons and any(cell.test.get("lake_runs") == "official" for cell in entry.cells
                               if any(k[0] == cell.name for k in by_cell)):
    points = "; ".join(f"{c.name} {c.value:.1f}% ({c.source}{'' if c.verified else ', not verified here'})"
                       for c in entry.comparisons)
    lines += ["", f"On Lake's 20 runs, the field's benchmark and the same 400 items: {points}."]
  lines += _typical_lines(entry, by_cell, arm_label)
  return lines


def _typical_lines(entry: Entry, by_cell: dict, arm_label) -> list[str]:
  """Lake's 20 runs − runs of his design, paired by seed, per model and arm."""
  official = {c.name for c in entry.cells if c.test.get("lake_runs") == "official"}
  design = {c.name for c in entry.cells if c.test.get("lake_runs") == "design"}
  lines = []
  for (name, model, arm), found in by_cell.items():
    if name not in official:
      continue
    other = next((v for (n, m, h), v in by_cell.items() if n in design and (m, h) == (model, arm)), None)
    if other is None:
      continue
    theirs = {s.seed: s.accuracy for s in other}
    differences = [s.accuracy - theirs[s.seed] for s in found if s.seed in theirs]
    if differences:
      mean, half = paired.paired_interval(differences)
      interval = "" if half is None else f" ± {half:.2f}"
      lines.append(f"- {model}, {arm_label(entry, arm)}: Lake's 20 runs − runs of his design {mean:+.2f}"
                   f"{interval} points, paired by seed ({len(differences)} seeds).")
  return [""] + lines if lines else []
