"""``docs/reproductions.md``: every registered entry with ours beside the paper's, built from kept records alone.

The records (each run's ``config.json``, ``metrics.jsonl``, ``results.json`` and evaluate measurements, no
checkpoints) are kept in the layout the command writes (:mod:`fewshot.published.plan`), so the page reads them as the
command does and rebuilds byte for byte: ``python -m fewshot.reproduce --page`` (``--keep`` copies a run folder's
records there first, :mod:`fewshot.published.kept`).
"""

from __future__ import annotations

import json
import os

from fewshot.published import kept, lake_report, plan, report
from fewshot.published.registry import Entry, Schedule

COMMAND = "python -m fewshot.reproduce --page"


def _cost(records: str, entry: Entry, schedule: Schedule) -> tuple[float, list[str]]:
  """Training and validation time of the kept runs (hours, their metrics rows' seconds; a seed group's rows each
  hold the group's time, so it counts once per group) and where each arm ran (backend, device, CPU, commit).
  """
  seconds, where, groups = 0.0, {}, set()
  root = plan.schedule_folder(records, entry, schedule)
  for folder, _, files in sorted(os.walk(root)):
    if "metrics.jsonl" not in files or "config.json" not in files:
      continue
    config = plan.read_json(os.path.join(folder, "config.json")) or {}
    made = config.get("provenance", {})
    cpu = made.get("cpu", "CPU model not recorded")  # recorded since 2026-12-02
    machine = f"{made.get('backend')} ({made.get('device_kind')}; {cpu}), commit {str(made.get('git_commit'))[:7]}"
    where.setdefault(machine, set()).add(os.path.relpath(folder, root).split(os.sep)[0])
    group = (os.path.dirname(folder), made.get("started"))
    if group in groups:
      continue
    groups.add(group)
    with open(os.path.join(folder, "metrics.jsonl")) as f:
      seconds += sum(json.loads(line).get("seconds", 0.0) for line in f if line.strip())
  return seconds / 3600, [f"{', '.join(sorted(arms))} on {machine}" for machine, arms in sorted(where.items())]


def _cell_table(entry: Entry, reports: list[report.CellReport]) -> list[str]:
  """A row per cell and arm: published, ours, the interval of ours − published, the verdict; then the arms'
  difference paired by seed, a row per cell.
  """
  header = ["cell", "published", "margin", "arm", "ours: mean ± 95% (seeds)", "ours − published [95%]; smallest "
            "margin", "verdict"]
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for r in reports:
    margin = "–" if r.cell.margin is None else f"±{r.cell.margin:g}"
    for arm, v in r.by_arm.items():
      lines.append("| " + " | ".join([r.cell.name, report.published_text(r.cell), margin, report.arm_label(entry, arm),
                                      report.ours_text(v), report.difference_text(v), v.words]) + " |")
  pairs = [r for r in reports if r.paired is not None]
  if pairs:
    first, second = (report.arm_label(entry, h) for h in entry.arms)
    lines += ["", f"| cell | {second} − {first}, paired by seed | what the pairs share |", "|---|---|---|"]
    for r in pairs:
      mean, half, p, n = r.paired
      interval = "" if half is None else f" ± {half:.2f}"
      lines.append(f"| {r.cell.name} | {mean:+.2f}{interval} ({report.counted(n, 'pair')}, sign-flip p = {p:.3g}, floor "
                   f"{2 / 2 ** n:.3g}) | {r.shared or '–'} |")
  return lines


def _lengths(records: str, entry: Entry, schedule: Schedule, seeds) -> str:
  """The tested runs' lengths and the learning-rate halvings they applied, from their configs."""
  configs = [plan.read_json(os.path.join(plan.run_dir(records, entry, schedule, m, h, plan.tested_stage(entry, schedule), s),
                                         "config.json")) for m in entry.models_of(schedule) for h in entry.arms for s in seeds]
  configs = [c for c in configs if c and "episodes" in c]
  if not configs:
    return ""
  lengths = sorted(int(c["episodes"]) for c in configs)
  every = {c.get("lr_halve_every") for c in configs}
  halvings = sorted({(int(c["episodes"]) - 1) // int(c["lr_halve_every"]) for c in configs
                     if c.get("lr_halve_every")})
  times = {0: "never halved", 1: "halved once"}
  halved = (times.get(halvings[0], f"halved {halvings[0]} times") if len(halvings) == 1 else
            f"halved {report.value_range(halvings)} times") if halvings else "constant"
  spread = f"{lengths[0]:,}" if lengths[0] == lengths[-1] else (
      f"{lengths[0]:,}–{lengths[-1]:,} (mean {sum(lengths) / len(lengths):,.0f})")
  rate = f" every {', '.join(f'{e:,}' for e in sorted(every))} episodes" if None not in every else ""
  runs = "run" if len(lengths) == 1 else "runs"
  return f" The {len(lengths)} tested {runs} trained {spread} episodes; Adam's rate{rate}: {halved}."


def _missing(records: str, entry: Entry, schedule: Schedule) -> str:
  """Which of the command's seeds (0–2) a schedule still lacks, per arm: its other units are training."""
  missing = report.seeds_missing(records, entry, schedule)
  if not missing:
    return ""
  lacking = "; ".join(f"{report.arm_label(entry, arm)} {'seed' if len(s) == 1 else 'seeds'} {', '.join(map(str, s))}"
                      for arm, s in missing.items())
  return (f" **Not on the page yet** (of the command's seeds {', '.join(map(str, plan.SEEDS))}): {lacking}; they "
          "join it when their runs finish.")


