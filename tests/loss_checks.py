"""Shared checks for the metric-learning losses: float64 loops as the independent computation, central
differences for gradients, degenerate batches and shape checks. One compiled value-and-gradient per loss serves
all of them (tests/dml/losses/).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

B, D = 12, 5
KINDS = ("balanced", "random", "unbalanced", "one_class", "no_positive")
# One coordinate of every item: each item's gradient is checked somewhere.
COORDS = [(i, (3 * i) % D) for i in range(B)]


def make_batch(kind: str, scale: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
  """Float64 embeddings ``[B, D]`` whose distances straddle the default margins, and int32 labels."""
  rng = np.random.default_rng(KINDS.index(kind))
  labels = {
      "balanced": rng.permutation(np.repeat(np.arange(3), 4)),
      "random": rng.integers(0, 4, B),
      "unbalanced": rng.permutation(np.array([0] * 5 + [1] * 3 + [2] * 2 + [3, 4])),  # two singletons
      "one_class": np.zeros(B, int),
      "no_positive": np.arange(B),
  }[kind]
  return scale * rng.normal(size=(B, D)), labels.astype(np.int32)


def euclid(a, b):
  return float(np.sqrt(np.sum((a - b) ** 2)))


def sq_euclid(a, b):
  return float(np.sum((a - b) ** 2))


def cosine(a, b):
  return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def mean_or_zero(values) -> float:
  return float(np.mean(values)) if len(values) else 0.0


def logsumexp(values) -> float:
  return float(np.logaddexp.reduce(np.asarray(values, np.float64)))


def ordered_pairs(labels):
  """``(i, j, same)`` for every ordered pair ``i != j``."""
  for i in range(len(labels)):
    for j in range(len(labels)):
      if i != j:
        yield i, j, labels[i] == labels[j]


@dataclasses.dataclass(frozen=True, eq=False)  # hashed by identity, for the jit caches
class Case:
  """A JAX loss ``(e, l, **params)``, its numpy loop ``(x, y, **params)``, and its learnable params."""

  name: str
  loss: Callable
  reference: Callable
  params: dict = dataclasses.field(default_factory=dict)
  needs_positive: bool = True  # 0 without a positive pair (the pair losses still push negatives)
  # The loop whose central differences give the gradient (for losses with stop_gradient weights).
  fd_reference: Callable | None = None
  variant: bool = False  # a non-default setting: its value is checked, its gradient only by the default

  def __repr__(self):
    return self.name


def _jax_params(params, dtype):
  return {k: jnp.asarray(v, dtype) for k, v in params.items()}


@functools.lru_cache(maxsize=None)
def _jitted_value_and_grad(case: Case):
  """One compiled ``(e, l, params) -> (loss, (d/de, d/dparams))`` per case and batch shape, shared by the checks."""
  return jax.jit(jax.value_and_grad(lambda e, l, p: case.loss(e, l, **p), argnums=(0, 2)))


def run_case(case: Case, x, y, params=None):
  params = case.params if params is None else params
  value, (grad_x, grad_params) = _jitted_value_and_grad(case)(
      jnp.asarray(x, jnp.float32), jnp.asarray(y), _jax_params(params, jnp.float32))
  return float(value), np.asarray(grad_x), {k: np.asarray(v) for k, v in grad_params.items()}


def float32_point(kind: str) -> tuple[np.ndarray, np.ndarray]:
  """A batch rounded to float32 and held in float64, so that both sides see the same point."""
  x, y = make_batch(kind)
  return x.astype(np.float32).astype(np.float64), y


def check_values(case: Case, kinds=KINDS, rtol=1e-4, atol=1e-6) -> None:
  for kind in kinds:
    x, y = float32_point(kind)
    np.testing.assert_allclose(run_case(case, x, y)[0], case.reference(x, y, **case.params),
                               rtol=rtol, atol=atol, err_msg=kind)


def central_difference(f, point, coords, h=1e-6):
  out = []
  for c in coords:
    up, down = np.array(point, np.float64), np.array(point, np.float64)
    up[c] += h
    down[c] -= h
    out.append((f(up) - f(down)) / (2 * h))
  return np.array(out)


def _assert_gradient(got, want, what):
  # float32 gradients against float64 differences: relative 1e-3, absolute 1e-5 of the largest entry.
  np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5 * max(np.abs(want).max(), 1e-3), err_msg=what)


def check_gradients(case: Case, kind: str = "unbalanced") -> None:
  x, y = float32_point(kind)
  fd_reference = case.fd_reference(x) if case.fd_reference else case.reference
  _, grad_x, grad_params = run_case(case, x, y)
  want = central_difference(lambda z: fd_reference(z, y, **case.params), x, COORDS)
  assert np.abs(want).max() > 1e-3, "the checked coordinates should carry some gradient"
  _assert_gradient(np.array([grad_x[c] for c in COORDS]), want, "embeddings")
  for name, value in case.params.items():
    value = np.asarray(value, np.float32).astype(np.float64)
    coords = list(np.ndindex(value.shape))
    fd = central_difference(lambda v: fd_reference(x, y, **{**case.params, name: v}), value, coords)
    _assert_gradient(grad_params[name].reshape(-1), fd, name)


def check_degenerate_batches(case: Case) -> None:
  value, grad_x, grad_params = run_case(case, np.zeros((0, D)), np.zeros((0,), np.int32))
  assert value == 0.0 and grad_x.shape == (0, D)
  assert all(np.all(g == 0) for g in grad_params.values())

  x, y = make_batch("no_positive")
  value, grad_x, grad_params = run_case(case, x, y)
  grads = [grad_x, *grad_params.values()]
  assert all(np.all(np.isfinite(g)) for g in grads)
  if case.needs_positive:
    assert value == 0.0 and all(np.all(g == 0) for g in grads)

  for scale in (0.0, 1e3):  # coincident points; points far beyond every margin and temperature
    value, grad_x, grad_params = run_case(case, scale * x, make_batch("balanced")[1])
    assert np.isfinite(value) and all(np.all(np.isfinite(g)) for g in [grad_x, *grad_params.values()]), scale


def check_shapes_rejected(case: Case) -> None:
  x, y = make_batch("balanced")
  params = _jax_params(case.params, jnp.float32)
  with pytest.raises(AssertionError):
    case.loss(jnp.asarray(x, jnp.float32), jnp.asarray(y[:-1]), **params)
  with pytest.raises(AssertionError):
    case.loss(jnp.asarray(x[0], jnp.float32), jnp.asarray(y), **params)


# ----------------------------------------------------------------------------- numpy loops
