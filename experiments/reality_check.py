"""A reality-check comparison of contrastive, triplet, N-pair and NSL losses on one DML dataset.

    python -m experiments.reality_check --dataset cars196 --data_dir DIR [--out runs/rc_cars196] [--smoke]

Each loss trains with the reality check's protocol (128-d embeddings, 4-fold cross-validation,
the batch of its kind: C x M for embedding losses, one image per class for classification
losses) in OUT/<loss>; a loss whose results.json exists is skipped, an interrupted one resumes.
Prints (and writes OUT/summary.md) test P@1, R-Precision and MAP@R, separated (mean over the
fold models) and concatenated, per loss.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from absl import logging

from fewshot.dml.config import DMLConfig
from fewshot.dml.experiment import REPORTED
from fewshot.dml.train import train

from experiments import grid

LOSSES = {"contrastive": "none", "triplet": "semi_hard", "npair": "none", "nsl": "none"}  # loss -> miner
PROTOCOL = dict(embedding_dim=128, folds=4)
# Tiny batches (2 x 2, or 4 x 1 for NSL) so a fixture's 6 training classes per fold suffice.
SMOKE = dict(image_size=28, embedding_dim=16, steps_per_epoch=2, epochs=2)
SMOKE_BATCH = {"nsl": dict(classes=4, per_class=1)}
SMOKE_EMBEDDING_BATCH = dict(classes=2, per_class=2)
HEADERS = {"precision_at_1": "P@1", "r_precision": "R-Precision", "map_at_r": "MAP@R"}


def configs(args) -> dict[str, DMLConfig]:
  out = {}
  for loss in args.losses:
    smoke = {**SMOKE, **SMOKE_BATCH.get(loss, SMOKE_EMBEDDING_BATCH)} if args.smoke else {}
    out[loss] = DMLConfig(dataset=args.dataset, data_dir=args.data_dir, backbone=args.backbone, loss=loss,
                          miner=LOSSES[loss], seed=args.seed, **{**PROTOCOL, **smoke})
  return out


def _percent(x: float | None) -> str:
  return "n/a" if x is None else f"{100 * x:.2f}"


def table(results: dict[str, dict]) -> str:
  """A row per loss; separated (mean of the fold models) then concatenated metrics, in %."""
  header = ["Loss"] + [f"{HEADERS[m]} sep." for m in REPORTED] + [f"{HEADERS[m]} concat." for m in REPORTED]
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for loss, r in results.items():
    concatenated = r.get("concatenated", {}).get("test", {})
    cells = [_percent(r["separated_mean"][m]) for m in REPORTED] + [_percent(concatenated.get(m)) for m in REPORTED]
    lines.append(f"| {loss} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--dataset", default="cars196")
  parser.add_argument("--data_dir", default=None)
  parser.add_argument("--out", default=None, help="default: runs/rc_<dataset>")
  parser.add_argument("--backbone", default="conv4")
  parser.add_argument("--smoke", action="store_true", help="tiny images, embeddings and epochs: checks the pipeline")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--losses", default=",".join(LOSSES), help="comma-separated subset of " + ",".join(LOSSES))
  args = parser.parse_args(argv)
  args.losses = tuple(args.losses.split(","))
  if not set(args.losses) <= set(LOSSES):
    parser.error(f"--losses must name some of {', '.join(LOSSES)}")
  args.out = pathlib.Path(args.out or f"runs/rc_{args.dataset}")
  return args


def main(argv=None) -> str:
  args = parse_args(sys.argv[1:] if argv is None else argv)
  logging.set_verbosity(logging.WARNING)  # orbax logs every checkpoint save at INFO
  results = grid.run_all({loss: (loss, c) for loss, c in configs(args).items()}, args.out, train)
  folds = PROTOCOL["folds"]
  summary = (f"# {args.dataset}, {args.backbone}: test retrieval (%), {folds} folds: separated = mean over the "
             f"fold models, concatenated = their embeddings joined\n\n{table(results)}\n")
  return grid.write_summary(args.out, summary)


if __name__ == "__main__":
  main()
