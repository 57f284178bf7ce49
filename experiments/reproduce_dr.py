"""The distance-ratio paper's grid on one dataset, ending with its Table 2 and the statistics tables.

    python -m experiments.reproduce_dr --dataset cub --data_dir DIR [--out runs/dr_cub] [--smoke]

Trains {Conv4, ResNet18} x {1, 5}-shot x {ProtoNet_S, ProtoNet_DR}, plus 1-NN_S and 1-NN_DR at
5-shot (``--nn_shots 1,5``: at 1-shot too), each in OUT/<run name>; a configuration whose results.json exists is skipped, and an
interrupted one resumes, so re-running the command continues the grid. Prints the accuracy table
(rows: models, columns: backbone x shot) and, per (backbone, shot, classifier), fewshot.analyze's
tables of S against DR, and writes both to OUT/summary.md.

``--seeds 0-4`` trains every configuration as a seed group (one program per configuration):
the table then shows each cell's mean over the seeds with its 95% t-interval, and S against DR
is compared as two arms of seeds (``python -m fewshot.analyze A_seed* -- B_seed*``).
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys

from absl import logging

from fewshot import analyze, choices, heads
from fewshot.analysis import stats
from fewshot.config import Config
from fewshot.train import train, train_group
from fewshot.training import run_flags

from experiments import grid

BACKBONES = ("conv4", "resnet18")
SHOTS = (1, 5)
NN_SHOTS = (5,)  # the paper reports 1-NN only at 5-shot: at 1-shot it is ProtoNet
MODELS = (("proto", "softmax"), ("proto", "dr"), ("nn", "softmax"), ("nn", "dr"))
# Small enough to finish in about a minute per backbone on a fixture with a 2-core CPU.
SMOKE = dict(image_size=28, way=2, query=2, test_query=2, episodes=4, eval_every=2, val_episodes=2, test_episodes=4)
SMOKE_BACKBONES = ("conv4",)  # ResNet-18 compiles for minutes on CPU; name it with --backbones to include it


def configurations(args) -> list[Config]:
  """Every configuration of the grid, in the order they run."""
  overrides = {**(SMOKE if args.smoke else {}), **{k: getattr(args, k) for k in ("episodes", "eval_every")
                                                    if getattr(args, k) is not None}}
  configs = []
  for backbone in args.backbones:
    for shot in args.shots:
      for classifier, head in MODELS:
        if classifier == "nn" and shot not in args.nn_shots:
          continue
        configs.append(Config(dataset=args.dataset, data_dir=args.data_dir, backbone=backbone, shot=shot,
                              classifier=classifier, head=head, seed=args.seed, centring=args.centring,
                              **overrides))
  return configs


def _cell(r) -> str:
  """A run's "acc ± ci", or a seed group's mean across its seeds ± its 95% t-interval."""
  if isinstance(r, dict):
    return f"{r['test_accuracy']:.2f} ± {r['test_ci95']:.2f}"
  mean, half = stats.t_interval([x["test_accuracy"] for x in r])
  return f"{mean:.2f} ± {half or 0:.2f} ({len(r)} seeds)"


def accuracy_table(results: dict[Config, dict | list[dict]]) -> str:
  """Table 2's layout: a row per model, a column per (backbone, shot), cells "acc ± ci"."""
  columns = sorted({(c.backbone, c.shot) for c in results}, key=lambda k: (BACKBONES.index(k[0]), k[1]))
  cells = {(heads.MODEL_NAMES[(c.classifier, c.head)], c.backbone, c.shot): r for c, r in results.items()}
  header = "| Model | " + " | ".join(f"{b} {s}-shot" for b, s in columns) + " |"
  lines = [header, "|" + "---|" * (len(columns) + 1)]
  for model in (heads.MODEL_NAMES[m] for m in MODELS):
    row = [cells.get((model, b, s)) for b, s in columns]
    if any(row):
      lines.append(f"| {model} | " + " | ".join(_cell(r) if r else "–" for r in row) + " |")
  return "\n".join(lines)


