"""Helpers of the embedding losses: batch checks and log-sum-exps over masked, possibly empty, sets.

A batch's labels decide which entries of a pairwise matrix belong to a set (the positives
of an anchor, its negatives), and under jit a set may be empty. The helpers here return
finite values with zero gradients for empty sets, plus a flag saying the set was empty,
so that a loss can mask such rows out with :func:`fewshot.dml.tuples.masked_mean`.
"""

from __future__ import annotations

from typing import Callable

import chex
import jax
import jax.numpy as jnp

from fewshot.dml.tuples import pair_masks

Array = chex.Array
Pairwise = Callable[[Array, Array], Array]


def check_batch(embeddings: Array, labels: Array) -> None:
  """Embeddings ``float [B, d]`` and labels ``int [B]`` of one batch."""
  chex.assert_rank([embeddings, labels], [2, 1])
  chex.assert_equal_shape_prefix([embeddings, labels], 1)
  chex.assert_type([embeddings, labels], [float, int])


def pairwise(embeddings: Array, labels: Array, fn: Pairwise) -> tuple[Array, Array, Array]:
  """``fn`` between all items of a checked batch, ``[B, B]``, with the positive and negative pair masks."""
  check_batch(embeddings, labels)
  return (fn(embeddings, embeddings), *pair_masks(labels))


def masked_logsumexp(values: Array, mask: Array, axis: int = -1) -> tuple[Array, Array]:
  r""":math:`\log \sum_{k \in \text{mask}} e^{v_k}` along ``axis``, and whether the set had any entry.

  An empty set has a log-sum-exp of :math:`-\infty`; here it is 0 with a zero gradient, and
  its flag is False so that the caller can drop it.
  """
  chex.assert_equal_shape([values, mask])
  nonempty = jnp.any(mask, axis=axis)
  shift = jax.lax.stop_gradient(jnp.max(values, axis=axis, keepdims=True, where=mask, initial=-jnp.inf))
  shift = jnp.where(jnp.isfinite(shift), shift, 0.0)
  # Mask before exp, not after: an exp that overflows outside the set, times the zero
  # cotangent that `where` sends it, is NaN.
  total = jnp.sum(jnp.exp(jnp.where(mask, values - shift, -jnp.inf)), axis=axis)
  # The double where: log(0) of an empty set would send an infinite gradient into the sum.
  return jnp.log(jnp.where(nonempty, total, 1.0)) + jnp.squeeze(shift, axis), nonempty


def log1p_sum_exp(values: Array, mask: Array, axis: int = -1) -> Array:
  r""":math:`\log\bigl(1 + \sum_{k \in \text{mask}} e^{v_k}\bigr)` along ``axis``: 0 for an empty set."""
  lse, nonempty = masked_logsumexp(values, mask, axis)
  return jnp.where(nonempty, jax.nn.softplus(lse), 0.0)
