"""Seed groups against runs one after another and against eager PyTorch: training episodes per second.

For each image size, head and group size R (Conv4 ProtoNet, 5-way 1-shot 16-query, a random
uint8 split resident on the device), side by side in one process:

* ``group``: one ``learning.train_chunk`` of R stacked runs (one vmapped program, the run axis
  sharded over ``jax.devices()``), ``--episodes`` episodes per run per chunk;
* ``sequential``: the same R runs one after another: R times the single run's chunk (the
  single run is measured in the same repetitions, so R x its time is what training them one
  after another costs);
* ``torch``: the eager PyTorch reference (``benchmarks/torch_conv4.py``), one run.

Reported per configuration: total episodes/s of the group (all runs), episodes/s per run, and
the group's total against the sequential runs and against one eager PyTorch run; the device
memory one run of the group needs (argument + output + temporary bytes of the compiled group
chunk, over R). Medians over ``--repeats``; the variants alternate within each repetition.
Each row also gives the group's and the single run's GFLOP/s (the training step's FLOPs counted from its layer
shapes, ``benchmarks/flops.py``, on every backend) and their fraction of the device's matrix-product peak under the
same ``--precisions`` name, measured in the same process.

  python -m benchmarks.bench_runs --sizes 28,84 --heads softmax,dr --groups 1,2,4,8,16 --torch

Each convolution form (``--conv``, :mod:`fewshot.convolutions`) and ``--precisions`` name is timed in turn, so one
command compares the forms of issue 41 on a GPU:

  python -m benchmarks.bench_runs --sizes 28,84 --heads dr --groups 1,8,32 --conv lax,im2col,map,im2col_grad \
      --precisions float32,tensorfloat32 --json forms.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time

import jax

from fewshot import choices, convolutions
from fewshot.backbones import Conv4
from fewshot.episodic import learning
from fewshot.episodic.episodes import EpisodeShape
from fewshot.episodic.learning import EpisodicLearner
from fewshot.training import chunks
from fewshot.training.seed_groups import SeedGroup
from fewshot.training.sources import DeviceSource
from fewshot.training.train_state import run_keys

from benchmarks import flops
from benchmarks.bench_episodes import TorchRef, random_split

SHAPE = EpisodeShape(5, 1, 16)


def group_bytes_per_run(learner, states, source, keys, episodes: int, runs: int) -> float:
  """Device memory of the compiled group chunk (arguments, outputs, temporaries), per run."""
  draws = source.blocks(keys, 0, episodes, SHAPE.way, SHAPE.per_class)[0]
  compiled = chunks.compiled(group=True, donate=True).lower(learning._train_on_draw, learner, states, draws, keys,
                                                          jax.numpy.int32(episodes - 1)).compile()
  m = compiled.memory_analysis()
  return (m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes) / runs


def episode_flops(learner, input_shape: tuple[int, ...]) -> float:
  """Floating-point operations of one training step, counted from its layer shapes (:mod:`benchmarks.flops`)."""
  return flops.program_flops(learning.lowered_step(learner, input_shape, input_shape))


def bench(size: int, head: str, groups: list[int], episodes: int, repeats: int, use_torch: bool,
          peak: float, precision: str = "float32", conv: str = "auto") -> list[dict]:
  channels = 1 if size == 28 else 3
  split = random_split(size, channels, 64, 20)
  learner = EpisodicLearner(Conv4(conv=conv), SHAPE, head=head, precision=precision)
  input_shape = (size, size, channels)
  single_source = DeviceSource.from_split(split)
  single_keys = run_keys(0)
  single = learning.init_state(learner, single_keys["init"], input_shape)

  def run_single():
    nonlocal single
    single, metrics, _ = learning.train_chunk(learner, single, single_source, single_keys["train"], episodes)
    jax.block_until_ready(metrics)

  flops = episode_flops(learner, input_shape) * episodes  # the chunk's one diagnosed update is left out
  torch_ref = TorchRef(split, SHAPE, head, episodes, "cpu", 0) if use_torch else None
  rows = []
  for runs in groups:
    group = SeedGroup.over(runs)
    source = DeviceSource.from_split(split, group.replicated)
    seeds = group.pad(list(range(runs)))
    states = group.stack([learning.init_state(learner, run_keys(s)["init"], input_shape) for s in seeds])
    keys = group.stack([run_keys(s)["train"] for s in seeds])
    memory = group_bytes_per_run(learner, states, source, keys, episodes, group.size)

    def run_group():
      nonlocal states
      states, metrics, _ = learning.train_chunk(learner, states, source, keys, episodes)
      jax.block_until_ready(metrics)

    variants = {"group": run_group, "single": run_single, **({"torch": torch_ref.run} if torch_ref else {})}
    for fn in variants.values():  # compile / warm up
      fn()
    times = {name: [] for name in variants}
    for _ in range(repeats):
      for name, fn in variants.items():
        start = time.perf_counter()
        fn()
        times[name].append(time.perf_counter() - start)
    t = {name: statistics.median(v) for name, v in times.items()}
    group_total = runs * episodes / t["group"]
    row = {"size": size, "head": head, "precision": precision, "conv": conv_name(conv), "runs": runs,
           "devices": group.num_devices,
           "group_episodes_per_s": group_total, "per_run_episodes_per_s": group_total / runs,
           "sequential_episodes_per_s": episodes / t["single"],
           "group_vs_sequential": group_total / (episodes / t["single"]),
           "bytes_per_run": memory, "gflop_per_episode": flops / episodes / 1e9,
           "single_gflops": flops / t["single"] / 1e9, "group_gflops": runs * flops / t["group"] / 1e9,
           "peak_gflops": peak}
    row["single_peak_fraction"], row["group_peak_fraction"] = row["single_gflops"] / peak, row["group_gflops"] / peak
    if "torch" in t:
      row["torch_episodes_per_s"] = episodes / t["torch"]
      row["group_vs_torch"] = group_total / row["torch_episodes_per_s"]
      row["per_run_vs_torch"] = row["per_run_episodes_per_s"] / row["torch_episodes_per_s"]
    rows.append(row)
    print(json.dumps(row), flush=True)
  return rows


def conv_name(conv: str) -> str:
  """A row's convolution form: what ran, ``auto (im2col)`` where the backend chose it."""
  return f"auto ({convolutions.resolve(conv)})" if conv == "auto" else conv


