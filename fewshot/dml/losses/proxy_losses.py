r"""Proxy (classification) losses of metric learning: one learnable proxy per class, or several.

Each loss is a pure jittable function
``(embeddings [B, d], labels int [B], proxies [C, d] or [C, K, d], learnable scalars, *, hyperparameters)
-> scalar``, the mean over the batch. Embeddings and proxies are L2-normalised inside the
loss (the reality-check protocol normalises embeddings before every loss; doing it here
too costs nothing and makes the losses safe to call on raw features), through
:func:`fewshot.distances.cosine_similarity`, whose normalisation is finite in value and
gradient at a zero vector (a zero embedding has cosine 0 with every proxy; its own gradient is
finite but of order 1e11, since the normalisation divides by :math:`\max(\|x\|, 10^{-12})`).

Shared conventions:

* shapes are checked with chex when traced (``AssertionError`` naming the shapes);
* labels must lie in ``0..C-1``; jit cannot check data, so every out-of-range label is
  mapped to a class that does not exist and the loss is **NaN**, loudly, rather than the
  cross-entropy silently wrapping a negative label onto class ``C + label``;
* an empty batch (``B = 0``) gives 0 with a zero gradient;
* ``init_<loss>_params(key, num_classes, dim, ...)`` returns a dict whose keys are the
  loss's argument names, so ``loss(embeddings, labels, **params)`` works. Proxies start as
  :math:`\mathcal N(0, 1/d)` draws: every loss sees only their directions, which an
  isotropic Gaussian makes uniform on the sphere, and the norm :math:`\approx 1` keeps the
  gradient scale of the normalisation (:math:`\propto 1/\|w\|`) near one.

The angular-margin losses (CosFace, ArcFace, SphereFace) live in
:mod:`fewshot.dml.losses.margin_losses` and use the helpers here.
"""

from __future__ import annotations

from typing import Callable

import chex
import jax
import jax.numpy as jnp
import optax

from fewshot import distances, heads
from fewshot.dml.masked import masked_mean

Array = chex.Array
Distance = Callable[[Array, Array], Array]


# --------------------------------------------------------------------------- shared helpers


def _check_inputs(embeddings: Array, labels: Array, proxies: Array, proxy_rank: int = 2) -> None:
  """Ranks, dtypes (float, int, float), equal batch sizes and the proxies' feature size (chex ``AssertionError``s)."""
  chex.assert_rank([embeddings, labels, proxies], [2, 1, proxy_rank])
  chex.assert_type([embeddings, labels, proxies], [float, int, float])
  chex.assert_equal_shape_prefix([embeddings, labels], 1)
  chex.assert_equal_shape_suffix([embeddings, proxies], 1)


def _unit_cosines(embeddings: Array, proxies: Array) -> Array:
  """Cosines of each embedding with each proxy: ``[B, d], [C, d] -> [B, C]``; ``[C, K, d] -> [B, C, K]``."""
  flat = proxies.reshape(-1, proxies.shape[-1])
  return distances.cosine_similarity(embeddings, flat).reshape(embeddings.shape[:1] + proxies.shape[:-1])


def _mean_cross_entropy(logits: Array, labels: Array, where: Array | None = None) -> Array:
  """Mean over the batch of the softmax cross-entropy; 0 with a zero gradient for an empty batch.

  ``where`` (bool, like ``logits``) restricts the log-normaliser to the entries it marks
  (the label's logit is always the numerator); a row with no entry marked costs 0.
  """
  num_classes = logits.shape[-1]
  # optax would wrap a negative label onto class C + label and give NaN for one >= C;
  # sending every bad label to C makes the whole loss NaN instead of silently wrong.
  labels = jnp.where((labels >= 0) & (labels < num_classes), labels, num_classes)
  per_example = optax.softmax_cross_entropy_with_integer_labels(logits, labels, where=where)
  return masked_mean(per_example, jnp.ones(per_example.shape, dtype=bool))


