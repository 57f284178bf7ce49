r"""Tuple losses: each anchor of the batch against a positive and a set of negatives.

The triplet loss (one negative per term), the multi-class N-pair and NT-Xent losses (a
softmax over the negatives), the multi-similarity and circle losses (weighted log-sum-exps
over all of an anchor's pairs) and FastAP (the average precision of an anchor's ranking).
Each is a pure jittable function ``(embeddings [B, d], labels int [B], ...) -> scalar`` taking
its distance or similarity as an argument; :math:`P_i` and :math:`N_i` are the positives
(same label, not :math:`i`) and negatives of anchor :math:`i`. An empty batch, or a batch
without a positive pair, gives 0 with a zero gradient.
"""

from __future__ import annotations

from typing import Callable

import chex
import jax
import jax.numpy as jnp

from fewshot import distances, numerics
from fewshot.dml import miners
from fewshot.dml.masked import log1p_sum_exp, masked_logsumexp, masked_mean
from fewshot.dml.tuples import Triplets, check_batch, pairwise

Array = chex.Array
Distance = Callable[[Array, Array], Array]
Similarity = Callable[[Array, Array], Array]

# The coefficient of TensorFlow's npairs_loss (reg_lambda) and Paddle's npair_loss; see npair_loss.
NPAIR_L2_REG = 0.002


def triplet_margin_loss(embeddings: Array, labels: Array, triplets: Triplets | None = None, *,
                        margin: float = 0.2, distance: Distance = distances.euclidean) -> Array:
  r"""Triplet margin loss (Weinberger and Saul 2009; Schroff et al., FaceNet, CVPR 2015).

  .. math::
     \mathcal{L} = \frac{1}{|T|} \sum_{(a, p, n) \in T} [D_{ap} - D_{an} + m]_+

  averaged over the valid triplets :math:`T`: every (anchor, positive, negative) of the
  batch when ``triplets`` is None (:func:`fewshot.dml.miners.all_triplets`), else the valid
  ones of a miner's :class:`~fewshot.dml.tuples.Triplets` (``miners.batch_hard``,
  ``miners.semi_hard``). Default margin :math:`m = 0.2`, FaceNet's. FaceNet and the seed
  report (Eq. 5) use squared distances, :math:`\|a - p\|^2 - \|a - n\|^2 + \alpha`: pass
  ``distance=distances.squared_euclidean`` for that form. No valid triplet gives 0.
  """
  check_batch(embeddings, labels)
  if triplets is None:
    triplets = miners.all_triplets(labels)
  d = distance(embeddings, embeddings)
  d_ap = d[triplets.anchor, triplets.positive]
  d_an = d[triplets.anchor, triplets.negative]
  return masked_mean(jax.nn.relu(d_ap - d_an + margin), triplets.valid)


def _first_two_of_each_class(labels: Array) -> tuple[Array, Array, Array]:
  """Masks of the first and second item of each class (in batch order), and ``[B, B]`` second-item selectors.

  Row ``i`` of the selector picks the second item of ``i``'s class (none for a singleton).
  """
  same = labels[:, None] == labels[None, :]
  rank = jnp.sum(jnp.tril(same, k=-1), axis=1)  # how many items of the class come earlier
  second = rank == 1
  to_second = same & second[None, :]
  first = (rank == 0) & jnp.any(to_second, axis=1)
  return first, second, to_second


def npair_loss(embeddings: Array, labels: Array, *, l2_reg: float = NPAIR_L2_REG,
               similarity: Similarity = distances.inner_product) -> Array:
  r"""Multi-class N-pair loss (Sohn, NeurIPS 2016).

  From "Improved deep metric learning with multi-class N-pair loss objective".

  Every class with at least two items contributes one anchor :math:`a_i` (its first item in
  batch order) and one positive :math:`p_i` (its second); the other items are not used.
  Over the :math:`N` classes present,

  .. math::
     \mathcal{L} = \frac{1}{N} \sum_{i} \log\Bigl(1 + \sum_{j \ne i} e^{s(a_i, p_j) - s(a_i, p_i)}\Bigr)
       + \lambda \frac{1}{2N} \sum_i \bigl(\|a_i\|^2 + \|p_i\|^2\bigr),

  the cross-entropy of :math:`s(a_i, p_i)` against all :math:`s(a_i, p_j)`, with the
  other classes' positives as negatives; :math:`s` is the inner product, as in the paper.
  The paper does not normalise the embeddings (that made optimisation hard) but keeps
  their norm small with an L2 penalty. ``l2_reg`` :math:`\lambda` defaults to 0.002, the
  coefficient of the TensorFlow and Paddle ``npair_loss`` implementations (the slides in
  docs/papers do not give the paper's); TensorFlow's penalty is half of ours, so pass
  0.001 to match it. Under jit the number of classes is data, so anchors are masks, not shapes.
  A batch with no class of two items gives 0; with a single such class only the penalty.
  """
  check_batch(embeddings, labels)
  anchor, second, to_second = _first_two_of_each_class(labels)
  positives = numerics.matmul(to_second.astype(embeddings.dtype), embeddings)  # row i: the positive of i's class
  s = similarity(embeddings, positives)  # s[i, j] = s(a_i, p_j) on anchor rows and columns
  others = anchor[None, :] & ~jnp.eye(labels.shape[0], dtype=bool)
  per_anchor = log1p_sum_exp(s - jnp.diagonal(s)[:, None], others, axis=1)
  penalty = masked_mean(jnp.sum(jnp.square(embeddings), axis=1), anchor | second)
  return masked_mean(per_anchor, anchor) + l2_reg * penalty


