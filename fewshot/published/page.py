"""``docs/reproductions.md``: every registered entry with ours beside the paper's, built from kept records alone.

The records (each run's ``config.json``, ``metrics.jsonl``, ``results.json`` and evaluate measurements, no
checkpoints) are kept in the layout the command writes (:mod:`fewshot.published.plan`), so the page reads them as the
command does and rebuilds byte for byte: ``python -m fewshot.reproduce --page`` (``--keep`` copies a run folder's
records there first).
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil

from fewshot.errors import ConfigError
from fewshot.published import plan, report
from fewshot.published.registry import Entry, Schedule

RECORD_FILES = ("config.json", "metrics.jsonl", "results.json")
# A run's measurements: evaluate's (test_*.json) and the scores of Lake-style runs drawn for it (plan.drawn_runs_name).
MEASUREMENT_PREFIXES = ("test_", "lake_drawn_")
COMMAND = "python -m fewshot.reproduce --page"


def _record(name: str) -> bool:
  return name in RECORD_FILES or (name.startswith(MEASUREMENT_PREFIXES) and name.endswith(".json"))


def keep(out: str, records: str) -> list[str]:
  """Copy every finished run's records under ``out`` into ``records`` (same layout); returns the run folders
  copied. A kept record is never replaced by another: one that differs is refused in one line, before anything is
  copied (a seed trained again elsewhere is another run, not the kept one).
  """
  copies = []
  for folder, _, files in sorted(os.walk(out)):
    if "config.json" not in files or "results.json" not in files:
      continue
    target = os.path.join(records, os.path.relpath(folder, out))
    copies += [(os.path.join(folder, name), os.path.join(target, name)) for name in sorted(files) if _record(name)]
  for source, kept in copies:
    if os.path.exists(kept) and not filecmp.cmp(source, kept, shallow=False):
      raise ConfigError(f"{kept} is kept and {source} differs from it; a kept record is never replaced: move one of "
                        "them aside (git checkout -- docs/reproductions restores the kept one).")
  for source, kept in copies:
    os.makedirs(os.path.dirname(kept), exist_ok=True)
    if not os.path.exists(kept):
      shutil.copyfile(source, kept)
  return sorted({os.path.dirname(kept) for _, kept in copies})


def _cost(records: str, entry: Entry, schedule: Schedule) -> tuple[float, list[str]]:
  """Training and validation time of the kept runs (hours, their metrics rows' seconds; a seed group's rows each
  hold the group's time, so it counts once per group) and where they ran (backend, device, commit).
  """
  seconds, where, groups = 0.0, set(), set()
  for folder, _, files in sorted(os.walk(os.path.join(records, entry.name, schedule.name))):
    if "metrics.jsonl" not in files or "config.json" not in files:
      continue
    config = plan.read_json(os.path.join(folder, "config.json")) or {}
    made = config.get("provenance", {})
    where.add(f"{made.get('backend')} ({made.get('device_kind')}), commit {str(made.get('git_commit'))[:7]}")
    group = (os.path.dirname(folder), made.get("started"))
    if group in groups:
      continue
    groups.add(group)
    with open(os.path.join(folder, "metrics.jsonl")) as f:
      seconds += sum(json.loads(line).get("seconds", 0.0) for line in f if line.strip())
  return seconds / 3600, sorted(where)


def _cell_table(entry: Entry, reports: list[report.CellReport]) -> list[str]:
  heads = [report.head_label(entry, h) for h in entry.heads]
  header = ["cell", "published", *[f"{h} (ours)" for h in heads], *[f"{h} verdict" for h in heads]]
  if len(heads) == 2:
    header.append(f"{heads[1]} − {heads[0]} (paired by seed)")
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for r in reports:
    published = report.published_text(r.cell)
    ours = [report.ours_text(v) for v in r.by_head.values()]
    words = [v.words for v in r.by_head.values()]
    row = [r.cell.name, published, *ours, *words]
    if len(heads) == 2:
      if r.paired is None:
        row.append("–")
      else:
        mean, half, p, n = r.paired
        interval = "" if half is None else f" ± {half:.2f}"
        row.append(f"{mean:+.2f}{interval} ({n} pairs, sign-flip p = {p:.3g}, floor {2 / 2 ** n:.3g})")
    lines.append("| " + " | ".join(row) + " |")
  return lines


def entry_section(records: str, entry: Entry) -> list[str]:
  """An entry's section: source, protocol, what differs, and per schedule with records, its table and cost."""
  lines = [f"## {entry.name}", "", f"**Source**: {entry.source}.", "", f"**Protocol as published**: {entry.protocol}",
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
    lines += [f"### Schedule `{schedule.name}`{'' if schedule.published else ' (shorter than the paper’s)'}", "",
              f"{schedule.about}. Seeds {', '.join(map(str, seeds))}; {hours:.2f} h of training and validation "
              f"on {'; '.join(where)}.", ""]
    lines += _cell_table(entry, report.cell_reports(records, entry, schedule, seeds)) + [""]
  if not ran and entry.accelerator:
    lines += [f"Not run here: its schedule needs an accelerator (`python -m fewshot.reproduce {entry.name} --data_dir "
              "DIR` on a GPU or TPU, DIR holding " + f"{entry.needs}).", ""]
  elif not ran and not entry.not_comparable:
    lines += [f"Not run here: it needs {entry.needs} (`python -m fewshot.reproduce {entry.name} --data_dir DIR`).",
              ""]
  if entry.comparisons:
    lines += ["Comparison points (other methods, same task):", ""]
    lines += [f"- {c.name}: {c.value:.1f}% ({c.source}{'' if c.verified else '; not verified in the paper text'})"
              for c in entry.comparisons] + [""]
  return lines


def build(records: str, entries: list[Entry]) -> str:
  """The page's text from the records kept in ``records``."""
  lines = ["# Published results beside ours", "",
           f"Built by `{COMMAND}` from the records kept in `docs/reproductions/` (no checkpoints); each run is an "
           "ordinary run directory that `evaluate`, `analyze` and `plot` read. Ours: mean ± 95% t-interval over seeds, "
           "the per-seed values, and p, the two-sided p of the published value as one more seed of ours (the "
           "prediction interval, Student t). Verdicts, in fixed words: *matches* (p ≥ 0.05), *above* or *below by x "
           "points*, *(shorter schedule)* where ours trained less than the paper, *not comparable: why*. The two "
           "heads of one seed share every episode, so their difference is paired by seed (exact sign-flip p, whose "
           "floor with n pairs is 2/2^n).", ""]
  for entry in entries:
    lines += entry_section(records, entry)
  return "\n".join(lines).rstrip("\n") + "\n"