def _label_mask(labels: Array, num_classes: int) -> Array:
  """``bool [B, C]``: where column ``c`` is the label of row ``i``."""
  return labels[:, None] == jnp.arange(num_classes)[None, :]


def init_proxies(key: chex.PRNGKey, num_classes: int, dim: int, *, dtype=jnp.float32) -> dict:
  r"""``{"proxies": [C, d]}`` with entries :math:`\mathcal N(0, 1/d)` (unit norm on average, uniform directions)."""
  return {"proxies": jax.random.normal(key, (num_classes, dim), dtype) / jnp.sqrt(jnp.asarray(dim, dtype))}


# --------------------------------------------------------------------------- normalised softmax


def normalized_softmax_loss(
    embeddings: Array, labels: Array, proxies: Array, scale: Array | float = 10.0
) -> Array:
  r"""Normalised softmax loss (NSL; Zhai & Wu, "Classification is a Strong Baseline for Deep Metric Learning", 2019).

  .. math::
    \mathcal L = \frac1B \sum_i -\log \frac{\exp(s\, \bar W_{y_i}^\top \bar x_i)}
      {\sum_{j=1}^C \exp(s\, \bar W_j^\top \bar x_i)},

  :math:`\bar\cdot` L2-normalised, no bias. Zhai & Wu write it with a temperature
  :math:`\sigma = 1/s` (their :math:`\sigma = 0.05`, i.e. :math:`s = 20`); the default here is the
  fixed :math:`s = 10` of the positive/negative histogram-JSD paper (Oi, Kawakami & Naemura; the JSD is
  :func:`fewshot.dml.pair_similarities.histogram_jsd`).

  Args:
    embeddings: ``[B, d]``.
    labels: ``int [B]`` in ``0..C-1`` (not checkable under jit; out of range gives NaN).
    proxies: ``[C, d]`` class weights :math:`W_j` (normalised here).
    scale: :math:`s`, a fixed float or a learnable scalar array (see
      :func:`init_normalized_softmax_params`).

  Returns:
    The mean over the batch; 0 for an empty batch.
  """
  _check_inputs(embeddings, labels, proxies)
  return _mean_cross_entropy(scale * _unit_cosines(embeddings, proxies), labels)


def init_normalized_softmax_params(
    key: chex.PRNGKey, num_classes: int, dim: int, *, scale: float | None = None, dtype=jnp.float32
) -> dict:
  """``{"proxies"}``, plus ``"scale"`` (a learnable scalar starting at ``scale``) when ``scale`` is given."""
  params = init_proxies(key, num_classes, dim, dtype=dtype)
  if scale is not None:
    params["scale"] = jnp.asarray(scale, dtype)
  return params


# --------------------------------------------------------------------------- ProxyNCA


def proxy_nca_loss(
    embeddings: Array, labels: Array, proxies: Array, *, scale: float = 1.0, include_positive: bool = True
) -> Array:
  r"""ProxyNCA (Movshovitz-Attias et al., "No Fuss Distance Metric Learning using Proxies", 2017).

  Cross-entropy over negative squared Euclidean distances between the normalised embedding
  and the normalised proxies:

  .. math::
    \mathcal L = \frac1B \sum_i -\log \frac{\exp(-s\,\|\bar x_i - \bar W_{y_i}\|^2)}
      {\sum_{j \in \mathcal J_i} \exp(-s\,\|\bar x_i - \bar W_j\|^2)}.

  The paper's NCA form sums over the other classes only, :math:`\mathcal J_i = \{j \ne y_i\}`
  (``include_positive=False``): that loss is unbounded below (it keeps rewarding pushing the
  negatives away) and is 0 for ``C = 1``. The default ``include_positive=True``,
  :math:`\mathcal J_i = \{1..C\}`, is the form most implementations train (pytorch-metric-learning,
  the reality check, ProxyNCA++), a plain cross-entropy bounded below by 0. On the unit sphere
  :math:`\|\bar x - \bar w\|^2 = 2 - 2\cos`, so that default equals :func:`normalized_softmax_loss`
  with scale :math:`2s`. ``scale`` :math:`s = 1` (the unit-norm original, no temperature) by
  default; ProxyNCA++'s temperature :math:`T` is :math:`s = 1/T`.

  Returns:
    The mean over the batch; 0 for an empty batch.
  """
  _check_inputs(embeddings, labels, proxies)
  logits = -scale * distances.squared_chord(embeddings, proxies)
  where = None if include_positive else ~_label_mask(labels, proxies.shape[0])
  return _mean_cross_entropy(logits, labels, where=where)


