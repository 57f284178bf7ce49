"""Host streaming against a resident split: the same training episodes, and the host gather's own rate.

  python -m benchmarks.bench_streaming --size 84 --episodes 20 --repeats 3 --gather_sizes 84,224

* ``train``: ``learning.train_chunk`` (Conv4 ProtoNet, 5-way 1-shot 16-query, the paper's
  augmentation, RGB stored at int(1.15 * size)) on the same episodes from a ``DeviceSource``
  and from a ``HostSource``, the two alternating within every repetition; the median seconds
  per episode of each and their ratio (streamed / resident). Compile time is excluded (a first
  chunk of each is run before timing).
* ``gather``: ``HostSource.blocks`` alone (index draw, host gather, ``device_put``, prefetched)
  over ``--gather_episodes`` episodes of a split stored for each of ``--gather_sizes``:
  episodes per second and MB per second, the rate at which the host can feed a device.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import numpy as np

from fewshot.augment import Augmentation
from fewshot.backbones import Conv4
from fewshot.data.catalog import stored_size
from fewshot.episodic import learning
from fewshot.episodic.episodes import EpisodeShape
from fewshot.episodic.learning import EpisodicLearner
from fewshot.training.sources import DeviceSource, HostSource

from benchmarks.bench_episodes import random_split

SHAPE = EpisodeShape(5, 1, 16)


def train_ratio(size: int, episodes: int, repeats: int) -> dict:
  split = random_split(stored_size(size), 3, num_classes=32, per_class=20)
  learner = EpisodicLearner(Conv4(), SHAPE, augmentation=Augmentation.paper(size, 3))
  sources = {"resident": DeviceSource.from_split(split), "streamed": HostSource(split)}
  states = {name: learning.init_state(learner, jax.random.key(0), (size, size, 3)) for name in sources}
  key = jax.random.key(1)

  def chunk(name):
    states[name], metrics, _ = learning.train_chunk(learner, states[name], sources[name], key, episodes)
    jax.block_until_ready(metrics)
    return metrics

  first = {name: chunk(name) for name in sources}  # compiles; also the check that both saw the same episodes
  np.testing.assert_allclose(first["streamed"]["loss"], first["resident"]["loss"], rtol=1e-3)
  seconds = {name: [] for name in sources}
  for _ in range(repeats):
    for name in sources:
      start = time.perf_counter()
      chunk(name)
      seconds[name].append((time.perf_counter() - start) / episodes)
  median = {name: statistics.median(s) for name, s in seconds.items()}
  return {"size": size, "episodes_per_chunk": episodes, "repeats": repeats,
          **{f"{name}_s_per_episode": m for name, m in median.items()},
          "streamed_over_resident": median["streamed"] / median["resident"]}


def gather_rate(size: int, episodes: int) -> dict:
  stored = stored_size(size)
  split = random_split(stored, 3, num_classes=100, per_class=20)
  host = HostSource(split)
  episode_bytes = SHAPE.way * SHAPE.per_class * split.images[0].nbytes

  def stream():
    for drawn in host.blocks(jax.random.key(0), 0, episodes, SHAPE.way, SHAPE.per_class):
      jax.block_until_ready(drawn)

  stream()  # compiles the index draw
  start = time.perf_counter()
  stream()
  seconds = time.perf_counter() - start
  return {"size": size, "stored_size": stored, "episodes": episodes, "episode_mb": episode_bytes / 1e6,
          "episodes_per_s": episodes / seconds, "mb_per_s": episodes * episode_bytes / 1e6 / seconds}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--size", type=int, default=84, help="model input side of the training comparison")
  parser.add_argument("--episodes", type=int, default=20, help="episodes per timed chunk")
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--gather_sizes", default="84,224", help="model input sides of the gather-rate runs")
  parser.add_argument("--gather_episodes", type=int, default=500)
  parser.add_argument("--json", help="also write the results here")
  args = parser.parse_args()
  results = {"device": str(jax.devices()[0]), "train": train_ratio(args.size, args.episodes, args.repeats),
             "gather": [gather_rate(int(s), args.gather_episodes) for s in args.gather_sizes.split(",")]}
  t = results["train"]
  print(f"{results['device']}: Conv4 {t['size']}px 5w1s16q, s/episode resident {t['resident_s_per_episode']:.4f}, "
        f"streamed {t['streamed_s_per_episode']:.4f}, ratio {t['streamed_over_resident']:.3f}")
  for g in results["gather"]:
    print(f"gather {g['size']}px (stored {g['stored_size']}): {g['episodes_per_s']:.0f} episodes/s, "
          f"{g['mb_per_s']:.0f} MB/s ({g['episode_mb']:.1f} MB/episode)")
  if args.json:
    with open(args.json, "w") as f:
      json.dump(results, f, indent=1)


if __name__ == "__main__":
  main()
