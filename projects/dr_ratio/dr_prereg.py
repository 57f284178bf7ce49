"""The preregistered block of the results page: seeds 10-19 of the four ProtoNet arms, declared in
``docs/results/preregistration.md`` (committed at 5bec0a9, before any of their runs) with the measure, direction and
test that decide each claim. Their verdicts are confirmatory; seeds 0-9 were the first, exploratory look.

    python -m experiments.reproduce_dr --dataset omniglot --data_dir DIR --backbones conv4 --shots 1,5
        --nn_shots "" --episodes 4000 --eval_every 100 --seeds 10-19 --centring both --out RUNS   # (one line)
    python -m projects.dr_ratio.dr_prereg --keep RUNS     # their records join docs/results/omniglot/ (none replaced)
    python -m projects.dr_ratio.dr_results                # the page, this block included

Decided as declared: the paired exact sign-flip test on the per-seed differences DR − S, Holm within a claim, under
the paper's centring (points). Reported beside, never deciding: the declared secondary measures (per-run geometric
means of div- and con-alpha), the authors' code's centring, and seeds 0-19 pooled (exploratory).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import platform
import shutil
import subprocess
import sys

import numpy as np

from fewshot.analysis.tables import Cell, Table, format_value, render_markdown
from fewshot.config import Config
from fewshot.records.reading import read_run

from projects.dr_ratio import dr_centrings, dr_claims, dr_provenance
from projects.dr_ratio.dr_grid import RECORDS

SEEDS = tuple(range(10, 20))
SETTINGS = ("1-shot ProtoNet", "5-shot ProtoNet")
MADE = "prereg_made.json"
DECLARED_AT = "5bec0a9"
# Declared secondary measures: (measure, the direction DR − S is expected to take).
SECONDARY = (("div_alpha", +1), ("con_alpha", -1))


def _setting(c: Config) -> str | None:
  return f"{c.shot}-shot ProtoNet" if c.classifier == "proto" else None


def load(records: pathlib.Path, seeds=SEEDS) -> dict[str, dict[str, list]]:
  """``{setting: {"softmax": runs, "DR": runs}}`` of the ProtoNet runs of ``seeds`` kept in ``records``."""
  arms: dict[str, dict[str, list]] = {}
  for path in sorted(records.glob("*/config.json")):
    config = json.loads(path.read_text())
    if config.get("seed") not in seeds or config.get("classifier") != "proto":
      continue
    run = read_run(path.parent, Config.from_dict)
    head = "DR" if run.config.head == "dr" else "softmax"
    arms.setdefault(_setting(run.config), {}).setdefault(head, []).append(run)
  return {s: {h: sorted(arms[s][h], key=lambda r: r.config.seed) for h in ("softmax", "DR") if h in arms[s]}
          for s in SETTINGS if s in arms}


def complete(arms: dict) -> bool:
  return all(len(arms.get(s, {}).get(h, [])) == len(SEEDS) for s in SETTINGS for h in ("softmax", "DR"))


def secondary_table(tests_by_setting: dict[str, dict[str, dr_claims.Test]]) -> Table:
  """The declared secondary measures: per-run geometric means, paired by seed; reported, never a verdict."""
  rows = []
  for measure, sign in SECONDARY:
    for setting, t in tests_by_setting.items():
      test = t[measure]
      expected = "DR − S > 0" if sign > 0 else "DR − S < 0"
      rows.append(tuple(Cell(x) for x in (
          f"per-run geometric mean of {measure.replace('_', '-')}", setting, expected,
          f"S {format_value(float(np.mean(test.s)))}, DR {format_value(float(np.mean(test.dr)))}",
          dr_claims.paired_summary(test))))
  return Table("Declared secondary measures (seeds 10-19; reported, never deciding a verdict)",
               ("measure", "setting", "expected", "means over seeds", "paired: DR − S, mean ± 95% t, sign-flip p"),
               tuple(rows))


def _secondary_tests(arms: dict) -> dict[str, dict[str, dr_claims.Test]]:
  return {setting: {measure: dr_claims.compare(setting, dr_claims.seed_geometric_means(heads["softmax"], measure),
                                               dr_claims.seed_geometric_means(heads["DR"], measure))
                    for measure, _ in SECONDARY}
          for setting, heads in arms.items()}


def _how_made(records: pathlib.Path, arms: dict) -> str:
  """How the block's runs were made: the sittings that kept them, the commits, the hours of training."""
  made = json.loads((records / MADE).read_text()) if (records / MADE).exists() else {"sittings": []}
  hours = sum(dr_provenance.training_minutes(runs) for heads in arms.values() for runs in heads.values()) / 60
  lines = [f"- trained: `{s['command']}`; kept: `{s['kept_by']}` at {s['kept_at_commit']} on {s['machine']} "
           f"({len(s['runs'])} runs)" for s in made["sittings"]]
  lines += [f"- wall time of training and validation, from the runs' records: {hours:.1f} h", *dr_provenance.commits(arms)]
  return "### How the block was made\n\n" + "\n".join(lines) + "\n"