def table(rows: list[dict]) -> str:
  head = ("| episode | head | precision | conv | runs | group ep/s (total) | per run | sequential ep/s | "
          "group / sequential | "
          "eager PyTorch ep/s | group / PyTorch | per run / PyTorch | MiB per run | single GFLOP/s (of peak) | "
          "group GFLOP/s (of peak) |")
  lines = [head, "|" + "---|" * 15]
  for r in rows:
    torch_cells = (f"{r['torch_episodes_per_s']:.2f} | {r['group_vs_torch']:.2f} | {r['per_run_vs_torch']:.2f}"
                   if "torch_episodes_per_s" in r else "– | – | –")
    lines.append(f"| {r['size']}×{r['size']} | {r['head']} | {r['precision']} | {r['conv']} | {r['runs']} | "
                 f"{r['group_episodes_per_s']:.2f} | "
                 f"{r['per_run_episodes_per_s']:.2f} | {r['sequential_episodes_per_s']:.2f} | "
                 f"{r['group_vs_sequential']:.2f} | {torch_cells} | {r['bytes_per_run'] / 2**20:.0f} | "
                 f"{r['single_gflops']:.0f} ({_percent(r['single_peak_fraction'])}) | "
                 f"{r['group_gflops']:.0f} ({_percent(r['group_peak_fraction'])}) |")
  return "\n".join(lines)


def _percent(fraction: float) -> str:
  return f"{100 * fraction:.1f}%"


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--sizes", default="28,84")
  parser.add_argument("--heads", default="softmax,dr")
  parser.add_argument("--groups", default="1,2,4,8,16")
  parser.add_argument("--episodes", type=int, default=None, help="episodes per run per chunk (default 10 at 28, 2 at "
                      "84 on a CPU; 50 and 20 elsewhere, where a 2-episode chunk is mostly its launch and diagnostics)")
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--torch", action="store_true", help="time eager PyTorch too (pip install torch==2.13.0)")
  parser.add_argument("--precisions", default="float32", help="the backbone's, comma-separated (of "
                      f"{', '.join(choices.PRECISIONS)}): each timed in turn")
  parser.add_argument("--conv", default="auto", help="forms of backbones.Conv (fewshot.convolutions), comma-separated "
                      f"(of {', '.join(choices.CONV_FORMS)}): each timed in turn; auto is the backend's (im2col on "
                      "CPU only). Under a group's vmap lax becomes one grouped convolution, im2col one batched "
                      "matrix product, map a lax.map of dense convolutions over the runs, im2col_grad lax with "
                      "im2col's batched product for the kernel gradient")
  parser.add_argument("--json", default=None, help="write the rows here")
  args = parser.parse_args(argv)
  precisions, convs = args.precisions.split(","), args.conv.split(",")
  for name, values, known in (("--precisions", precisions, choices.PRECISIONS), ("--conv", convs, choices.CONV_FORMS)):
    if unknown := [v for v in values if v not in known]:
      parser.error(f"{name} names {unknown[0]!r}; choose among {', '.join(known)}.")
  rows = []
  print(f"jax {jax.__version__} on {jax.devices()}", flush=True)
  cpu = jax.default_backend() == "cpu"
  for precision in precisions:
    peak = flops.matmul_peak_gflops(precision)
    print(f"matmul peak under --precision {precision}: {peak:.1f} GFLOP/s", flush=True)
    for size, head, conv in itertools.product([int(s) for s in args.sizes.split(",")], args.heads.split(","), convs):
      episodes = args.episodes or ((10 if size == 28 else 2) if cpu else (50 if size == 28 else 20))
      rows += bench(size, head, [int(g) for g in args.groups.split(",")], episodes, args.repeats, args.torch, peak,
                    precision, conv)
  print(table(rows))
  if args.json:
    with open(args.json, "w") as f:
      json.dump(rows, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
