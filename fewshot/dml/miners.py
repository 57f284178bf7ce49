"""Miners: which triplets of a batch, or which classes of a pool, a loss should see.

Triplet miners return :class:`~fewshot.dml.tuples.Triplets` of a static length with a
``valid`` mask, the form :func:`fewshot.dml.losses.triplet_margin_loss` accepts. They
choose indices only: no gradient flows through the choice, as in FaceNet.
"""

from __future__ import annotations

from typing import Callable

import chex
import jax
import jax.numpy as jnp

from fewshot import distances
from fewshot.dml.tuples import Triplets, check_batch, pair_masks, triplet_validity

Array = chex.Array
Distance = Callable[[Array, Array], Array]
Similarity = Callable[[Array, Array], Array]


def all_triplets(labels: Array) -> Triplets:
  """Every (anchor, positive, negative) of the batch: ``T = B^3`` entries, the real ones marked valid."""
  chex.assert_rank(labels, 1)
  b = labels.shape[0]
  anchor, positive, negative = (i.reshape(-1) for i in jnp.meshgrid(*(jnp.arange(b, dtype=jnp.int32),) * 3, indexing="ij"))
  return Triplets(anchor=anchor, positive=positive, negative=negative,
                  valid=triplet_validity(labels, anchor, positive, negative))


def _no_triplets() -> Triplets:
  empty = jnp.zeros((0,), jnp.int32)
  return Triplets(anchor=empty, positive=empty, negative=empty, valid=jnp.zeros((0,), bool))


def batch_hard(embeddings: Array, labels: Array, distance: Distance = distances.euclidean) -> Triplets:
  r"""Batch-hard mining (Hermans et al., 2017): for each anchor, its farthest positive and nearest negative.

  ``T = B``; an anchor without a positive or without a negative gives an invalid triplet.
  """
  check_batch(embeddings, labels)
  if labels.shape[0] == 0:  # static; argmax over an empty axis raises
    return _no_triplets()
  d = jax.lax.stop_gradient(distance(embeddings, embeddings))
  positive_mask, negative_mask = pair_masks(labels)
  positive = jnp.argmax(jnp.where(positive_mask, d, -jnp.inf), axis=1).astype(jnp.int32)
  negative = jnp.argmin(jnp.where(negative_mask, d, jnp.inf), axis=1).astype(jnp.int32)
  anchor = jnp.arange(labels.shape[0], dtype=jnp.int32)
  valid = positive_mask.any(axis=1) & negative_mask.any(axis=1)
  return Triplets(anchor=anchor, positive=positive, negative=negative, valid=valid)


def semi_hard(embeddings: Array, labels: Array, margin: float = 0.2,
              distance: Distance = distances.euclidean) -> Triplets:
  r"""Semi-hard mining (Schroff et al., FaceNet, 2015): per positive pair, its hardest semi-hard negative.

  A negative :math:`n` of the pair :math:`(a, p)` is semi-hard when
  :math:`d_{ap} < d_{an} < d_{ap} + m`: farther than the positive, yet inside the margin,
  so the triplet still has a loss without being one of the hardest (which collapse
  training early). ``T = B^2``, one triplet per ordered pair ``(a, p)``: the semi-hard
  negative nearest to the anchor; pairs without one are invalid.
  """
  check_batch(embeddings, labels)
  if labels.shape[0] == 0:
    return _no_triplets()
  d = jax.lax.stop_gradient(distance(embeddings, embeddings))
  positive_mask, negative_mask = pair_masks(labels)
  d_ap = d[:, :, None]  # [a, p, 1]
  d_an = d[:, None, :]  # [a, 1, n]
  semi = negative_mask[:, None, :] & (d_an > d_ap) & (d_an < d_ap + margin)
  negative = jnp.argmin(jnp.where(semi, d_an, jnp.inf), axis=2).astype(jnp.int32)
  b = labels.shape[0]
  anchor, positive = (i.reshape(-1) for i in jnp.meshgrid(jnp.arange(b, dtype=jnp.int32), jnp.arange(b, dtype=jnp.int32), indexing="ij"))
  valid = (positive_mask & semi.any(axis=2)).reshape(-1)
  return Triplets(anchor=anchor, positive=positive, negative=negative.reshape(-1), valid=valid)


def hard_negative_classes(key: chex.PRNGKey, class_embeddings: Array, num_classes: int,
                          similarity: Similarity = distances.inner_product) -> Array:
  r"""Hard negative class mining for N-pair batches (Sohn, 2016, Sec. 3.2.2): ``int32 [num_classes]``.

  ``class_embeddings[c]`` holds ``M >= 1`` embedded examples of pool class ``c`` (``[P, M, d]``);
  the first serves as the class's anchor, the last as its positive. Starting from a
  random class, the class added next is the one that violates the triplet constraint most
  against a class already chosen:

  .. math:: c^\star = \arg\max_{c \notin S} \max_{s \in S,\, x \in c} \; s(a_s, x) - s(a_s, p_s),

  the similarity of a chosen anchor to an example of ``c`` beyond its own positive's.
  """
  chex.assert_rank(class_embeddings, 3)
  pool = class_embeddings.shape[0]
  if not 1 <= num_classes <= pool:
    raise ValueError(f"cannot choose {num_classes} classes from a pool of {pool}; use 1 to {pool} classes.")
  anchors, positives = class_embeddings[:, 0], class_embeddings[:, -1]
  examples = class_embeddings.reshape(-1, class_embeddings.shape[-1])
  to_examples = similarity(anchors, examples).reshape(pool, pool, -1).max(axis=2)  # [anchor class, class]
  own = jnp.diagonal(similarity(anchors, positives))  # s(a_c, p_c)
  violation = to_examples - own[:, None]  # [s, c]

  first = jax.random.randint(key, (), 0, pool)
  chosen = jnp.zeros((pool,), bool).at[first].set(True)
  worst = violation[first]  # the largest violation of each class against the chosen ones

  def add(i, carry):
    chosen, worst, order = carry
    c = jnp.argmax(jnp.where(chosen, -jnp.inf, worst))
    return chosen.at[c].set(True), jnp.maximum(worst, violation[c]), order.at[i].set(c)

  order = jnp.zeros((num_classes,), jnp.int32).at[0].set(first)
  _, _, order = jax.lax.fori_loop(1, num_classes, add, (chosen, worst, order))
  return order


# The triplet miners a training loop can be told to use, by name.
MINERS = {"batch_hard": batch_hard, "semi_hard": semi_hard}
