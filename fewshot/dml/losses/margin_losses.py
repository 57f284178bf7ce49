r"""Angular-margin proxy losses: CosFace, ArcFace and SphereFace.

Each is the normalised softmax of :mod:`fewshot.dml.losses.proxy_losses` with the label's
logit made harder: :math:`s \cos\theta_{y}` becomes :math:`s\,\psi(\cos\theta_y)` while every
other class keeps :math:`s \cos\theta_j`, where :math:`\theta_j` is the angle between the
embedding and proxy :math:`j`. Conventions (shape checks, labels, empty batches, proxies'
initialisation) are those of :mod:`~fewshot.dml.losses.proxy_losses`.
"""

from __future__ import annotations

from typing import Callable

import chex
import jax
import jax.numpy as jnp

from fewshot.dml.losses.proxy_losses import (
    _check_inputs,
    _label_mask,
    _mean_cross_entropy,
    _unit_cosines,
)

Array = chex.Array

# sin(theta) = sqrt(1 - cos^2) has an infinite slope at cos = +-1; below this floor (about
# the float32 resolution of a cosine near 1, where 1 - cos^2 is rounding noise anyway) the
# root is held constant, so the gradient stays finite for an embedding on (or opposite) its proxy.
_SIN_SQUARED_FLOOR = 1e-7


def _target_margin_loss(
    embeddings: Array, labels: Array, proxies: Array, scale: Array | float, target: Callable[[Array], Array]
) -> Array:
  """Cross-entropy of ``scale * cos``, with the label's column replaced by ``scale * target(cos)``."""
  _check_inputs(embeddings, labels, proxies)
  cosines = _unit_cosines(embeddings, proxies)
  logits = jnp.where(_label_mask(labels, proxies.shape[0]), target(cosines), cosines)
  return _mean_cross_entropy(scale * logits, labels)


def cosface_loss(
    embeddings: Array, labels: Array, proxies: Array, *, scale: Array | float = 64.0, margin: float = 0.35
) -> Array:
  r"""CosFace / large-margin cosine loss (Wang et al., CVPR 2018): an additive cosine margin.

  .. math::
    \mathcal L = \frac1B \sum_i -\log \frac{e^{s(\cos\theta_{y_i} - m)}}
      {e^{s(\cos\theta_{y_i} - m)} + \sum_{j \ne y_i} e^{s \cos\theta_j}},
    \qquad \cos\theta_j = \bar W_j^\top \bar x_i.

  Defaults are the paper's :math:`s = 64`, :math:`m = 0.35`; ``margin=0`` is
  :func:`~fewshot.dml.losses.proxy_losses.normalized_softmax_loss`. Mean over the batch, 0 when empty.
  """
  return _target_margin_loss(embeddings, labels, proxies, scale, lambda c: c - margin)


def _additive_angular_target(cosines: Array, margin: float) -> Array:
  sines = jnp.sqrt(jnp.maximum(1.0 - jnp.square(cosines), _SIN_SQUARED_FLOOR))
  shifted = cosines * jnp.cos(margin) - sines * jnp.sin(margin)  # cos(theta + m)
  # Past theta = pi - m, cos(theta + m) would rise again and reward a worse angle; fall back to
  # the CosFace-like cos(theta) - m sin(m), which keeps the target decreasing in theta.
  return jnp.where(cosines > jnp.cos(jnp.pi - margin), shifted, cosines - margin * jnp.sin(margin))