def statistics_tables(results: dict[Config, dict], out: pathlib.Path, seeds: tuple[int, ...] | None = None) -> str:
  """fewshot.analyze's tables (runs, then one per measure) of S against DR for each pair in the grid."""
  sections = []
  by_key = {(c.backbone, c.shot, c.classifier, c.head): c for c in results}
  for (backbone, shot, classifier, head), s in by_key.items():
    dr = by_key.get((backbone, shot, classifier, "dr"))
    if head != "softmax" or dr is None:
      continue
    if seeds is None:
      text, warning = analyze.analyze([str(out / s.run_name), str(out / dr.run_name)], fmt="markdown")
    else:
      arm = lambda c: [str(out / dataclasses.replace(c, seed=k).run_name) for k in seeds]  # noqa: E731
      text, warning = analyze.analyze_arms(arm(s), arm(dr), fmt="markdown"), None
    title = f"## {backbone} {shot}-shot {heads.MODEL_NAMES[(classifier, 'softmax')].split('_')[0]}: S vs DR"
    sections.append("\n\n".join([title] + ([f"> {warning}"] if warning else []) + [text.strip()]))
  return "\n\n".join(sections)


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--dataset", required=True, choices=("cub", "mini_imagenet", "omniglot", "strokes"))
  parser.add_argument("--data_dir", default=None)
  parser.add_argument("--out", default=None, help="default: runs/dr_<dataset>")
  parser.add_argument("--smoke", action="store_true", help="tiny episodes and images: checks the pipeline, not the paper")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--seeds", default=None, help="train every configuration as a seed group (0-4, or 0,3,5)")
  parser.add_argument("--backbones", default=None, help=f"comma-separated subset of {','.join(BACKBONES)}")
  parser.add_argument("--shots", default=None, help="comma-separated subset of 1,5")
  parser.add_argument("--nn_shots", default=",".join(map(str, NN_SHOTS)),
                      help="shots at which the 1-NN heads train too (the paper's: 5; the seeded grid's: 1,5)")
  parser.add_argument("--episodes", type=int, default=None, help="training episodes of every run (default: the "
                      "dataset's, or the smoke grid's)")
  parser.add_argument("--eval_every", type=int, default=None, help="episodes between checkpoints (default 100)")
  parser.add_argument("--centring", default="points", choices=choices.CENTRINGS,
                      help="of the diagnostics: points (the paper), features (the authors' code), or both")
  args = parser.parse_args(argv)
  args.nn_shots = tuple(int(s) for s in args.nn_shots.split(",") if s)
  default_backbones = SMOKE_BACKBONES if args.smoke else BACKBONES
  args.backbones = tuple(args.backbones.split(",")) if args.backbones else default_backbones
  args.shots = tuple(int(s) for s in args.shots.split(",")) if args.shots else SHOTS
  if not set(args.backbones) <= set(BACKBONES) or not set(args.shots) <= set(SHOTS):
    parser.error(f"--backbones must name some of {', '.join(BACKBONES)} and --shots some of 1, 5")
  args.out = pathlib.Path(args.out or f"runs/dr_{args.dataset}")
  args.seeds = None if args.seeds is None else run_flags.parse_seeds(args.seeds)
  return args


def main(argv=None) -> str:
  args = parse_args(sys.argv[1:] if argv is None else argv)
  logging.set_verbosity(logging.WARNING)  # orbax logs every checkpoint save at INFO
  if args.seeds is None:
    results = grid.run_all({c: (c.run_name, c) for c in configurations(args)}, args.out, train)
  else:
    results = grid.run_groups(configurations(args), args.seeds, args.out, train_group)
  summary = (f"# {args.dataset}: test accuracy (%, 95% CI)\n\n{accuracy_table(results)}\n\n"
             f"# Statistics, S vs DR\n\n{statistics_tables(results, args.out, args.seeds)}\n")
  return grid.write_summary(args.out, summary)


if __name__ == "__main__":
  main()