# --------------------------------------------------------------------------- SoftTriple


def soft_triple_loss(
    embeddings: Array,
    labels: Array,
    proxies: Array,
    *,
    scale: float = 20.0,
    gamma: float = 0.1,
    tau: float = 0.2,
    margin: float = 0.01,
    eps: float = 1e-5,
) -> Array:
  r"""SoftTriple loss (Qian et al., "SoftTriple Loss: Deep Metric Learning Without Triplet Sampling", ICCV 2019).

  ``K`` centres per class, ``proxies: [C, K, d]`` (normalised here). The soft similarity to
  class :math:`c` weighs the centres by a softmax with temperature :math:`\gamma`:

  .. math::
    S_{i,c} = \sum_k \frac{\exp(\bar x_i^\top w_c^k / \gamma)}{\sum_{k'} \exp(\bar x_i^\top w_c^{k'} / \gamma)}
      \bar x_i^\top w_c^k, \qquad
    \mathcal L = \frac1B \sum_i -\log \frac{\exp(\lambda (S_{i,y_i} - \delta))}
      {\exp(\lambda (S_{i,y_i} - \delta)) + \sum_{j \ne y_i} \exp(\lambda S_{i,j})}
    + \tau \frac{\sum_c \sum_{t < s} \sqrt{\|w_c^t - w_c^s\|^2 + \epsilon}}{C K (K - 1)}.

  The regulariser (which merges redundant centres) is normalised by :math:`C K (K-1)` as in
  the paper's Eq. (11) and its official code, i.e. half the mean distance over the
  :math:`C K (K-1)/2` pairs; :math:`\epsilon = 10^{-5}` is the official code's constant under the
  root (it keeps the gradient finite at coincident centres). It is 0 for ``K = 1``, and
  for an empty batch the whole loss is 0 (no data, no update; the regulariser depends on
  the proxies only).

  Args:
    scale: :math:`\lambda` (paper: 20).
    gamma: :math:`\gamma`, the centres' softmax temperature (paper: 0.1).
    tau: :math:`\tau`, the regulariser's weight (paper: 0.2).
    margin: :math:`\delta` (paper: 0.01).
    eps: :math:`\epsilon` under the regulariser's square root.

  Returns:
    The mean over the batch plus the regulariser; 0 for an empty batch.
  """
  _check_inputs(embeddings, labels, proxies, proxy_rank=3)
  num_classes, num_centres = proxies.shape[:2]
  cosines = _unit_cosines(embeddings, proxies)  # [B, C, K]
  similarity = jnp.sum(jax.nn.softmax(cosines / gamma, axis=-1) * cosines, axis=-1)
  logits = scale * (similarity - margin * _label_mask(labels, num_classes))
  loss = _mean_cross_entropy(logits, labels)
  if num_centres < 2 or embeddings.shape[0] == 0:
    return loss
  centre_cosines = jax.vmap(distances.cosine_similarity)(proxies, proxies)  # [C, K, K]
  pair_distances = jnp.sqrt(jnp.maximum(2.0 - 2.0 * centre_cosines, 0.0) + eps)
  upper = jnp.triu(jnp.ones((num_centres, num_centres), dtype=bool), k=1)
  spread = jnp.sum(jnp.where(upper, pair_distances, 0.0)) / (num_classes * num_centres * (num_centres - 1))
  return loss + tau * spread


