r"""Pair losses: one term per pair of the batch, from its distance and whether the labels agree.

Every loss here is a pure jittable function ``(embeddings [B, d], labels int [B], ...) -> scalar``
that takes the distance as an argument (any ``[n, d], [m, d] -> [n, m]`` function of
:mod:`fewshot.distances`). A pair is an ordered pair :math:`(i, j)`, :math:`i \ne j`, of the
batch: positive when :math:`y_i = y_j`, negative otherwise, as in
:func:`fewshot.dml.tuples.pair_masks`. An empty batch, or a batch without any pair the loss
averages over, gives 0 with a zero gradient.
"""

from __future__ import annotations

from typing import Callable

import chex
import jax
import jax.numpy as jnp

from fewshot import distances
from fewshot.dml.masked import masked_logsumexp, masked_mean
from fewshot.dml.tuples import pairwise

Array = chex.Array
Distance = Callable[[Array, Array], Array]

MARGIN_ALPHA = 0.2
MARGIN_BETA_INIT = 1.2
# Batch normalisation's epsilon (PyTorch's default) for the BCE pair loss's standardisation.
BCE_EPS = 1e-5


def contrastive_loss(embeddings: Array, labels: Array, *, margin: float = 1.0,
                     distance: Distance = distances.euclidean) -> Array:
  r"""Contrastive loss (Hadsell, Chopra and LeCun, CVPR 2006), averaged over all pairs.

  .. math::
     \mathcal{L} = \frac{1}{|P \cup N|} \sum_{(i, j) \in P \cup N}
       y_{ij} D_{ij}^2 + (1 - y_{ij}) \max(0, m - D_{ij})^2

  with :math:`y_{ij} = 1` for a positive pair, :math:`P \cup N` every ordered pair
  :math:`i \ne j`. This is Hadsell et al.'s loss without its constant factor 1/2. Positives are
  pulled together, negatives pushed beyond the margin :math:`m` (default 1.0). A batch with fewer than two items gives 0; a batch with negatives
  only still pushes them apart when they are closer than :math:`m`.
  """
  d, positive, negative = pairwise(embeddings, labels, distance)
  per_pair = jnp.where(positive, jnp.square(d), jnp.square(jax.nn.relu(margin - d)))
  return masked_mean(per_pair, positive | negative)


def _hinges(d: Array, positive: Array, pos_margin: Array | float, neg_margin: Array | float) -> Array:
  """``[d - m_pos]_+`` on positive pairs, ``[m_neg - d]_+`` elsewhere."""
  return jnp.where(positive, jax.nn.relu(d - pos_margin), jax.nn.relu(neg_margin - d))


def two_margin_contrastive_loss(embeddings: Array, labels: Array, *, pos_margin: float = 0.0,
                                neg_margin: float = 1.0, distance: Distance = distances.euclidean) -> Array:
  r"""Contrastive loss with a margin for each kind of pair (the form of Musgrave et al., ECCV 2020).

  .. math::
     \mathcal{L} = \frac{1}{|P|} \sum_{(i, j) \in P} [D_{ij} - m_{pos}]_+
       + \frac{1}{|N|} \sum_{(i, j) \in N} [m_{neg} - D_{ij}]_+

  averaged separately over the positive pairs :math:`P` and the negative pairs :math:`N`
  (ordered, :math:`i \ne j`), each part 0 when it has no pair; so a batch without a positive
  pair still gives the negative part. Defaults :math:`m_{pos} = 0`, :math:`m_{neg} = 1`
  (pytorch-metric-learning's; the reality check tunes both).
  """
  d, positive, negative = pairwise(embeddings, labels, distance)
  hinge = _hinges(d, positive, pos_margin, neg_margin)
  return masked_mean(hinge, positive) + masked_mean(hinge, negative)


def init_margin_params(num_classes: int | None = None, *, beta: float = MARGIN_BETA_INIT) -> dict[str, Array]:
  """The learnable boundary of :func:`margin_loss`, ``{"beta": ...}``: a scalar, or one per class."""
  shape = () if num_classes is None else (num_classes,)
  return {"beta": jnp.full(shape, beta, jnp.float32)}


