"""The DR results page's grid: which runs it needs, which are kept, and training the missing ones into the kept
records (:mod:`projects.dr_ratio.dr_results` builds the page from them).
"""

from __future__ import annotations

import json
import pathlib
import platform
import shutil
import sys
import time

from fewshot.training import run_flags

from experiments import reproduce_dr
from projects.dr_ratio import dr_provenance

RECORDS = ("config.json", "metrics.jsonl", "results.json")
# The claims' arms, (shot, classifier, head): ProtoNet at 1 and 5 shots, 1-NN at 5 (1-shot 1-NN is the replicate).
CLAIM_ARMS = tuple((shot, c, h) for shot in (1, 5) for c in ("proto", "nn") for h in ("softmax", "dr")
                   if (shot, c) != (1, "nn"))


def grid_argvs(args, kept: set | frozenset = frozenset()) -> list[list[str]]:
  """The reproduce_dr command lines of the grid: the claims' arms under ``--seeds``, then the 1-shot 1-NN
  replicate under ``--replicate_seeds`` (its ProtoNet arms, already trained under those seeds, are skipped); each
  under the seeds of which some arm has no record in ``kept`` (``(shot, classifier, head, seed)``), so the records
  kept stay as they are and only the missing seeds train, as one seed group per arm.
  """
  common = ["--dataset", args.dataset, "--out", str(args.runs), "--backbones", "conv4", "--episodes",
            str(args.episodes), "--eval_every", str(args.eval_every)]
  common += (["--data_dir", args.data_dir] if args.data_dir else []) + (["--smoke"] if args.smoke else [])
  grids = [(["--shots", "1,5", "--nn_shots", "5"], args.seeds, CLAIM_ARMS),
           (["--shots", "1", "--nn_shots", "1"], args.replicate_seeds, [(1, "nn", h) for h in ("softmax", "dr")])]
  argvs = []
  for flags, seeds, arms in grids:
    missing = [s for s in run_flags.parse_seeds(seeds) if any((*arm, s) not in kept for arm in arms)]
    if missing:
      argvs.append([*common, *flags, "--seeds", ",".join(map(str, missing))])
  return argvs


def arm_key(config: dict) -> tuple:
  return (config["shot"], config["classifier"], config["head"], config["seed"])


def kept_runs(records: pathlib.Path) -> set[tuple]:
  """``(shot, classifier, head, seed)`` of every run whose records are kept (as :func:`projects.dr_ratio.dr_results.load_arms` reads them)."""
  return {arm_key(_kept_config(path.parent)) for path in records.glob("*/results.json")}


def _kept_config(folder: pathlib.Path) -> dict:
  """A kept run's config.json; one that cannot be read is refused in one line naming it."""
  try:
    config = json.loads((folder / "config.json").read_text())
    arm_key(config)
    return config
  except (OSError, ValueError, KeyError, TypeError) as e:
    sys.exit(f"error: the kept record {folder} cannot be read ({type(e).__name__}: {e}); restore it from git "
             "(git checkout -- docs/results) or move it out of the page's records.")


def grid_runs(args) -> list[tuple]:
  """``(shot, classifier, head, seed)`` of every run of the grid, in the page's order."""
  parse = run_flags.parse_seeds
  return ([(*arm, s) for arm in CLAIM_ARMS for s in parse(args.seeds)]
          + [(1, "nn", h, s) for h in ("softmax", "dr") for s in parse(args.replicate_seeds)])


def describe_run(key: tuple) -> str:
  shot, classifier, head, seed = key
  return f"{shot}-shot {'ProtoNet' if classifier == 'proto' else '1-NN'} {'DR' if head == 'dr' else 'softmax'} seed {seed}"


def expected_runs(args) -> int:
  """The grid's runs: 6 claim arms under ``--seeds``, the 2 replicate arms under ``--replicate_seeds``."""
  return len(grid_runs(args))


def train_grid(args, argv: list[str], records: pathlib.Path) -> None:
  """Train (or finish) the grid, then keep its records and how they were made under ``records``."""
  started = time.time()
  before = kept_runs(records)
  grids = grid_argvs(args, before)
  for grid in grids:
    reproduce_dr.main(grid)
  # Only the records that were missing join the kept ones: a seed trained again for another arm's sake (a group
  # trains a seed in every arm) never replaces a kept record.
  wanted = set(grid_runs(args)) - before
  for results in sorted(args.runs.glob("*/results.json")):
    key = arm_key(json.loads((results.parent / "config.json").read_text()))
    kept = records / results.parent.name
    if key not in wanted or kept.exists():
      continue
    kept.mkdir(parents=True)
    for name in RECORDS:
      shutil.copyfile(results.parent / name, kept / name)
  import jax
  import jaxlib

  made = {"command": f"python -m projects.dr_ratio.dr_results {' '.join(argv)}".strip(),
          "grid": "; ".join(f"python -m experiments.reproduce_dr {' '.join(g)}" for g in grids),
          "versions": {"python": platform.python_version(), "jax": jax.__version__, "jaxlib": jaxlib.__version__,
                       "devices": f"{jax.device_count()} x {jax.devices()[0].device_kind}"},
          "machine": f"{platform.machine()}, {dr_provenance.cpu_model()}", "wall_seconds_this_sitting": round(time.time() - started)}
  first = records / "made.json"
  if first.exists():  # a later sitting (more seeds): the first one's record stays, this one is added to it
    made = {**json.loads(first.read_text()), "later_sittings": [
        *json.loads(first.read_text()).get("later_sittings", []), made]}
  first.write_text(json.dumps(made, indent=2) + "\n")