def ntxent_loss(embeddings: Array, labels: Array, *, temperature: float = 0.1,
                similarity: Similarity = distances.cosine_similarity) -> Array:
  r"""NT-Xent, the normalised temperature-scaled cross-entropy (Chen et al., SimCLR, ICML 2020), supervised.

  .. math::
     \mathcal{L} = \frac{1}{|P|} \sum_{(a, p) \in P}
       -\log \frac{e^{s_{ap} / \tau}}{e^{s_{ap} / \tau} + \sum_{n \in N_a} e^{s_{an} / \tau}}

  over the ordered positive pairs :math:`P`, the other positives of :math:`a` left out of
  the denominator (pytorch-metric-learning's form, which the reality check ran). Cosine
  similarity; :math:`\tau = 0.1` by default (SimCLR compares 0.05 to 1; the reality check
  tunes it). A pair whose anchor has no negative has loss :math:`-\log 1 = 0` and still
  counts; no positive pair gives 0.
  """
  s, positive, negative = pairwise(embeddings, labels, similarity)
  logits = s / temperature
  lse_negative, has_negative = masked_logsumexp(logits, negative, axis=1)
  # -log(e^x / (e^x + e^L)) = softplus(L - x): never a ratio of overflowing exps.
  per_pair = jnp.where(has_negative[:, None], jax.nn.softplus(lse_negative[:, None] - logits), 0.0)
  return masked_mean(per_pair, positive)


def multi_similarity_loss(embeddings: Array, labels: Array, *, alpha: float = 2.0, beta: float = 50.0,
                          base: float = 0.5, epsilon: float = 0.1,
                          similarity: Similarity = distances.cosine_similarity) -> Array:
  r"""Multi-similarity loss with its pair mining (Wang, Han, Huang, Dong and Scott, CVPR 2019).

  Mining keeps, for anchor :math:`i`, the negatives harder than its hardest positive and the
  positives harder than its hardest negative, up to :math:`\epsilon`:

  .. math::
     \tilde N_i = \{k \in N_i : S_{ik} + \epsilon > \min_{j \in P_i} S_{ij}\}, \qquad
     \tilde P_i = \{k \in P_i : S_{ik} - \epsilon < \max_{j \in N_i} S_{ij}\},

  then weights them through two soft-plus-like terms,

  .. math::
     \ell_i = \frac{1}{\alpha} \log\Bigl(1 + \sum_{k \in \tilde P_i} e^{-\alpha (S_{ik} - \lambda)}\Bigr)
       + \frac{1}{\beta} \log\Bigl(1 + \sum_{k \in \tilde N_i} e^{\beta (S_{ik} - \lambda)}\Bigr),
     \qquad \mathcal{L} = \frac{1}{B} \sum_{i : \tilde P_i \ne \emptyset \ne \tilde N_i} \ell_i,

  the sum over the anchors keeping both a positive and a negative divided by the batch size,
  as the authors' code does. Cosine similarity; paper defaults :math:`\alpha = 2`,
  :math:`\beta = 50`, :math:`\epsilon = 0.1`; ``base`` :math:`\lambda = 0.5` follows the
  authors' released code and pytorch-metric-learning (the paper's text gives
  :math:`\lambda = 1`). ``epsilon=float("inf")`` turns the mining off. The mining only
  selects pairs; no gradient flows through it. No positive pair gives 0.
  """
  s, positive, negative = pairwise(embeddings, labels, similarity)
  chosen = jax.lax.stop_gradient(s)
  hardest_positive = jnp.min(chosen, axis=1, keepdims=True, where=positive, initial=jnp.inf)
  hardest_negative = jnp.max(chosen, axis=1, keepdims=True, where=negative, initial=-jnp.inf)
  mined_positive = positive & (chosen - epsilon < hardest_negative)
  mined_negative = negative & (chosen + epsilon > hardest_positive)
  pull = log1p_sum_exp(-alpha * (s - base), mined_positive, axis=1) / alpha
  push = log1p_sum_exp(beta * (s - base), mined_negative, axis=1) / beta
  kept = jnp.any(mined_positive, axis=1) & jnp.any(mined_negative, axis=1)
  # Divided by B (anchors without mined pairs count as 0), the authors' normalisation.
  return masked_mean(jnp.where(kept, pull + push, 0.0), jnp.ones_like(kept))


