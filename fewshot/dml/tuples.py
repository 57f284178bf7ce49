"""The pairs and triplets of a batch, as fixed-shape masks and index arrays that jit can hold.

A batch's labels are data, so how many positive pairs or valid triplets it has is not
known when the step is compiled. Every structure here therefore has the largest shape
the batch size allows, with a boolean mask of the entries that exist; losses reduce
with :func:`masked_mean`, which is 0 with a zero gradient when nothing is valid (an
empty batch, or a batch without any positive pair).
"""

from __future__ import annotations

import chex
import jax.numpy as jnp

Array = chex.Array


def pair_masks(labels: Array) -> tuple[Array, Array]:
  """Positive pairs (same label, ``i != j``) and negative pairs (different labels), each ``bool [B, B]``."""
  chex.assert_rank(labels, 1)
  same = labels[:, None] == labels[None, :]
  not_self = ~jnp.eye(labels.shape[0], dtype=bool)
  return same & not_self, ~same


def masked_mean(values: Array, mask: Array) -> Array:
  """Mean of ``values`` where ``mask`` holds; 0 (and a zero gradient) when it holds nowhere.

  Masked-out entries are replaced by 0 before summing, so they must be finite in the
  forward pass; the gradient through them is zero either way.
  """
  chex.assert_equal_shape([values, mask])
  total = jnp.sum(jnp.where(mask, values, 0.0))
  return total / jnp.maximum(jnp.sum(mask), 1).astype(total.dtype)


@chex.dataclass(frozen=True)
class Triplets:
  """Index triplets (anchor, positive, negative) into a batch, ``int32 [T]`` each, and which are real.

  Miners return these with a static ``T``; ``valid`` marks the triplets that exist
  (anchor and positive share a label, the negative's label differs, anchor != positive).
  """

  anchor: Array
  positive: Array
  negative: Array
  valid: Array  # bool [T]


def triplet_validity(labels: Array, anchor: Array, positive: Array, negative: Array) -> Array:
  """Whether each (anchor, positive, negative) triplet is a real one for these labels."""
  return (labels[anchor] == labels[positive]) & (anchor != positive) & (labels[anchor] != labels[negative])
