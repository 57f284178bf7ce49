"""Pair losses against float64 numpy loops (the checks live in loss_checks.py, shared with the tuple losses)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot.dml.losses import pair_losses
from fewshot.dml.masked import log1p_sum_exp, masked_logsumexp

from loss_checks import (
  Case,
  check_degenerate_batches,
  check_gradients,
  check_shapes_rejected,
  check_values,
  euclid,
  logsumexp,
  make_batch,
  mean_or_zero,
  ordered_pairs,
)


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
