"""How the DR page's runs were made, from their records: the machine, the commits they were trained at (and whether a
working tree was dirty), and the hours of training and validation.

    how_made(made, arms, pathlib.Path("results/omniglot"))   # the page's closing section
"""

from __future__ import annotations

import json
import pathlib
import platform


def cpu_model() -> str:
  cpuinfo = pathlib.Path("/proc/cpuinfo")
  lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
  model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.processor())
  return f"{model}, {sum(line.startswith('processor') for line in lines)} cores"


def training_minutes(runs: list) -> float:
  """An arm's minutes of training and validation. A seed group's runs share one compiled chunk, so each run's
  seconds are its group's: the runs of one group (one provenance: the process that trained them) count once.
  """
  groups = {json.dumps(run.provenance, sort_keys=True): run for run in runs}
  return sum(sum(row.get("seconds", 0.0) for row in run.rows) for run in groups.values()) / 60


def commits(arms: dict) -> list[str]:
  """Each arm's seeds by the commit they were trained at (``+dirty``: from a working tree with uncommitted changes),
  and the pairs whose S and DR runs were trained at different commits.
  """
  commit = lambda run: str((run.provenance or {}).get("git_commit") or "unknown")  # noqa: E731
  short = lambda c: c[:7] + ("+dirty" if c.endswith("+dirty") else "")  # noqa: E731
  lines, split = [], []
  for setting, heads in arms.items():
    for head, runs in heads.items():
      by = {}
      for run in runs:
        by.setdefault(short(commit(run)), []).append(str(run.config.seed))
      lines.append(f"{setting} {head}: " + "; ".join(f"{c} (seeds {', '.join(s)})" for c, s in by.items()))
    if {"softmax", "DR"} <= set(heads):
      dr = {r.config.seed: commit(r) for r in heads["DR"]}
      split += [f"{setting} seed {r.config.seed}" for r in heads["softmax"] if r.config.seed in dr and
                commit(r) != dr[r.config.seed]]
  dirty = any("+dirty" in line for line in lines)
  tail = (f"; pairs whose S and DR runs were trained at different commits: {', '.join(split)}" if split else
          "; every pair's S and DR runs were trained at one commit")
  return [f"- commits the runs were trained at{' (+dirty: uncommitted changes in the working tree)' if dirty else ''}"
          f": {' | '.join(lines)}{tail}"]


def how_made(made: dict, arms: dict, records: pathlib.Path) -> str:
  minutes = {f"{setting} {head}": training_minutes(runs) for setting, heads in arms.items()
             for head, runs in heads.items()}
  per_arm = ", ".join(f"{arm} {m:.0f} min" for arm, m in minutes.items())
  lines = [f"- page: `{made.get('command', '')}`", f"- grid: `{made.get('grid', '')}`",
           f"- versions: {', '.join(f'{k} {v}' for k, v in made.get('versions', {}).items())}",
           f"- machine: {made.get('machine', '')}",
           *(f"- later sitting: `{later['command']}` (grid: `{later['grid']}`; {later['machine']})"
             for later in made.get("later_sittings", [])),
           f"- wall time of training and validation, from the runs' records: {sum(minutes.values()) / 60:.1f} h "
           f"(each sitting trains an arm's seeds as one compiled group: {per_arm}); testing is not included",
           *commits(arms),
           f"- records: `{records}` (config, metrics and results of every run; no checkpoints)"]
  return "## How this page was made\n\n" + "\n".join(lines) + "\n"