def circle_loss(embeddings: Array, labels: Array, *, margin: float = 0.25, gamma: float = 256.0,
                similarity: Similarity = distances.cosine_similarity) -> Array:
  r"""Circle loss, pair-wise form (Sun et al., CVPR 2020).

  From "Circle loss: a unified perspective of pair similarity optimization":

  .. math::
     \ell_i = \operatorname{softplus}\Bigl(
       \operatorname{LSE}_{n \in N_i} \gamma \alpha_n (s_n - \Delta_n)
       + \operatorname{LSE}_{p \in P_i} -\gamma \alpha_p (s_p - \Delta_p)\Bigr)

  with :math:`\alpha_p = [1 + m - s_p]_+`, :math:`\alpha_n = [s_n + m]_+` (held constant in
  the gradient, as the authors' implementation does), :math:`\Delta_p = 1 - m`,
  :math:`\Delta_n = m`, and LSE the log-sum-exp. The loss is the mean of :math:`\ell_i`
  over the anchors with at least one positive and one negative; 0 when there is none.
  Cosine similarity; defaults :math:`m = 0.25`, :math:`\gamma = 256`, the paper's for face
  recognition (it uses :math:`m = 0.4`, :math:`\gamma = 80` for fine-grained retrieval).
  """
  s, positive, negative = pairwise(embeddings, labels, similarity)
  alpha_p = jax.lax.stop_gradient(jax.nn.relu(1.0 + margin - s))
  alpha_n = jax.lax.stop_gradient(jax.nn.relu(s + margin))
  lse_p, has_p = masked_logsumexp(-gamma * alpha_p * (s - (1.0 - margin)), positive, axis=1)
  lse_n, has_n = masked_logsumexp(gamma * alpha_n * (s - margin), negative, axis=1)
  return masked_mean(jax.nn.softplus(lse_p + lse_n), has_p & has_n)


def fastap_loss(embeddings: Array, labels: Array, *, num_bins: int = 10, max_distance: float = 4.0,
                distance: Distance = distances.squared_chord) -> Array:
  r"""FastAP (Cakir, He, Xia, Kulis and Sclaroff, "Deep metric learning to rank", CVPR 2019).

  Each anchor :math:`i` ranks the rest of the batch by distance; the distances are binned
  into a soft histogram with :math:`L` = ``num_bins`` triangular bins centred at
  :math:`z_l = l \Delta`, :math:`\Delta = D_{\max} / (L - 1)`:

  .. math::
     h^+_l = \sum_{j \in P_i} [1 - |D_{ij} - z_l| / \Delta]_+, \quad
     h_l = h^+_l + \sum_{j \in N_i} [1 - |D_{ij} - z_l| / \Delta]_+, \quad
     H^{(+)}_l = \sum_{l' \le l} h^{(+)}_{l'},

  .. math::
     \mathrm{FastAP}_i = \frac{1}{|P_i|} \sum_l \frac{H^+_l h^+_l}{H_l}, \qquad
     \mathcal{L} = \frac{1}{|A|} \sum_{i \in A} (1 - \mathrm{FastAP}_i)

  over the anchors :math:`A` with at least one positive (a bin with :math:`H_l = 0` adds
  nothing); 0 when there is none. The distance is the paper's squared Euclidean distance
  of L2-normalised embeddings, in :math:`[0, D_{\max}] = [0, 4]`; another distance needs its
  own ``max_distance`` (beyond it items fall off the histogram). The bin centres span
  :math:`[0, 4]` with ``num_bins`` points; the authors' code instead uses ``num_bins + 1``
  centres, :math:`\Delta = 4 / \text{num\_bins}` (pass ``num_bins=11`` for its default 10).
  """
  if num_bins < 2:
    raise ValueError(f"fastap_loss needs num_bins >= 2 bin centres, got {num_bins}.")
  d, positive, negative = pairwise(embeddings, labels, distance)
  centres = jnp.linspace(0.0, max_distance, num_bins, dtype=d.dtype)
  pulses = jax.nn.relu(1.0 - jnp.abs(d[..., None] - centres) * ((num_bins - 1) / max_distance))  # [B, B, L]
  h_positive = jnp.sum(jnp.where(positive[..., None], pulses, 0.0), axis=1)
  h_all = h_positive + jnp.sum(jnp.where(negative[..., None], pulses, 0.0), axis=1)
  cum_positive, cum_all = jnp.cumsum(h_positive, axis=-1), jnp.cumsum(h_all, axis=-1)
  # H_l = 0 forces h+_l = H+_l = 0: the safe divisor keeps 0/0 (and its gradient) out.
  precision_mass = h_positive * cum_positive / jnp.where(cum_all > 0, cum_all, 1.0)
  num_positive = jnp.sum(positive, axis=1)
  average_precision = jnp.sum(precision_mass, axis=-1) / jnp.maximum(num_positive, 1)
  return masked_mean(1.0 - average_precision, num_positive > 0)
