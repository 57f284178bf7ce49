"""The pairs and triplets of a batch, as fixed-shape masks and index arrays that jit can hold.

A batch's labels are data, so how many positive pairs or valid triplets it has is not
known when the step is compiled. Every structure here therefore has the largest shape
the batch size allows, with a boolean mask of the entries that exist; losses reduce
over the masks with :mod:`fewshot.dml.masked`, which gives 0 with a zero gradient when
nothing is valid (an empty batch, or a batch without any positive pair).
"""

from __future__ import annotations

from typing import Callable

import chex
import jax.numpy as jnp

Array = chex.Array
Pairwise = Callable[[Array, Array], Array]


def pair_masks(labels: Array) -> tuple[Array, Array]:
  """Positive pairs (same label, ``i != j``) and negative pairs (different labels), each ``bool [B, B]``."""
  chex.assert_rank(labels, 1)
  same = labels[:, None] == labels[None, :]
  not_self = ~jnp.eye(labels.shape[0], dtype=bool)
  return same & not_self, ~same


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


def check_batch(embeddings: Array, labels: Array) -> None:
  """Embeddings ``float [B, d]`` and labels ``int [B]`` of one batch."""
  chex.assert_rank([embeddings, labels], [2, 1])
  chex.assert_equal_shape_prefix([embeddings, labels], 1)
  chex.assert_type([embeddings, labels], [float, int])


def pairwise(embeddings: Array, labels: Array, fn: Pairwise) -> tuple[Array, Array, Array]:
  """``fn`` between all items of a checked batch, ``[B, B]``, with the positive and negative pair masks."""
  check_batch(embeddings, labels)
  return (fn(embeddings, embeddings), *pair_masks(labels))
