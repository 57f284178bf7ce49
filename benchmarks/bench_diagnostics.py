"""Overhead of the training diagnostics: one diagnosed update vs a checkpoint's chunk of training.

``learning.train_chunk`` diagnoses only the last update of a chunk (an extra forward pass and
the diagnostics' arithmetic, behind a ``lax.cond``). This times that work alone, jitted, against
a whole ``--episodes``-episode chunk, and prints the ratio.

  python -m benchmarks.bench_diagnostics --size 28 --channels 1 --episodes 100   # from the repository root
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp

from fewshot.backbones import Conv4
from fewshot.episodic import learning
from fewshot.episodic.episodes import EpisodeShape, sample_episode
from fewshot.episodic.learning import EpisodicLearner
from fewshot.training.sources import DeviceSource

from benchmarks.bench_episodes import random_split


def median_seconds(fn, repeats: int) -> float:
  jax.block_until_ready(fn())  # compile
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--size", type=int, default=28)
  parser.add_argument("--channels", type=int, default=1)
  parser.add_argument("--episodes", type=int, default=100, help="episodes per checkpoint")
  parser.add_argument("--head", default="dr")
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()

  shape = EpisodeShape(5, 1, 16)
  source = DeviceSource.from_split(random_split(args.size, args.channels, 64, 20))
  learner = EpisodicLearner(Conv4(), shape, head=args.head)
  state = learning.init_state(learner, jax.random.key(0), (args.size, args.size, args.channels))
  episode = sample_episode(jax.random.key(1), source, shape)

  @jax.jit
  def diagnosed_update(state):
    new_state, _, before = learning.train_step(learner, state, episode)
    return learning.diagnose(learner, before, new_state, state.batch_stats, episode)

  @jax.jit
  def update(state):
    return learning.train_step(learner, state, episode)[1]

  # Not donated: the same state is timed again and again.
  chunk = lambda s: learning.train_chunk(learner, jax.tree.map(jnp.copy, s), source, jax.random.key(2), args.episodes)[1]
  diagnostics = median_seconds(lambda: diagnosed_update(state), args.repeats) - median_seconds(
      lambda: update(state), args.repeats)
  chunk_seconds = median_seconds(lambda: chunk(state), args.repeats)
  print(f"{args.size}x{args.size}x{args.channels} {args.head}: chunk of {args.episodes} episodes "
        f"{chunk_seconds:.3f} s; diagnostics of one update {1000 * diagnostics:.1f} ms "
        f"= {100 * diagnostics / chunk_seconds:.2f}% of the chunk")


if __name__ == "__main__":
  main()
