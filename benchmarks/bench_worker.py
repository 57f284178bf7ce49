"""One side of ``benchmarks/bench_shapes.py``: one row's training, built once, then timed chunk by chunk on request.

Run as a child process, one per side (this checkout's JAX, an older commit's JAX, eager PyTorch), so that two
versions of ``fewshot`` never share a process and only one side computes at a time: the parent writes ``run`` on
stdin, the worker trains one chunk and answers a JSON line with its seconds. ``--tree`` is the checkout whose
``fewshot`` is imported (an older commit's worktree for the ``old`` side); this file touches only the API the
project has had since the benchmark's baseline (``EpisodicLearner``, ``train_chunk``, ``DeviceSource``,
``SeedGroup``), so it drives either.

  python benchmarks/bench_worker.py --side jax --tree . --row '{"size": 28, ...}'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


def random_images(size: int, channels: int, classes: int, per_class: int, seed: int = 0):
  """A random uint8 split, ``per_class`` images of each class stored class by class (the benchmark's data)."""
  rng = np.random.default_rng(seed)
  images = rng.integers(0, 256, (classes * per_class, size, size, channels), dtype=np.uint8)
  return images, np.repeat(np.arange(classes, dtype=np.int32), per_class)


def jax_side(row: dict, tree: str):
  """``(run, facts)``: one scanned chunk of the row's episodes (a seed group's when ``runs`` > 1)."""
  sys.path.insert(0, os.path.abspath(tree))
  import jax

  from fewshot.augment.augmentation import NO_AUGMENTATION, Augmentation
  from fewshot.backbones import Conv4
  from fewshot.data.split import Split
  from fewshot.episodic import learning
  from fewshot.episodic.episodes import EpisodeShape
  from fewshot.training.seed_groups import SeedGroup
  from fewshot.training.sources import DeviceSource
  from fewshot.training.train_state import run_keys

  images, labels = random_images(row["stored"], row["channels"], row["classes"], row["per_class"])
  split = Split(images=images, labels=labels, class_names=tuple(f"c{i}" for i in range(row["classes"])))
  augmentation = Augmentation.paper(row["size"], row["channels"]) if row["augment"] else NO_AUGMENTATION
  learner = learning.EpisodicLearner(Conv4(), EpisodeShape(row["way"], row["shot"], row["query"]), head=row["head"],
                                     augmentation=augmentation)
  input_shape = (row["size"], row["size"], row["channels"])
  runs = row["runs"]
  if runs == 1:
    source = DeviceSource.from_split(split, jax.devices()[0])
    state = jax.device_put(learning.init_state(learner, run_keys(0)["init"], input_shape), jax.devices()[0])
    keys = run_keys(0)["train"]
  else:
    group = SeedGroup.over(runs)
    source = DeviceSource.from_split(split, group.replicated)
    state = group.stack([learning.init_state(learner, run_keys(s)["init"], input_shape) for s in range(runs)])
    keys = group.stack([run_keys(s)["train"] for s in range(runs)])
  box = {"state": state}

  def run():
    out = learning.train_chunk(learner, box["state"], source, keys, row["episodes"])
    box["state"] = out[0]
    jax.block_until_ready(out)

  facts = {"jax": jax.__version__, "cores": len(os.sched_getaffinity(0))}
  try:
    from fewshot import convolutions
    facts["conv"] = convolutions.used(learner.backbone).get("conv", "?")
  except (ImportError, AttributeError):
    facts["conv"] = "?"
  if row.get("count_flops"):
    from benchmarks import flops
    stored = (row["stored"], row["stored"], row["channels"])
    facts["gflop_per_episode"] = flops.program_flops(learning.lowered_step(learner, input_shape, stored)) / 1e9
    facts["peak_gflops"] = flops.matmul_peak_gflops("float32")
  return run, facts


def torch_side(row: dict, tree: str):
  """``(run, facts)``: the row's episodes in eager PyTorch (``benchmarks/torch_conv4.py``), a group's runs in turn."""
  sys.path.insert(0, os.path.join(os.path.abspath(tree), "benchmarks"))
  import torch
  from torch_conv4 import EpisodeTrainer

  images, labels = random_images(row["stored"], row["channels"], row["classes"], row["per_class"])
  device = "cuda" if torch.cuda.is_available() else "cpu"  # beside JAX on the same accelerator where there is one
  trainers = [EpisodeTrainer(images, labels, row["way"], row["shot"], row["query"], row["head"], device, seed,
                             crop=row["size"] if row["augment"] else None) for seed in range(row["runs"])]

  def run():
    for trainer in trainers:
      trainer.run(row["episodes"])

  return run, {"torch": torch.__version__, "device": device, "cores": torch.get_num_threads()}


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--side", choices=("jax", "torch"), required=True)
  parser.add_argument("--tree", default=".", help="the checkout whose fewshot (or torch_conv4.py) is used")
  parser.add_argument("--row", required=True, help="the row, as bench_shapes.py's JSON")
  args = parser.parse_args(argv)
  row = json.loads(args.row)
  build = jax_side if args.side == "jax" else torch_side
  run, facts = build(row, args.tree)
  start = time.perf_counter()
  run()  # JAX compiles here; PyTorch warms up
  print(json.dumps({"ready": True, "first_call_s": time.perf_counter() - start, **facts}), flush=True)
  for line in sys.stdin:
    if line.strip() != "run":
      break
    start = time.perf_counter()
    run()
    print(json.dumps({"s": time.perf_counter() - start}), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
