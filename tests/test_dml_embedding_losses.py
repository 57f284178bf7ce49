"""Pair losses against float64 numpy loops; the shared checks that test_dml_tuple_losses.py reuses.

Every loss (float32, jitted) is compared in value with an independent float64 loop over
pairs on batches of several label layouts, in gradient with central differences of that
loop, and on degenerate batches: empty, without positives, coincident points, points far
apart. One compiled value-and-gradient per loss serves all of these checks.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot.dml.losses import pair_losses
from fewshot.dml.masked import log1p_sum_exp, masked_logsumexp

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


def ref_contrastive(x, y, margin=1.0):
  terms = [euclid(x[i], x[j]) ** 2 if same else max(0.0, margin - euclid(x[i], x[j])) ** 2
           for i, j, same in ordered_pairs(y)]
  return mean_or_zero(terms)


def ref_two_margin(x, y, pos_margin=0.0, neg_margin=1.0):
  pos = [max(0.0, euclid(x[i], x[j]) - pos_margin) for i, j, same in ordered_pairs(y) if same]
  neg = [max(0.0, neg_margin - euclid(x[i], x[j])) for i, j, same in ordered_pairs(y) if not same]
  return mean_or_zero(pos) + mean_or_zero(neg)


def ref_margin(x, y, beta, alpha=0.2):
  beta = np.asarray(beta, np.float64)
  losses = []
  for i, j, same in ordered_pairs(y):
    b = float(beta) if beta.ndim == 0 else float(beta[y[i]])
    losses.append(max(0.0, alpha + (1.0 if same else -1.0) * (euclid(x[i], x[j]) - b)))
  nonzero = [v for v in losses if v > 0]
  return float(np.sum(nonzero) / len(nonzero)) if nonzero else 0.0


def ref_bce(x, y, weight, bias, eps=1e-5):
  pairs = [(i, j) for i in range(len(y)) for j in range(i + 1, len(y))]
  if not pairs:
    return 0.0
  d = np.array([euclid(x[i], x[j]) for i, j in pairs])
  a = weight * (d - d.mean()) / np.sqrt(d.var() + eps) + bias
  sig = 1.0 / (1.0 + np.exp(-a))
  target = np.array([float(y[i] == y[j]) for i, j in pairs])
  return float(np.mean(-target * np.log(sig) - (1 - target) * np.log(1 - sig)))


def ref_lifted(x, y, margin=1.0):
  terms = []
  for i, j, same in ordered_pairs(y):
    if not same or j < i:
      continue
    negatives = [margin - euclid(x[i], x[k]) for k in range(len(y)) if y[k] != y[i]]
    negatives += [margin - euclid(x[j], x[k]) for k in range(len(y)) if y[k] != y[j]]
    if negatives:
      terms.append(max(0.0, logsumexp(negatives) + euclid(x[i], x[j])) ** 2)
  return float(np.sum(terms) / (2 * len(terms))) if terms else 0.0


PAIR_CASES = [
    Case("contrastive", pair_losses.contrastive_loss, ref_contrastive, needs_positive=False),
    Case("contrastive_m2", functools.partial(pair_losses.contrastive_loss, margin=2.0),
         functools.partial(ref_contrastive, margin=2.0), needs_positive=False, variant=True),
    Case("two_margin", functools.partial(pair_losses.two_margin_contrastive_loss, pos_margin=0.3, neg_margin=1.5),
         functools.partial(ref_two_margin, pos_margin=0.3, neg_margin=1.5), needs_positive=False),
    Case("margin", pair_losses.margin_loss, ref_margin, {"beta": 1.2}, needs_positive=False),
    Case("margin_per_class", pair_losses.margin_loss, ref_margin,
         {"beta": np.array([1.0, 1.3, 1.5, 0.9, 1.2, 1.1, 1.4, 1.0, 1.2, 1.3, 1.1, 1.6])}, needs_positive=False),
    Case("bce", pair_losses.bce_pair_loss, ref_bce, {"weight": -1.5, "bias": 0.3}, needs_positive=False),
    Case("lifted", pair_losses.lifted_structure_loss, ref_lifted),
]


@pytest.mark.parametrize("case", PAIR_CASES, ids=repr)
def test_value_matches_loops(case):
  check_values(case)


@pytest.mark.parametrize("case", [c for c in PAIR_CASES if not c.variant], ids=repr)
def test_gradient_matches_finite_differences(case):
  check_gradients(case)


@pytest.mark.parametrize("case", PAIR_CASES, ids=repr)
def test_degenerate_batches_are_finite(case):
  check_degenerate_batches(case)


@pytest.mark.parametrize("case", PAIR_CASES[::3], ids=repr)
def test_shapes_are_checked(case):
  check_shapes_rejected(case)


def test_init_params_plug_into_the_losses():
  x, y = make_batch("balanced")
  e = jnp.asarray(x, jnp.float32)
  params = pair_losses.init_bce_pair_params()
  assert float(params["weight"]) < 0
  got = jax.jit(pair_losses.bce_pair_loss)(e, y, **params)
  np.testing.assert_allclose(got, ref_bce(x.astype(np.float32).astype(float), y, -1.0, 0.0), rtol=1e-4)
  per_class, shared = pair_losses.init_margin_params(3), pair_losses.init_margin_params()
  assert per_class["beta"].shape == (3,) and shared["beta"].shape == ()
  margin = jax.jit(pair_losses.margin_loss)
  np.testing.assert_allclose(margin(e, y, **per_class), margin(e, y, **shared), rtol=1e-6)


def test_bce_is_stable_for_saturated_logits():
  x, y = make_batch("balanced")
  value, grads = jax.jit(jax.value_and_grad(pair_losses.bce_pair_loss, argnums=(0, 2, 3)))(
      jnp.asarray(x, jnp.float32), y, jnp.float32(-1e4), jnp.float32(0.0))
  assert np.isfinite(float(value)) and float(value) > 1.0
  assert all(np.all(np.isfinite(g)) for g in grads)


def test_masked_logsumexp_over_empty_sets_and_huge_outsiders():
  values = jnp.array([[1.0, 2.0, 1e4], [3.0, -1e4, 5.0], [7.0, 8.0, 9.0]])
  mask = jnp.array([[True, True, False], [True, True, True], [False, False, False]])
  lse, nonempty = masked_logsumexp(values, mask, axis=1)
  np.testing.assert_allclose(lse, [logsumexp([1, 2]), logsumexp([3, -1e4, 5]), 0.0], rtol=1e-6)
  assert nonempty.tolist() == [True, True, False]
  grad = np.asarray(jax.grad(lambda v: jnp.sum(masked_logsumexp(v, mask, axis=1)[0]))(values))
  softmax = np.exp([1, 2]) / np.exp([1, 2]).sum()
  np.testing.assert_allclose(grad[0], [*softmax, 0.0], rtol=1e-6)
  assert np.all(grad[2] == 0) and np.all(np.isfinite(grad))
  want = np.logaddexp(0.0, [logsumexp([1, 2]), logsumexp([3, -1e4, 5]), -np.inf])
  np.testing.assert_allclose(log1p_sum_exp(values, mask, axis=1), want, rtol=1e-6)
