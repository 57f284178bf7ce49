r"""Pairwise distances between two point sets: the one home for every distance in fewshot.

Heads, losses, miners and retrieval metrics all take one of these functions as an
argument rather than computing distances themselves. Each maps ``x: [n, d]`` and
``y: [m, d]`` to an ``[n, m]`` matrix.

Euclidean distances come in two forms, and each caller uses the one its sizes allow:

* :func:`squared_euclidean` / :func:`euclidean`, by difference, :math:`\sum_k (x_{ik} - y_{jk})^2`:
  exact at coincident points (zero value, zero gradient), at the cost of an ``[n, m, d]``
  intermediate. The few-shot heads (and through them the diagnostics), the DML losses and
  miners use it: an episode or a batch is at most a few million floats. The DR head needs it:
  its logit's derivative in :math:`d^2` is :math:`-\theta / (2 (d^2 + \epsilon))`, about
  :math:`-10^{10}` at a class representative, which turns any rounding left in :math:`d^2`
  into a wrong gradient.
* :func:`squared_euclidean_matmul` / :func:`euclidean_matmul`, by the expansion
  :math:`\|x\|^2 + \|y\|^2 - 2 x y^\top`: one matrix product, no ``[n, m, d]`` intermediate,
  but distances below about :math:`10^{-3} \|x\|` are rounding noise. The retrieval metrics'
  blocked nearest-neighbour search and k-means use it, where ``y`` is a whole gallery
  (``64 x 100,000 x 128`` floats would be 3.3 GB per block).

The cosine and angular distances come in the same two forms: :func:`cosine_distance` /
:func:`angular` from one matrix product of the normalised points (galleries), and
:func:`cosine_by_difference` / :func:`angular_by_difference` from their difference (the few-shot
heads' ``--distance cosine`` and ``angular``), exact at coincident directions.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np

from fewshot import numerics

Array = chex.Array


def _check_pair(x: Array, y: Array) -> None:
  chex.assert_rank([x, y], 2)
  chex.assert_equal_shape_suffix([x, y], 1)


def squared_euclidean(x: Array, y: Array) -> Array:
  r"""Squared Euclidean distances :math:`\|x_i - y_j\|^2`, by difference: exact, ``[n, m, d]`` memory.

  Zero, with a zero gradient, wherever :math:`x_i = y_j`.

  >>> float(squared_euclidean(jnp.array([[1.0, 2.0]]), jnp.array([[1.0, 2.0], [4.0, 6.0]]))[0, 1])
  25.0
  """
  _check_pair(x, y)
  return jnp.sum(jnp.square(x[:, None, :] - y[None, :, :]), axis=-1)


def euclidean(x: Array, y: Array, eps: float = 1e-10) -> Array:
  r"""Euclidean distances :math:`\sqrt{\|x_i - y_j\|^2 + \epsilon}`, by difference (see :func:`squared_euclidean`).

  The :math:`\epsilon` under the root keeps the value and the gradient finite at
  coincident points (the gradient of a bare square root is infinite at zero).
  """
  return jnp.sqrt(squared_euclidean(x, y) + eps)


def squared_euclidean_matmul(x: Array, y: Array) -> Array:
  r"""Squared Euclidean distances by the expansion :math:`\|x\|^2 + \|y\|^2 - 2 x y^\top`: one matrix product.

  For a block of queries against a whole gallery, where the difference form's ``[n, m, d]``
  would not fit. Rounding leaves about :math:`10^{-7} \|x\|^2` at coincident points and
  can make the expansion slightly negative, so it is clamped at zero.

  >>> float(squared_euclidean_matmul(jnp.array([[1.0, 2.0]]), jnp.array([[4.0, 6.0]]))[0, 0])
  25.0
  """
  _check_pair(x, y)
  xx = jnp.sum(x * x, axis=-1)[:, None]
  yy = jnp.sum(y * y, axis=-1)[None, :]
  return jnp.maximum(xx + yy - 2.0 * numerics.matmul(x, y.T), 0.0)


def euclidean_matmul(x: Array, y: Array, eps: float = 1e-10) -> Array:
  r"""Euclidean distances :math:`\sqrt{\|x_i - y_j\|^2 + \epsilon}` by the expansion (see :func:`squared_euclidean_matmul`)."""
  return jnp.sqrt(squared_euclidean_matmul(x, y) + eps)


def l2_normalize(v, eps: float = 1e-12):
  """Rows of ``v`` scaled to unit length; a zero row stays zero, with a finite gradient.

  A numpy array is normalised on the host in its own precision (float64 stays float64),
  as ``v / max(|v|, eps)``; a JAX array under jit.
  """
  if isinstance(v, np.ndarray):
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), eps)
  # rsqrt of the clamped squared norm rather than dividing by the norm: the norm's
  # gradient at a zero vector is 0/0, which would turn every parameter into NaN.
  squared_norm = jnp.sum(v * v, axis=-1, keepdims=True)
  return v * jax.lax.rsqrt(jnp.maximum(squared_norm, eps * eps))


def cosine_similarity(x: Array, y: Array, eps: float = 1e-12) -> Array:
  r"""Cosine similarities :math:`\frac{x_i^\top y_j}{\|x_i\| \|y_j\|}` (a similarity: larger is closer)."""
  _check_pair(x, y)
  return numerics.matmul(l2_normalize(x, eps), l2_normalize(y, eps).T)


def angular(x: Array, y: Array, eps: float = 1e-7) -> Array:
  r"""Angles :math:`\arccos(\cos(x_i, y_j))` in radians, the geodesic distance on the unit sphere.

  The cosine is clipped to :math:`[-1 + \epsilon, 1 - \epsilon]` since the derivative of
  arccos is infinite at :math:`\pm 1`.
  """
  return jnp.arccos(jnp.clip(cosine_similarity(x, y), -1.0 + eps, 1.0 - eps))


def inner_product(x: Array, y: Array) -> Array:
  r"""Inner products :math:`x_i^\top y_j` (a similarity: larger is closer); the cosine on unit vectors."""
  _check_pair(x, y)
  return numerics.matmul(x, y.T)


def cosine_distance(x: Array, y: Array) -> Array:
  r"""Cosine distances :math:`1 - \cos(x_i, y_j)` in :math:`[0, 2]`; half the squared chord on the unit sphere."""
  return 1.0 - cosine_similarity(x, y)


def squared_chord(x: Array, y: Array) -> Array:
  r"""Squared Euclidean distances of the L2-normalised points, :math:`2 - 2\cos(x_i, y_j) \in [0, 4]`.

  From the cosine rather than from the difference of normalised points, which needs no
  second normalisation; rounding can push the cosine past 1, hence the clamp.
  """
  return jnp.maximum(2.0 * cosine_distance(x, y), 0.0)


def cosine_by_difference(x: Array, y: Array) -> Array:
  r"""Cosine distances :math:`1 - \cos(x_i, y_j) = \tfrac12 \|\bar x_i - \bar y_j\|^2 \in [0, 2]`, by difference.

  :math:`\bar x = x / \|x\|` (:func:`l2_normalize`). Exactly zero, with a zero gradient, where
  the directions coincide; :func:`cosine_distance` leaves about :math:`10^{-7}` of rounding there,
  which a logarithm of the distance (the DR head's) would turn into a wrong gradient.

  >>> round(float(cosine_by_difference(jnp.array([[1.0, 0.0]]), jnp.array([[0.0, 2.0]]))[0, 0]), 6)
  1.0
  """
  _check_pair(x, y)
  return 0.5 * squared_euclidean(l2_normalize(x), l2_normalize(y))


def angular_by_difference(x: Array, y: Array, eps: float = 1e-10) -> Array:
  r"""Angles :math:`2\,\mathrm{atan2}(\|\bar x_i - \bar y_j\|_\epsilon, \|\bar x_i + \bar y_j\|_\epsilon)`, radians.

  The geodesic distance on the unit sphere, :math:`\arccos(\cos(x_i, y_j))`, computed from the
  chords to :math:`\bar y_j` and to :math:`-\bar y_j` (:math:`\|v\|_\epsilon = \sqrt{\|v\|^2 + \epsilon}`),
  which is accurate at every angle, where :func:`angular`'s arccos loses half the digits near 0 and
  :math:`\pi`. The :math:`\epsilon` keeps value and gradient finite at coincident and opposite
  directions: the angle there is :math:`\sqrt\epsilon` = 1e-5 rad (and :math:`\pi - \sqrt\epsilon`).

  >>> round(float(angular_by_difference(jnp.array([[1.0, 0.0]]), jnp.array([[0.0, 3.0]]))[0, 0]), 6)
  1.570796
  """
  _check_pair(x, y)
  x, y = l2_normalize(x), l2_normalize(y)
  chord = jnp.sqrt(squared_euclidean(x, y) + eps)
  anti_chord = jnp.sqrt(squared_euclidean(x, -y) + eps)
  return 2.0 * jnp.arctan2(chord, anti_chord)