def arcface_loss(
    embeddings: Array, labels: Array, proxies: Array, *, scale: Array | float = 64.0, margin: float = 0.5
) -> Array:
  r"""ArcFace / additive angular margin loss (Deng et al., CVPR 2019).

  .. math::
    \mathcal L = \frac1B \sum_i -\log \frac{e^{s \cos(\theta_{y_i} + m)}}
      {e^{s \cos(\theta_{y_i} + m)} + \sum_{j \ne y_i} e^{s \cos\theta_j}}.

  Defaults are the paper's :math:`s = 64`, :math:`m = 0.5` rad. :math:`\cos(\theta + m)` is
  computed as :math:`\cos\theta\cos m - \sin\theta \sin m` with
  :math:`\sin\theta = \sqrt{\max(1 - \cos^2\theta, 10^{-7})}`, so no arccos and a finite gradient
  at :math:`\cos\theta = \pm 1`. Where :math:`\theta_y + m > \pi` the target logit uses
  InsightFace's fallback :math:`\cos\theta_y - m \sin m`, which keeps it decreasing in
  :math:`\theta_y` (it jumps down by :math:`\cos m + m \sin m - 1` at :math:`\theta_y = \pi - m`).
  ``margin=0`` is :func:`~fewshot.dml.losses.proxy_losses.normalized_softmax_loss`. Mean over the
  batch, 0 when empty.
  """
  return _target_margin_loss(embeddings, labels, proxies, scale, lambda c: _additive_angular_target(c, margin))


def _chebyshev(cosines: Array, degree: int) -> Array:
  r""":math:`T_m(\cos\theta) = \cos(m\theta)` by the three-term recurrence: a polynomial, smooth everywhere."""
  previous, current = jnp.ones_like(cosines), cosines
  for _ in range(degree - 1):
    previous, current = current, 2.0 * cosines * current - previous
  return current  # degree >= 1: SphereFace checks its margin


def _multiplicative_angular_target(cosines: Array, margin: int, blend: float) -> Array:
  # k only selects the branch (psi is continuous), so it is computed off the gradient path.
  angles = jnp.arccos(jnp.clip(jax.lax.stop_gradient(cosines), -1.0, 1.0))
  k = jnp.clip(jnp.floor(margin * angles / jnp.pi), 0, margin - 1)
  psi = (1.0 - 2.0 * jnp.mod(k, 2.0)) * _chebyshev(cosines, margin) - 2.0 * k
  return (blend * cosines + psi) / (1.0 + blend)


def sphereface_loss(
    embeddings: Array,
    labels: Array,
    proxies: Array,
    *,
    scale: Array | float = 64.0,
    margin: int = 4,
    blend: float = 0.0,
) -> Array:
  r"""SphereFace / A-Softmax (Liu et al., CVPR 2017): a multiplicative angular margin.

  The label's :math:`\cos\theta_y` becomes the monotonic extension of :math:`\cos(m\theta_y)`,

  .. math::
    \psi(\theta) = (-1)^k \cos(m\theta) - 2k, \quad \theta \in \left[\tfrac{k\pi}{m}, \tfrac{(k+1)\pi}{m}\right],
    \qquad \text{target} = s\,\frac{\lambda \cos\theta_y + \psi(\theta_y)}{1 + \lambda},

  with :math:`\cos(m\theta)` the Chebyshev polynomial :math:`T_m(\cos\theta)` (finite gradient
  everywhere) and :math:`k` a piecewise constant (no gradient; :math:`\psi` is continuous).
  Defaults: the paper's :math:`m = 4`. ``blend`` is the paper's :math:`\lambda`, which it
  anneals from about 1000 down to 5 during training for the loss to converge; the caller
  owns that schedule (0, the pure :math:`\psi`, by default).

  Deviation: the paper multiplies by :math:`\|x\|` (the embedding is not normalised); here the
  embedding is normalised like every loss of this package (the reality-check protocol) and a
  fixed scale :math:`s` stands in for the norm, as in CosFace / ArcFace (default 64, theirs; the
  paper has none). ``margin=1`` is the normalised softmax. Mean over the batch, 0 when empty.
  """
  if not isinstance(margin, int) or margin < 1:
    raise ValueError(f"SphereFace needs an integer margin m >= 1, got {margin!r}.")
  return _target_margin_loss(
      embeddings, labels, proxies, scale, lambda c: _multiplicative_angular_target(c, margin, blend))
