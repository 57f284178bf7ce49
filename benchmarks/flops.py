"""Floating-point operations of a program from its layer shapes, and the device's peak at each precision.

XLA's cost analysis counts a matrix product it compiles itself (the CPU's im2col products) but not one it hands to a
library (cuDNN's convolutions, cuBLAS's products on a GPU), so on a GPU it reported 1.76 GFLOP for an 84×84 Conv4
training episode whose layers need about 50. :func:`program_flops` counts every ``dot_general`` and ``convolution``
of the lowered program from its operand shapes instead, the same on every backend: ``2 × output elements ×
multiply-adds per output``.

  python -m benchmarks.flops    # Conv4's training episode at 28 and 84 px, and this device's peaks
"""

from __future__ import annotations

import math
import re
import time

import jax
import jax.numpy as jnp

from fewshot import choices, numerics

_TENSOR = r"tensor<([0-9x]+)x\w+>"
_DOT = re.compile(r"stablehlo\.dot_general .*?contracting_dims = \[([0-9, ]*)\] x .*?: \(" + _TENSOR + ", "
                  + _TENSOR + r"\) -> " + _TENSOR)
_CONV = re.compile(r"stablehlo\.convolution\(.*?dim_numbers = \[[^\]]*\]x\[([^\]]*)\]->.*?: \(" + _TENSOR + ", "
                   + _TENSOR + r"\) -> " + _TENSOR)


def _shape(text: str) -> list[int]:
  return [int(n) for n in text.split("x")]


def program_flops(lowered) -> float:
  """FLOPs of every matrix product and convolution in a lowered program (``jax.jit(f).lower(...)``).

  A product's multiply-adds per output element are its contraction: the product of the left operand's contracting
  dimensions; a convolution's, its kernel's size over its output features (window × input features per group). A
  ``lax.scan`` body counts once.

  >>> f = jax.jit(lambda a, b: a @ b).lower(jnp.ones((4, 3)), jnp.ones((3, 5)))
  >>> program_flops(f)
  120.0
  """
  total = 0.0
  for line in lowered.as_text().splitlines():
    if (dot := _DOT.search(line)) is not None:
      lhs, out = _shape(dot[2]), _shape(dot[4])
      contraction = math.prod(lhs[int(d)] for d in dot[1].split(",") if d.strip())
      total += 2.0 * math.prod(out) * contraction
    elif (conv := _CONV.search(line)) is not None:
      kernel_layout = [d.strip() for d in conv[1].split(",")]
      kernel, out = _shape(conv[3]), _shape(conv[4])
      total += 2.0 * math.prod(out) * math.prod(kernel) / kernel[kernel_layout.index("o")]
  return total


def matmul_peak_gflops(precision: str, n: int | None = None, repeats: int = 10) -> float:
  """The device's practical peak under a ``--precision`` name: the best GFLOP/s of an n×n float32 matrix product
  (n = 1024 on a CPU, 8192 elsewhere) on random data.
  """
  n = n or (1024 if jax.default_backend() == "cpu" else 8192)
  x = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
  dot = jax.jit(lambda a: jnp.matmul(a, a, precision=numerics.BACKBONE_PRECISIONS[precision]))
  dot(x).block_until_ready()
  best = math.inf
  for _ in range(repeats):
    start = time.perf_counter()
    dot(x).block_until_ready()
    best = min(best, time.perf_counter() - start)
  return 2 * n**3 / best / 1e9


def peaks() -> dict[str, float]:
  """:func:`matmul_peak_gflops` for every ``--precision`` name, measured now, in this process."""
  return {precision: matmul_peak_gflops(precision) for precision in choices.PRECISIONS}


def main() -> None:
  from fewshot.backbones import Conv4
  from fewshot.episodic import learning
  from fewshot.episodic.episodes import EpisodeShape

  for size, channels in ((28, 1), (84, 3)):
    learner = learning.EpisodicLearner(Conv4(conv="lax"), EpisodeShape(5, 1, 16), head="dr")
    lowered = learning.lowered_step(learner, (size, size, channels), (size, size, channels))
    print(f"Conv4 {size}x{size}x{channels}, 5-way 1-shot 16-query: {program_flops(lowered) / 1e9:.2f} GFLOP per "
          "training episode")
  print(f"{jax.default_backend()} ({jax.devices()[0].device_kind}) matmul peaks, GFLOP/s: "
        + ", ".join(f"{name} {value:.0f}" for name, value in peaks().items()))


if __name__ == "__main__":
  main()
