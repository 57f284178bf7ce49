"""Cost of the heads' exact class distances: difference form vs the matmul expansion, side by side.

One Conv4 training step (forward, head, cross-entropy, gradient, Adam) on a fixed 5-way
1-shot 16-query episode, jitted once per form and per size; the two forms alternate within
every repetition so machine load hits both alike. Reports the median step time of each and
their ratio, and the largest difference between the two forms' gradients.

  python -m experiments.bench_head_distance --sizes 28,84 --heads dr --classifiers proto,nn --repeats 7
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from fewshot import distances, heads
from fewshot.backbones import Conv4

FORMS = {"difference": distances.squared_euclidean, "matmul": distances.squared_euclidean_matmul}


def make_step(model, optimizer, way: int, shot: int, classifier: str, head: str, squared_distance):
  def loss_fn(params, batch_stats, images, support_labels, query_labels):
    z, updates = model.apply({"params": params["backbone"], "batch_stats": batch_stats}, images, train=True,
                             mutable=["batch_stats"])
    support, query = z[: way * shot], z[way * shot:]
    sq = heads.class_squared_distances(support, support_labels, query, way, classifier, squared_distance)
    logits = heads.logits_from_distances(sq, head, params["rho"])
    return heads.loss_and_accuracy(logits, query_labels)[0], updates["batch_stats"]

  @jax.jit
  def step(params, batch_stats, opt_state, images, support_labels, query_labels):
    (loss, batch_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(
        params, batch_stats, images, support_labels, query_labels)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), batch_stats, opt_state, loss, grads

  return step


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--sizes", default="28,84")
  parser.add_argument("--heads", default="dr")
  parser.add_argument("--classifiers", default="proto")
  parser.add_argument("--way", type=int, default=5)
  parser.add_argument("--shot", type=int, default=1)
  parser.add_argument("--query", type=int, default=16)
  parser.add_argument("--repeats", type=int, default=7)
  parser.add_argument("--steps", type=int, default=10, help="steps timed per repetition")
  args = parser.parse_args()
  way, shot, query = args.way, args.shot, args.query
  for size in map(int, args.sizes.split(",")):
    channels = 1 if size == 28 else 3
    rng = np.random.default_rng(0)
    images = jnp.asarray(rng.uniform(size=(way * (shot + query), size, size, channels)), jnp.float32)
    support_labels = jnp.repeat(jnp.arange(way), shot)
    query_labels = jnp.repeat(jnp.arange(way), query)
    model, optimizer = Conv4(), optax.adam(1e-3)
    variables = model.init(jax.random.key(0), images[:2], train=False)
    params = {"backbone": variables["params"], "rho": jnp.float32(heads.RHO_INIT)}
    for classifier in args.classifiers.split(","):
      for head in args.heads.split(","):
        steps = {name: make_step(model, optimizer, way, shot, classifier, head, f) for name, f in FORMS.items()}
        grads = {}
        for name, step in steps.items():  # compile, and keep the first step's gradients
          out = step(params, variables["batch_stats"], optimizer.init(params), images, support_labels, query_labels)
          grads[name] = jax.block_until_ready(out[4])
        times = {name: [] for name in steps}
        for _ in range(args.repeats):
          for name, step in steps.items():
            state = (params, variables["batch_stats"], optimizer.init(params))
            start = time.perf_counter()
            for _ in range(args.steps):
              *state, loss, _ = step(*state, images, support_labels, query_labels)
            jax.block_until_ready(state)
            times[name].append((time.perf_counter() - start) / args.steps)
        medians = {name: 1e3 * statistics.median(t) for name, t in times.items()}
        gap = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree.leaves(grads["difference"]),
                                                                   jax.tree.leaves(grads["matmul"])))
        print(f"{size}x{size} {classifier}/{head}: difference {medians['difference']:.1f} ms/step, "
              f"matmul {medians['matmul']:.1f} ms/step, ratio {medians['difference'] / medians['matmul']:.3f}; "
              f"largest gradient difference {gap:.2e}", flush=True)


if __name__ == "__main__":
  main()