def init_soft_triple_params(
    key: chex.PRNGKey, num_classes: int, dim: int, num_centres: int = 10, *, dtype=jnp.float32
) -> dict:
  r"""``{"proxies": [C, K, d]}``, :math:`\mathcal N(0, 1/d)` entries; ``K = 10`` is the paper's default.

  (The official code draws Kaiming-uniform centres; only directions matter after the
  normalisation, and the Gaussian's are uniform on the sphere.)
  """
  flat = init_proxies(key, num_classes * num_centres, dim, dtype=dtype)["proxies"]
  return {"proxies": flat.reshape(num_classes, num_centres, dim)}


# --------------------------------------------------------------------------- distance ratio


def _dr_squared_distances(embeddings: Array, proxies: Array, distance: str | Distance) -> Array:
  if callable(distance):
    return jnp.square(distance(embeddings, proxies))
  if distance == "euclidean":
    # Squared directly: squaring a square root would put its infinite slope at 0 in the chain.
    return distances.squared_chord(embeddings, proxies)
  if distance == "angular":
    return jnp.square(distances.angular(embeddings, proxies))
  raise ValueError(f"Unknown distance {distance!r}; choose 'euclidean', 'angular' or pass a function.")


def dr_proxy_loss(
    embeddings: Array,
    labels: Array,
    proxies: Array,
    rho: Array | float = heads.RHO_INIT,
    *,
    distance: str | Distance = "euclidean",
    eps: float = heads.DR_EPS,
) -> Array:
  r"""Distance-ratio (DR) formulation (Kim et al., arXiv 2201.08676) with learnable class proxies.

  .. math::
    p(c \mid x_i) = \frac{d(\bar x_i, \bar W_c)^{-\theta}}{\sum_j d(\bar x_i, \bar W_j)^{-\theta}}, \quad
    \mathcal L = \frac1B \sum_i -\log p(y_i \mid x_i), \quad \theta = e^{\rho},

  i.e. a cross-entropy over the logits :math:`-\theta \log \sqrt{d^2 + \epsilon}` of
  :func:`fewshot.heads.dr_logits` (:math:`\epsilon` = ``heads.DR_EPS`` keeps a point on a proxy
  finite), with the DR paper's :math:`\rho_0 = 2`. With two classes it is the paper's softmax
  over distance ratios, :math:`p(y \mid x) = \sigma(\theta \log(d_{\bar y} / d_y))` (a logistic in
  the log-ratio). The paper uses prototypes of an episode; proxies are its extension to
  whole-dataset training (no library has it).

  Args:
    rho: :math:`\rho`, a learnable scalar (see :func:`init_dr_proxy_params`) or a float.
    distance: ``"euclidean"``: the chord :math:`\|\bar x - \bar W_j\|` between the normalised
      points; ``"angular"``: the angle (geodesic on the sphere, :func:`fewshot.distances.angular`);
      or a function ``(embeddings, proxies) -> [B, C]`` of distances (not squared) applied to the
      raw, unnormalised inputs, e.g. :func:`fewshot.distances.euclidean`, which keeps the DR
      loss's invariance to scaling the whole space.
    eps: :math:`\epsilon` added to :math:`d^2` inside the logarithm.

  Returns:
    The mean over the batch; 0 for an empty batch.
  """
  _check_inputs(embeddings, labels, proxies)
  squared = _dr_squared_distances(embeddings, proxies, distance)
  return _mean_cross_entropy(heads.dr_logits(squared, jnp.asarray(rho), eps), labels)


def init_dr_proxy_params(
    key: chex.PRNGKey, num_classes: int, dim: int, *, rho: float = heads.RHO_INIT, dtype=jnp.float32
) -> dict:
  r"""``{"proxies": [C, d], "rho": scalar}``; proxies :math:`\mathcal N(0, 1/d)`, :math:`\rho_0 = 2` (the DR paper's)."""
  params = init_proxies(key, num_classes, dim, dtype=dtype)
  params["rho"] = jnp.asarray(rho, dtype)
  return params