def section(records: pathlib.Path, first_arms: dict) -> str:
  """The page's confirmatory block: the claims decided on seeds 10-19 alone, or how many of their runs are kept."""
  arms = load(records)
  kept = sum(len(runs) for heads in arms.values() for runs in heads.values())
  head = (f"## Confirmatory: seeds 10-19, declared before they ran\n\n"
          f"[preregistration.md](results/preregistration.md) (committed at {DECLARED_AT}, before any of these runs) "
          "fixed the arms, the protocol, each claim's measure, direction and test, and the secondary measures. ")
  if not complete(arms):
    return head + (f"{kept} of the block's {len(SEEDS) * 4} runs are kept so far; its verdicts wait for all of "
                   "them. Until then every verdict on this page is exploratory (seeds 0-9).\n")
  tests = {s: dr_claims.cell_tests(h["softmax"], h["DR"], s) for s, h in arms.items()}
  pooled = {s: {h: sorted(first_arms[s][h] + arms[s][h], key=lambda r: r.config.seed) for h in ("softmax", "DR")}
            for s in SETTINGS if s in first_arms}
  pooled_tests = {s: dr_claims.cell_tests(h["softmax"], h["DR"], s) for s, h in pooled.items()}
  text = head + ("These verdicts are the page's confirmatory ones; the page's tables below (seeds 0-9) were the "
                 "first look. The Benjamini-Hochberg column is exploratory here, as declared.\n")
  return "\n".join([text, render_markdown([dr_claims.claim_table(tests, confirmatory=True)]),
                    render_markdown([secondary_table(_secondary_tests(arms))]),
                    render_markdown([dr_centrings.centring_table(arms, tests)]),
                    render_markdown([dataclasses.replace(dr_claims.claim_table(pooled_tests, confirmatory=True),
                                                         title="Exploratory: seeds 0-19 pooled, the claims")]),
                    _how_made(records, arms)])


def keep(runs: pathlib.Path, records: pathlib.Path) -> list[str]:
  """Copy the records of the block's finished runs under ``runs`` that ``records`` lacks (none replaced), and
  record how they were made; the names copied.
  """
  copied = []
  for results in sorted(runs.glob("*/results.json")):
    config = json.loads((results.parent / "config.json").read_text())
    kept = records / results.parent.name
    if config.get("seed") not in SEEDS or config.get("classifier") != "proto" or kept.exists():
      continue
    kept.mkdir(parents=True)
    for name in RECORDS:
      shutil.copyfile(results.parent / name, kept / name)
    copied.append(kept.name)
  if copied:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    made = {"command": "python -m experiments.reproduce_dr --dataset omniglot --data_dir DIR --backbones conv4 "
                       '--shots 1,5 --nn_shots "" --episodes 4000 --eval_every 100 --seeds 10-19 --centring both',
            "kept_by": f"python -m projects.dr_ratio.dr_prereg --keep {runs}", "kept_at_commit": commit,
            "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}", "runs": copied}
    path = records / MADE
    earlier = json.loads(path.read_text())["sittings"] if path.exists() else []
    path.write_text(json.dumps({"sittings": [*earlier, made]}, indent=2) + "\n")
  return copied


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--keep", required=True, help="the --out of the block's runs (python -m experiments.reproduce_dr)")
  parser.add_argument("--records", default="docs/results/omniglot", help="the page's kept records")
  args = parser.parse_args(sys.argv[1:] if argv is None else argv)
  copied = keep(pathlib.Path(args.keep), pathlib.Path(args.records))
  print(f"kept the records of {len(copied)} runs in {args.records}")


if __name__ == "__main__":
  main()
