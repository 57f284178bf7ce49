"""Reductions over masked, possibly empty, sets: what every metric-learning loss reduces with.

A batch's labels decide which entries of a pairwise matrix belong to a set (the positives
of an anchor, its negatives, the valid triplets), and under jit a set may be empty. These
return finite values with zero gradients for empty sets: a mean of nothing is 0, and a
log-sum-exp of nothing is 0 with a flag saying the set was empty, so a loss can mask
such rows out.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

Array = chex.Array


def masked_mean(values: Array, mask: Array) -> Array:
  """Mean of ``values`` where ``mask`` holds; 0 (and a zero gradient) when it holds nowhere.

  Masked-out entries are replaced by 0 before summing, so they must be finite in the
  forward pass; the gradient through them is zero either way.
  """
  chex.assert_equal_shape([values, mask])
  total = jnp.sum(jnp.where(mask, values, 0.0))
  return total / jnp.maximum(jnp.sum(mask), 1).astype(total.dtype)


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
