"""Tuple losses and the triplet miners against float64 numpy loops over anchors and triplets.

The shared checks (value, gradient by central differences, degenerate batches, shape
checks) live in tests/loss_checks.py; this file adds the loops of the tuple losses
and of batch-hard / semi-hard mining.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot import distances
from fewshot.dml import miners
from fewshot.dml.losses import tuple_losses

from loss_checks import (
  Case,
  check_degenerate_batches,
  check_gradients,
  check_shapes_rejected,
  check_values,
  cosine,
  euclid,
  logsumexp,
  make_batch,
  mean_or_zero,
  sq_euclid,
)


def softplus(z):
  return float(np.logaddexp(0.0, z))


def positives_and_negatives(y, i):
  return [j for j in range(len(y)) if j != i and y[j] == y[i]], [k for k in range(len(y)) if y[k] != y[i]]


def ref_triplet_terms(x, y, triplets, margin=0.2, dist=euclid):
  return [max(0.0, dist(x[a], x[p]) - dist(x[a], x[n]) + margin) for a, p, n in triplets]


def loop_all_triplets(y):
  return [(a, p, n) for a in range(len(y)) for p in positives_and_negatives(y, a)[0]
          for n in positives_and_negatives(y, a)[1]]


def loop_batch_hard(x, y, dist=euclid):
  out = []
  for a in range(len(y)):
    pos, neg = positives_and_negatives(y, a)
    if pos and neg:
      out.append((a, max(pos, key=lambda p: dist(x[a], x[p])), min(neg, key=lambda n: dist(x[a], x[n]))))
  return out


def loop_semi_hard(x, y, margin, dist=euclid):
  out = []
  for a in range(len(y)):
    pos, neg = positives_and_negatives(y, a)
    for p in pos:
      d_ap = dist(x[a], x[p])
      semi = [n for n in neg if d_ap < dist(x[a], x[n]) < d_ap + margin]
      if semi:
        out.append((a, p, min(semi, key=lambda n: dist(x[a], x[n]))))
  return out


def ref_triplet(x, y, margin=0.2, dist=euclid):
  return mean_or_zero(ref_triplet_terms(x, y, loop_all_triplets(y), margin, dist))


def ref_npair(x, y, l2_reg=0.002):
  members = {}
  for i, c in enumerate(y):
    members.setdefault(c, []).append(i)
  pairs = [m[:2] for m in members.values() if len(m) >= 2]
  if not pairs:
    return 0.0
  losses = []
  for i, (a, p) in enumerate(pairs):
    others = [np.exp(x[a] @ x[q] - x[a] @ x[p]) for j, (_, q) in enumerate(pairs) if j != i]
    losses.append(np.log1p(np.sum(others)))
  return float(np.mean(losses) + l2_reg * np.mean([x[k] @ x[k] for pair in pairs for k in pair]))


def ref_ntxent(x, y, temperature=0.1):
  losses = []
  for a in range(len(y)):
    pos, neg = positives_and_negatives(y, a)
    for p in pos:
      numerator = np.exp(cosine(x[a], x[p]) / temperature)
      denominator = numerator + sum(np.exp(cosine(x[a], x[n]) / temperature) for n in neg)
      losses.append(-np.log(numerator / denominator))
  return mean_or_zero(losses)


def ref_multi_similarity(x, y, alpha=2.0, beta=50.0, base=0.5, epsilon=0.1):
  total = 0.0
  for i in range(len(y)):
    pos, neg = positives_and_negatives(y, i)
    s_pos, s_neg = [cosine(x[i], x[j]) for j in pos], [cosine(x[i], x[k]) for k in neg]
    if not s_pos or not s_neg:
      continue
    kept_neg = [s for s in s_neg if s + epsilon > min(s_pos)]
    kept_pos = [s for s in s_pos if s - epsilon < max(s_neg)]
    if kept_pos and kept_neg:
      total += np.log1p(sum(np.exp(-alpha * (s - base)) for s in kept_pos)) / alpha
      total += np.log1p(sum(np.exp(beta * (s - base)) for s in kept_neg)) / beta
  return total / len(y) if len(y) else 0.0


def ref_circle(x, y, margin=0.25, gamma=256.0, weights_at=None):
  """Circle loss; the weights alpha_p, alpha_n are taken at ``weights_at`` (held fixed, as stop_gradient does)."""
  w = x if weights_at is None else weights_at
  losses = []
  for i in range(len(y)):
    pos, neg = positives_and_negatives(y, i)
    if pos and neg:
      lp = [-gamma * max(0.0, 1 + margin - cosine(w[i], w[j])) * (cosine(x[i], x[j]) - (1 - margin)) for j in pos]
      ln = [gamma * max(0.0, cosine(w[i], w[k]) + margin) * (cosine(x[i], x[k]) - margin) for k in neg]
      losses.append(softplus(logsumexp(ln) + logsumexp(lp)))
  return mean_or_zero(losses)


def ref_fastap(x, y, num_bins=10, max_distance=4.0):
  u = x / np.linalg.norm(x, axis=1, keepdims=True)
  centres, width = np.linspace(0.0, max_distance, num_bins), max_distance / (num_bins - 1)
  losses = []
  for i in range(len(y)):
    pos, _ = positives_and_negatives(y, i)
    if not pos:
      continue
    h_pos, h_all = np.zeros(num_bins), np.zeros(num_bins)
    for j in range(len(y)):
      if j == i:
        continue
      for b in range(num_bins):
        pulse = max(0.0, 1.0 - abs(sq_euclid(u[i], u[j]) - centres[b]) / width)
        h_all[b] += pulse
        h_pos[b] += pulse if y[j] == y[i] else 0.0
    cum_pos, cum_all = np.cumsum(h_pos), np.cumsum(h_all)
    ap = sum(h_pos[b] * cum_pos[b] / cum_all[b] for b in range(num_bins) if cum_all[b] > 0) / len(pos)
    losses.append(1.0 - ap)
  return mean_or_zero(losses)


TUPLE_CASES = [
    Case("triplet", tuple_losses.triplet_margin_loss, ref_triplet),
    Case("triplet_squared", functools.partial(tuple_losses.triplet_margin_loss, margin=0.5,
                                              distance=distances.squared_euclidean),
         functools.partial(ref_triplet, margin=0.5, dist=sq_euclid), variant=True),
    Case("npair", functools.partial(tuple_losses.npair_loss, l2_reg=0.1), functools.partial(ref_npair, l2_reg=0.1)),
    Case("ntxent", tuple_losses.ntxent_loss, ref_ntxent),
    Case("ntxent_t05", functools.partial(tuple_losses.ntxent_loss, temperature=0.5),
         functools.partial(ref_ntxent, temperature=0.5), variant=True),
    Case("multi_similarity", tuple_losses.multi_similarity_loss, ref_multi_similarity),
    Case("multi_similarity_unmined", functools.partial(tuple_losses.multi_similarity_loss, epsilon=float("inf")),
         functools.partial(ref_multi_similarity, epsilon=float("inf")), variant=True),
    Case("circle", tuple_losses.circle_loss, ref_circle,
         fd_reference=lambda x0: functools.partial(ref_circle, weights_at=x0)),
    Case("circle_80", functools.partial(tuple_losses.circle_loss, margin=0.4, gamma=80.0),
         functools.partial(ref_circle, margin=0.4, gamma=80.0), variant=True),
    Case("fastap", tuple_losses.fastap_loss, ref_fastap),
    Case("fastap_5", functools.partial(tuple_losses.fastap_loss, num_bins=5), functools.partial(ref_fastap, num_bins=5),
         variant=True),
]


@pytest.mark.parametrize("case", TUPLE_CASES, ids=repr)
def test_value_matches_loops(case):
  # The circle loss's gamma = 256 scales float32 rounding of the cosines by that much.
  check_values(case, rtol=3e-4 if case.name.startswith("circle") else 1e-4)


@pytest.mark.parametrize("case", [c for c in TUPLE_CASES if not c.variant], ids=repr)
def test_gradient_matches_finite_differences(case):
  check_gradients(case)


@pytest.mark.parametrize("case", [c for c in TUPLE_CASES if not c.variant], ids=repr)
def test_degenerate_batches_are_finite(case):
  check_degenerate_batches(case)


@pytest.mark.parametrize("case", TUPLE_CASES[::4], ids=repr)
def test_shapes_are_checked(case):
  check_shapes_rejected(case)


def test_multi_similarity_mining_drops_pairs():
  x, y = make_batch("balanced")
  assert ref_multi_similarity(x, y) != pytest.approx(ref_multi_similarity(x, y, epsilon=float("inf")), rel=1e-3)


def _mined(triplets):
  valid = np.asarray(triplets.valid)
  return sorted(zip(*(np.asarray(getattr(triplets, f))[valid].tolist() for f in ("anchor", "positive", "negative"))))


@pytest.mark.parametrize("kind", ["balanced", "unbalanced", "random"])
def test_batch_hard_matches_loops(kind):
  x, y = make_batch(kind)
  x32 = x.astype(np.float32)
  triplets = jax.jit(miners.batch_hard)(x32, y)
  expected = loop_batch_hard(x32.astype(float), y)
  assert _mined(triplets) == sorted(expected)
  loss = jax.jit(tuple_losses.triplet_margin_loss)(x32, y, triplets)
  np.testing.assert_allclose(loss, mean_or_zero(ref_triplet_terms(x32.astype(float), y, expected)), rtol=1e-5)


@pytest.mark.parametrize("kind", ["balanced", "unbalanced", "random"])
def test_semi_hard_matches_loops(kind):
  margin = 0.5
  x, y = make_batch(kind)
  x32 = x.astype(np.float32)
  triplets = jax.jit(functools.partial(miners.semi_hard, margin=margin))(x32, y)
  expected = loop_semi_hard(x32.astype(float), y, margin)
  assert len(expected) > 3 and _mined(triplets) == sorted(expected)
  loss = jax.jit(functools.partial(tuple_losses.triplet_margin_loss, margin=margin))(x32, y, triplets)
  want = ref_triplet_terms(x32.astype(float), y, expected, margin)
  assert min(want) > 0  # semi-hard triplets all lie inside the margin
  np.testing.assert_allclose(loss, np.mean(want), rtol=1e-5)


def test_triplet_loss_with_mined_triplets_has_a_finite_zero_gradient_without_positives():
  x, y = make_batch("no_positive")
  loss = jax.jit(jax.value_and_grad(lambda e: tuple_losses.triplet_margin_loss(e, y, miners.batch_hard(e, y))))
  value, grad = loss(jnp.asarray(x, jnp.float32))
  assert float(value) == 0.0 and np.all(np.asarray(grad) == 0)


@pytest.mark.parametrize("miner", [miners.batch_hard, miners.semi_hard], ids=["batch_hard", "semi_hard"])
def test_miners_accept_an_empty_batch(miner):
  triplets = miner(jnp.zeros((0, 3)), jnp.zeros((0,), jnp.int32))
  assert triplets.valid.shape == (0,)


def test_npair_uses_the_first_two_items_of_each_class():
  # Class 0 has a third item far away: it must not take part.
  x = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [-50.0, 3.0]])
  y = np.array([0, 0, 1, 1, 0], np.int32)
  got = jax.jit(functools.partial(tuple_losses.npair_loss, l2_reg=0.0))(jnp.asarray(x, jnp.float32), y)
  np.testing.assert_allclose(got, ref_npair(x[:4], y[:4], l2_reg=0.0), rtol=1e-5)


def test_fastap_is_zero_for_perfectly_ranked_classes():
  x = np.array([[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [-1.0, 0.0]], np.float32)
  y = np.array([0, 0, 1, 1], np.int32)
  np.testing.assert_allclose(jax.jit(tuple_losses.fastap_loss)(x, y), 0.0, atol=1e-6)
  with pytest.raises(ValueError, match="num_bins"):
    tuple_losses.fastap_loss(x, y, num_bins=1)