def margin_loss(embeddings: Array, labels: Array, beta: Array, *, alpha: float = MARGIN_ALPHA,
                distance: Distance = distances.euclidean) -> Array:
  r"""Margin loss (Wu, Manmatha, Smola and Krähenbühl, "Sampling matters in deep embedding learning", ICCV 2017).

  .. math::
     \ell_{ij} = [\alpha + y_{ij} (D_{ij} - \beta_{y_i})]_+, \qquad
     \mathcal{L} = \frac{\sum_{(i, j)} \ell_{ij}}{|\{(i, j) : \ell_{ij} > 0\}|}

  with :math:`y_{ij} = +1` for a positive pair and :math:`-1` for a negative one: the
  contrastive loss with :math:`m_{pos} = \beta - \alpha`, :math:`m_{neg} = \beta + \alpha`.
  Every ordered pair :math:`i \ne j` takes part (the paper samples pairs by distance; give
  this loss a mined batch for that), and the sum is divided by the number of pairs with a
  non-zero loss, as the paper does; 0 when there is none.

  ``beta`` is learnable (:func:`init_margin_params`): a scalar, or a vector with one boundary
  per class, :math:`\beta_{y_i}` of the pair's first item (labels must index it; the
  reality check's "Margin/class"). Paper defaults :math:`\alpha = 0.2`,
  :math:`\beta_0 = 1.2`; its optional penalty :math:`\nu \beta` is left to the caller.
  """
  d, positive, negative = pairwise(embeddings, labels, distance)
  beta = jnp.asarray(beta)
  chex.assert_rank(beta, {0, 1})
  boundary = beta if beta.ndim == 0 else beta[labels][:, None]
  hinge = _hinges(d, positive, boundary - alpha, boundary + alpha)
  # Pairs already outside their margin would only dilute the mean, as the paper argues.
  return masked_mean(hinge, (positive | negative) & (hinge > 0))


def init_bce_pair_params(weight: float = -1.0, bias: float = 0.0) -> dict[str, Array]:
  """The learnable affine map of :func:`bce_pair_loss`, keyed by its argument names.

  The weight starts negative: after standardisation, a small distance is negative and
  should map to a high probability of "same class".
  """
  return {"weight": jnp.asarray(weight, jnp.float32), "bias": jnp.asarray(bias, jnp.float32)}


def bce_pair_loss(embeddings: Array, labels: Array, weight: Array, bias: Array, *,
                  distance: Distance = distances.euclidean, eps: float = BCE_EPS) -> Array:
  r"""Binary cross-entropy of standardised pair distances (the seed report, Eqs. 2–3).

  Over the unordered pairs :math:`i < j` of the batch (each pair once, as the report forms
  them):

  .. math::
     a_{ij} = w \frac{D_{ij} - \mu(D)}{\sqrt{\sigma^2(D) + \epsilon}} + b, \qquad
     \mathcal{L} = \operatorname{mean}_{i < j}
       -y_{ij} \log \sigma(a_{ij}) - (1 - y_{ij}) \log(1 - \sigma(a_{ij}))

  with :math:`y_{ij} = 1` for same-class pairs, :math:`\mu, \sigma^2` the mean and
  (population) variance of the batch's pair distances, as batch normalisation computes them
  in training (gradients flow through both), and :math:`\epsilon` batch normalisation's
  :math:`10^{-5}`. The cross-entropy is evaluated as :math:`\operatorname{softplus}(a) - y a`,
  finite for any logit. The report's constant factor 1/2 is dropped. ``weight`` :math:`w`
  and ``bias`` :math:`b` are learnable scalars (:func:`init_bce_pair_params`); a batch with
  fewer than two items gives 0.
  """
  d, positive, negative = pairwise(embeddings, labels, distance)
  weight, bias = jnp.asarray(weight), jnp.asarray(bias)
  chex.assert_rank([weight, bias], 0)
  pairs = jnp.triu(positive | negative, k=1)
  mean = masked_mean(d, pairs)
  variance = masked_mean(jnp.square(d - mean), pairs)
  logits = weight * (d - mean) * jax.lax.rsqrt(variance + eps) + bias
  return masked_mean(jax.nn.softplus(logits) - positive * logits, pairs)


def lifted_structure_loss(embeddings: Array, labels: Array, *, margin: float = 1.0,
                          distance: Distance = distances.euclidean) -> Array:
  r"""Lifted structured loss (Song, Xiang, Jegelka and Savarese, CVPR 2016).

  .. math::
     J_{ij} = \log\Bigl(\sum_{k \in N_i} e^{\alpha - D_{ik}} + \sum_{l \in N_j} e^{\alpha - D_{jl}}\Bigr) + D_{ij},
     \qquad \mathcal{L} = \frac{1}{2|P|} \sum_{(i, j) \in P} [J_{ij}]_+^2

  where :math:`P` are the positive pairs (unordered, as in the paper; averaging over
  ordered pairs gives the same value since :math:`J` is symmetric) and :math:`N_i` the
  items whose label differs from :math:`y_i`. Paper default margin :math:`\alpha = 1`. The
  log-sum-exp is the paper's smooth bound on the hardest negative of either item. A pair
  with no negative for either item (a one-class batch) has no :math:`J` and is dropped;
  with no positive pair the loss is 0.
  """
  d, positive, negative = pairwise(embeddings, labels, distance)
  per_item, has_negative = masked_logsumexp(margin - d, negative, axis=1)
  # J's log-sum-exp over N_i ∪ N_j is the log-sum-exp of the two per-item ones, either maybe empty.
  both = jnp.stack(jnp.broadcast_arrays(per_item[:, None], per_item[None, :]), axis=-1)
  both_valid = jnp.stack(jnp.broadcast_arrays(has_negative[:, None], has_negative[None, :]), axis=-1)
  lse, any_negative = masked_logsumexp(both, both_valid, axis=-1)
  return 0.5 * masked_mean(jnp.square(jax.nn.relu(lse + d)), positive & any_negative)