def _episode_tables(records: str, entry: Entry, schedule: Schedule, seeds) -> list[str]:
  """The verdict table of an entry scored on test episodes, the arms paired by seed, and the pooled line."""
  lines = _cell_table(entry, report.cell_reports(records, entry, schedule, seeds))
  said = report.pooled_text(report.pooled(records, entry, schedule, seeds))
  return lines + (["", said[0].upper() + said[1:] + "."] if said else [])


def _lake_tables(records: str, entry: Entry, schedule: Schedule, seeds) -> list[str]:
  return lake_report.table_lines(records, entry, schedule, seeds, report.arm_label)


TABLES = {"episodes": _episode_tables, "lake_runs": _lake_tables}  # by Entry.scored_on


def entry_section(records: str, entry: Entry) -> list[str]:
  """An entry's section: source, protocol, what differs, and per schedule with records, its table and cost."""
  lines = [f"## {entry.name}", "", f"**Source**: {entry.source}.", "", f"**Protocol as the paper states it**: {entry.protocol}",
           ""]
  if entry.code:
    lines += [f"**As the authors' code runs it**: {entry.code}", ""]
  if entry.code_runs:
    lines += [f"**A second reference point**: the *code* figures beside the published ones are {entry.code_runs}.",
              ""]
  if entry.not_comparable:
    lines += [f"**Not comparable**: {entry.not_comparable}", ""]
  if entry.differences:
    lines += ["**What fewshot does otherwise**:", "", *[f"- {d}" for d in entry.differences], ""]
  lines += [f"- {note}" for note in entry.notes] + ([""] if entry.notes else [])
  ran = False
  for schedule in entry.schedules:
    seeds = plan.seeds_found(records, entry, schedule)
    if not seeds:
      continue
    ran = True
    hours, where = _cost(records, entry, schedule)
    lines += [f"### Schedule `{schedule.name}`{'' if schedule.published else f' ({schedule.unlike})'}", "",
              f"{schedule.about}. Seeds {', '.join(map(str, seeds))}; {hours:.2f} h of training and validation; "
              f"ran: {'; '.join(where)}.{_lengths(records, entry, schedule, seeds)}{_missing(records, entry, schedule)}",
              ""]
    lines += TABLES[entry.scored_on](records, entry, schedule, seeds) + [""]
  if not ran and entry.accelerator:
    lines += [f"Not run here: its schedule needs an accelerator (`python -m fewshot.reproduce {entry.name} --data_dir "
              "DIR` on a GPU or TPU, DIR holding " + f"{entry.needs}).", ""]
  elif not ran and not entry.not_comparable:
    runnable = next(s for s in entry.schedules if s.options is not None)
    named = "" if runnable is entry.schedules[0] else f" --schedule {runnable.name}"
    lines += [f"Not run here: it needs {entry.needs} (`python -m fewshot.reproduce {entry.name}{named} --data_dir "
              "DIR`).", ""]
  if entry.comparisons and not ran:
    lines += ["Comparison points (other methods, same task):", ""]
    lines += [f"- {c.name}: {c.value:.1f}% ({c.source}{'' if c.verified else '; not verified in the paper text'})"
              for c in entry.comparisons] + [""]
  return lines


def build(records: str, entries: list[Entry]) -> str:
  """The page's text from the records kept in ``records``, each checked first (:func:`kept.check_kept`): a one-line
  ``ConfigError`` where one cannot be stood on.
  """
  kept.check_kept(records, {e.name: e for e in entries})
  lines = ["# Published results beside ours", "",
           f"Built by `{COMMAND}` from the records kept in `docs/reproductions/` (no checkpoints); each run is an "
           "ordinary run directory that `evaluate`, `analyze` and `plot` read.", "",
           "**How a cell is judged** (`fewshot.analysis.verdicts`). Each cell declares, with its entry and before its "
           "runs, an equivalence margin δ in points. Ours: the mean ± 95% t-interval over seeds and the per-seed "
           "values. ours − published: its 95% interval, whose standard error is the seeds' standard deviation "
           "(floored at the test episodes' own standard error) over √n, with the published interval's standard error "
           "added where the paper gives one (Student t, n − 1 degrees of freedom). Verdicts, in fixed words: "
           "*equivalent within ±δ* where the 90% interval lies inside ±δ (two one-sided tests); *below by x* / *above "
           "by x* where the 95% interval excludes 0; *inconclusive at n seeds* otherwise; *not the published "
           "schedule:* (or words that name how else the runs differ from the paper's protocol) before the words of "
           "a schedule that is not the paper's, which never reads *equivalent*; *not "
           "comparable: why*. The smallest margin is the δ this design (its seeds and spread) would establish were "
           "ours exactly the published value. The pooled line pools the entry's independent arms (each model and "
           "arm; a model's cells share its runs, so their differences are averaged per seed) by inverse variance. "
           "The two arms of one seed draw the same episodes; where their runs stopped at different lengths they "
           "share only the first ones (each table says), and their difference is paired by seed (exact sign-flip p, "
           "whose floor with n pairs is 2/2^n).", ""]
  for entry in entries:
    lines += entry_section(records, entry)
  return "\n".join(lines).rstrip("\n") + "\n"
