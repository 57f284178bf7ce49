"""Training throughput of Conv4 ProtoNet episodes: scanned JAX chunk vs a Python loop vs eager PyTorch.

For each image size and head (classifier ``proto``), 5-way 1-shot 16-query, on
``jax.devices()[0]`` with a random uint8 split resident on the device:

* ``scan``: ``learning.train_chunk`` (one ``lax.scan`` over ``--episodes`` episodes drawn
  on the device, plus the diagnostics of its last update: one extra forward pass per
  chunk, so short chunks overstate the per-episode cost of 100-episode checkpoints);
* ``loop``: the same per-episode work (draw + ``learning.train_step``) jitted once and
  called from a Python loop ``--episodes`` times;
* ``torch`` (with ``--torch``): the eager PyTorch reference of ``benchmarks/torch_conv4.py``.

Compile time is the first call, reported separately (``compile ≈ first call − one
steady chunk``). Steady state is the median over ``--repeats`` chunks, each timed to
``block_until_ready``; the variants alternate within every repetition so that a change
in machine load hits all of them alike. The 1-, 5- and 15-minute load averages are
recorded before and after each configuration. Each configuration runs the backbone under each ``--precisions``
name (``fewshot.numerics``), and reports the scan's GFLOP/s (FLOPs from the layer shapes, ``benchmarks/flops.py``)
and its fraction of the device's matrix-product peak under that name, measured in the same process.

  python benchmarks/bench_episodes.py --sizes 28,84 --heads softmax,dr --torch --json /tmp/bench.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import jax
import numpy as np

from fewshot import choices
from fewshot.backbones import Conv4
from fewshot.data.split import Split
from fewshot.episodic import learning
from fewshot.episodic.episodes import EpisodeShape, sample_episode
from fewshot.episodic.learning import EpisodicLearner
from fewshot.training.sources import DeviceSource

from benchmarks import flops


def random_split(size: int, channels: int, num_classes: int, per_class: int, seed: int = 0) -> Split:
  rng = np.random.default_rng(seed)
  images = rng.integers(0, 256, (num_classes * per_class, size, size, channels), dtype=np.uint8)
  labels = np.repeat(np.arange(num_classes, dtype=np.int32), per_class)
  return Split(images=images, labels=labels, class_names=tuple(f"c{i}" for i in range(num_classes)))


def load() -> list[float]:
  return [round(v, 2) for v in os.getloadavg()]


def block(tree):
  return jax.block_until_ready(tree)


def init_on_device(learner: EpisodicLearner, seed: int, input_shape, source: DeviceSource):
  """The initial state, committed to the source's device.

  A state left uncommitted next to a committed source makes the second call compile
  again (the first call's outputs come back committed, which changes the cache key).
  """
  state = learning.init_state(learner, jax.random.key(seed), input_shape)
  return jax.device_put(state, next(iter(source.images.devices())))


class JaxScan:
  """``learning.train_chunk`` over a chunk of episodes."""

  def __init__(self, learner: EpisodicLearner, source: DeviceSource, input_shape, episodes: int, seed: int):
    self.learner, self.source, self.episodes = learner, source, episodes
    self.key = jax.random.key(seed + 1)
    self.state = init_on_device(learner, seed, input_shape, source)

  def run(self):
    # (state, per-episode metrics, ...): the state always comes first
    out = learning.train_chunk(self.learner, self.state, self.source, self.key, self.episodes)
    self.state = out[0]
    block(out)


class JaxLoop:
  """The scan body (draw one episode + ``train_step``) jitted alone, called from Python per episode."""

  def __init__(self, learner: EpisodicLearner, source: DeviceSource, input_shape, episodes: int, seed: int):
    self.source, self.episodes = source, episodes
    self.key = jax.random.key(seed + 1)
    self.state = init_on_device(learner, seed, input_shape, source)
    shape = learner.shape

    def step(state, source, key):
      episode = sample_episode(jax.random.fold_in(key, state.step), source, shape)
      return learning.train_step(learner, state, episode)

    self.step = jax.jit(step, donate_argnums=0)

  def run(self):
    out = None
    for _ in range(self.episodes):
      out = self.step(self.state, self.source, self.key)
      self.state = out[0]
    block(out)


class TorchRef:
  def __init__(self, split: Split, shape: EpisodeShape, head: str, episodes: int, device: str, seed: int):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_conv4 import EpisodeTrainer  # pylint: disable=import-outside-toplevel

    self.trainer = EpisodeTrainer(split.images, split.labels, shape.way, shape.shot, shape.query, head, device, seed)
    self.episodes = episodes

  def run(self):
    self.trainer.run(self.episodes)


def timed(fn) -> float:
  t0 = time.perf_counter()
  fn()
  return time.perf_counter() - t0


def torch_status(want: bool, jax_platform: str) -> tuple[str | None, str]:
  """(torch device or None, a note)."""
  if not want:
    return None, "torch: not requested (--torch)"
  try:
    import torch  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    return None, f"torch: not importable ({e}); skipping the PyTorch reference"
  device = "cuda" if jax_platform == "gpu" and torch.cuda.is_available() else "cpu"
  return device, f"torch {torch.__version__} on {device}, {torch.get_num_threads()} threads"


def parse_ints(text: str) -> list[int]:
  return [int(t) for t in text.split(",") if t]


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--sizes", default="28,84", help="image sizes: 28 (28×28×1) and/or 84 (84×84×3)")
  parser.add_argument("--heads", default="softmax,dr")
  parser.add_argument("--classifier", default="proto", choices=("proto", "nn"))
  parser.add_argument("--way", type=int, default=5)
  parser.add_argument("--shot", type=int, default=1)
  parser.add_argument("--query", type=int, default=16)
  parser.add_argument("--episodes", default=None,
                      help="episodes per timed chunk: one int, or one per size (default: 20,3 on CPU, 100 elsewhere)")
  parser.add_argument("--repeats", type=int, default=5, help="timed chunks per variant (median reported)")
  parser.add_argument("--classes", type=int, default=64, help="classes of the random split")
  parser.add_argument("--per-class", type=int, default=20, help="images per class of the random split")
  parser.add_argument("--no-loop", action="store_true", help="skip the jitted-train_step Python-loop variant")
  parser.add_argument("--torch", action="store_true", help="also time the eager PyTorch reference")
  parser.add_argument("--json", default=None, help="write the results here")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--precisions", default="float32", help="the backbone's --precision names, comma-separated")
  parser.add_argument("--conv", default="auto", choices=choices.CONV_FORMS,
                      help="the form of backbones.Conv (fewshot.convolutions): auto (im2col on CPU only), or one")
  args = parser.parse_args(argv)
  args.sizes = parse_ints(args.sizes)
  args.heads = [h for h in args.heads.split(",") if h]
  if args.episodes is None:
    on_cpu = jax.devices()[0].platform == "cpu"
    args.episodes = [20 if s <= 28 else 3 for s in args.sizes] if on_cpu else [100] * len(args.sizes)
  else:
    episodes = parse_ints(args.episodes)
    args.episodes = episodes * len(args.sizes) if len(episodes) == 1 else episodes
    if len(args.episodes) != len(args.sizes):
      parser.error("--episodes takes one int or one per --sizes entry")
  args.precisions = [p for p in args.precisions.split(",") if p]
  if not set(args.precisions) <= set(choices.PRECISIONS):
    parser.error(f"--precisions takes names among {', '.join(choices.PRECISIONS)}")
  return args


def summary(ts: list[float], first: float, n_ep: int) -> dict:
  """One variant's timings: the median chunk, per episode, its spread, and the compile time the first call added."""
  med = statistics.median(ts)
  return {"first_call_s": first, "compile_s": max(first - med, 0.0), "chunk_s": ts, "median_chunk_s": med,
          "ms_per_episode": 1e3 * med / n_ep, "episodes_per_s": n_ep / med,
          "spread_ms_per_episode": [1e3 * min(ts) / n_ep, 1e3 * max(ts) / n_ep]}


def measure(args, variants: dict, n_ep: int) -> tuple[dict, dict]:
  """Each variant's :func:`summary`, its chunks timed interleaved; and the timings, per variant."""
  first = {name: timed(v.run) for name, v in variants.items()}  # compile (JAX) / warm-up (torch)
  times = {name: [] for name in variants}
  for _ in range(args.repeats):
    for name, v in variants.items():  # interleaved: one chunk of each per repetition
      times[name].append(timed(v.run))
  measured = {name: summary(ts, first[name], n_ep) for name, ts in times.items()}
  for name in measured:
    if name != "scan":  # per-repetition ratio to the scan chunk timed next to it: robust to load drift
      measured[name]["paired_ratio_to_scan"] = statistics.median(t / s for t, s in zip(times[name], times["scan"]))
  return measured, times


def print_record(record: dict, tag: str, n_ep: int) -> None:
  v, precision = record["variants"], record["precision"]
  s = v["scan"]
  print(f"{tag} jax scan : compile {s['compile_s']:6.2f} s (first call {s['first_call_s']:.2f} s) | "
        f"{s['ms_per_episode']:8.2f} ms/episode {s['episodes_per_s']:8.2f} episodes/s "
        f"[min {s['spread_ms_per_episode'][0]:.2f}, max {s['spread_ms_per_episode'][1]:.2f}] ({n_ep} episodes/chunk) | "
        f"{s['gflops']:.1f} GFLOP/s, {100 * s['peak_fraction']:.1f}% of the {precision} peak")
  for name, label, first in (("loop", "jax loop ", "compile"), ("torch", "torch    ", "warm-up")):
    if name in v:
      o = v[name]
      shown = o["compile_s"] if name == "loop" else o["first_call_s"]
      print(f"{tag} {label}: {first} {shown:6.2f} s | {o['ms_per_episode']:8.2f} ms/episode "
            f"{o['episodes_per_s']:8.2f} episodes/s [min {o['spread_ms_per_episode'][0]:.2f}, "
            f"max {o['spread_ms_per_episode'][1]:.2f}]  {name}/scan time ×{o['ms_per_episode'] / s['ms_per_episode']:.2f} "
            f"(paired ×{o['paired_ratio_to_scan']:.2f})")
  print(f"{tag} load {record['load_before']} -> {record['load_after']}", flush=True)


def main(argv=None) -> int:
  args = parse_args(argv)
  device = jax.devices()[0]
  shape = EpisodeShape(args.way, args.shot, args.query)
  peaks = {p: flops.matmul_peak_gflops(p) for p in args.precisions}
  torch_device, torch_note = torch_status(args.torch, device.platform)
  print(f"device: {device} ({device.platform}, {getattr(device, 'device_kind', '')}); jax {jax.__version__}; "
        f"python {platform.python_version()}; {os.cpu_count()} CPUs")
  print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}")
  print(torch_note)
  print(f"episode: {shape.way}-way {shape.shot}-shot {shape.query}-query, classifier {args.classifier}; "
        f"split {args.classes}×{args.per_class} random uint8; repeats {args.repeats}; load {load()}")
  print("matmul peaks, GFLOP/s: " + ", ".join(f"{p} {v:.0f}" for p, v in peaks.items()))
  results = []
  for size, n_ep in zip(args.sizes, args.episodes):
    channels = 1 if size <= 28 else 3
    input_shape = (size, size, channels)
    split = random_split(size, channels, args.classes, args.per_class, args.seed)
    source = DeviceSource.from_split(split, device)
    for head, precision in ((h, p) for h in args.heads for p in args.precisions):
      load_before = load()
      learner = EpisodicLearner(Conv4(conv=args.conv), shape, head=head, classifier=args.classifier,
                                precision=precision)
      step_flops = flops.program_flops(learning.lowered_step(learner, input_shape, input_shape))
      variants = {"scan": JaxScan(learner, source, input_shape, n_ep, args.seed)}
      if not args.no_loop:
        variants["loop"] = JaxLoop(learner, source, input_shape, n_ep, args.seed)
      if torch_device is not None:
        variants["torch"] = TorchRef(split, shape, head, n_ep, torch_device, args.seed)
      measured, _ = measure(args, variants, n_ep)
      record = {
          "size": size, "input_shape": list(input_shape), "head": head, "precision": precision,
          "gflop_per_episode": step_flops / 1e9, "peak_gflops": peaks[precision], "classifier": args.classifier,
          "way": shape.way, "shot": shape.shot, "query": shape.query, "episodes_per_chunk": n_ep,
          "repeats": args.repeats, "device": str(device), "platform": device.platform,
          "xla_flags": os.environ.get("XLA_FLAGS", ""), "load_before": load_before, "load_after": load(),
          "variants": measured,
      }
      scan = measured["scan"]
      scan["gflops"] = step_flops / 1e9 * scan["episodes_per_s"]
      scan["peak_fraction"] = scan["gflops"] / peaks[precision]
      results.append(record)
      print_record(record, f"{size}x{size}x{channels} {head:7s} {precision:13s}", n_ep)
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"argv": sys.argv, "torch": torch_note, "results": results}, f, indent=1)
    print(f"wrote {args.json}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
