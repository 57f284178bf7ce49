"""Retrieval metrics of a Conv4 trained with a metric-learning loss on Omniglot, before and after.

    python -m experiments.dml_omniglot --loss triplet --miner semi_hard --steps 300

Trains on the 145 training characters with C x M batches and reports Precision@1, R-Precision
and MAP@R on the 49 held-out characters (980 images, each queried against the rest).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax

from fewshot import data
from fewshot.backbones import Conv4
from fewshot.dml import embedding
from fewshot.dml.embedding import Embedder, MetricLearner
from fewshot.dml.metrics import retrieval_metrics
from fewshot.dml.samplers import BatchShape
from fewshot.training.sources import DeviceSource

DEFAULT_OMNIGLOT = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "omniglot")


def held_out_metrics(learner, state, split) -> dict:
  z = embedding.embed_split(learner, embedding.model_variables(state), split.images)
  m = retrieval_metrics(z, split.labels, z, split.labels, ref_includes_query=True)
  return {"precision_at_1": m.precision_at_1, "r_precision": m.r_precision, "map_at_r": m.map_at_r}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--data_dir", default=DEFAULT_OMNIGLOT)
  parser.add_argument("--loss", default="triplet")
  parser.add_argument("--miner", default="semi_hard", help="batch_hard, semi_hard or none")
  parser.add_argument("--classes", type=int, default=8)
  parser.add_argument("--per_class", type=int, default=4)
  parser.add_argument("--embedding_dim", type=int, default=64)
  parser.add_argument("--steps", type=int, default=300)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()

  splits = data.load_splits("omniglot", data_dir=args.data_dir, splits=("train", "test"))
  miner = None if args.miner == "none" else args.miner
  learner = MetricLearner(Embedder(Conv4(), embedding_dim=args.embedding_dim), BatchShape(args.classes, args.per_class),
                          loss=args.loss, miner=miner, num_classes=splits["train"].num_classes)
  state = embedding.init_state(learner, jax.random.key(args.seed), splits["train"].image_shape)
  before = held_out_metrics(learner, state, splits["test"])
  start = time.perf_counter()
  source = DeviceSource.from_split(splits["train"])
  state, _ = embedding.train_chunk(learner, state, source, jax.random.key(args.seed + 1), args.steps)
  jax.block_until_ready(state)
  seconds = time.perf_counter() - start
  after = held_out_metrics(learner, state, splits["test"])
  print(json.dumps({"config": vars(args), "before": before, "after": after, "train_seconds": round(seconds, 1)}, indent=1))


if __name__ == "__main__":
  main()
