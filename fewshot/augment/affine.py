r"""Small random affine distortions of characters, drawn on the device (Koch et al., 2015, in spirit).

Each image gets its own rotation :math:`\theta`, shears :math:`s_x, s_y`, scales
:math:`c_x, c_y` and shift :math:`(t_x, t_y)`, uniform in the given ranges, a pure function
of its key. Output pixel :math:`p` (pixel centres, about the image centre :math:`o`) samples the
input at :math:`A^{-1}(p - o - t) + o` by bilinear interpolation, zero outside the image, where

.. math:: A = \begin{pmatrix}c_x & 0\\0 & c_y\end{pmatrix}
             \begin{pmatrix}1 & s_x\\s_y & 1\end{pmatrix}
             \begin{pmatrix}\cos\theta & -\sin\theta\\ \sin\theta & \cos\theta\end{pmatrix}.

>>> images = jnp.zeros((2, 28, 28, 1)).at[:, 10:18, 12:16].set(1.0)
>>> distort(jax.random.key(0), images, Distortion()).shape
(2, 28, 28, 1)

At test time, :func:`translations` gives every whole-pixel shift of an image within a square,
the views whose embeddings evaluation averages (``--test_shifts``).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from fewshot import numerics


@dataclasses.dataclass(frozen=True)
class Distortion:
  """Ranges of the random affine distortion (Koch et al.'s: ±10°, shear ±0.3, scale 0.8–1.2, shift ±2 px)."""

  rotation_degrees: float = 10.0
  shear: float = 0.3
  scale: tuple[float, float] = (0.8, 1.2)
  shift_pixels: float = 2.0


def affine_matrices(key: jax.Array, batch: int, distortion: Distortion) -> tuple[jax.Array, jax.Array]:
  """Each image's ``A`` ``[B, 2, 2]`` (rows: y, x) and shift ``[B, 2]`` (pixels), drawn uniformly in the ranges."""
  u = jax.random.uniform(key, (batch, 7), minval=-1.0, maxval=1.0)
  theta = jnp.deg2rad(distortion.rotation_degrees) * u[:, 0]
  shear_x, shear_y = distortion.shear * u[:, 1], distortion.shear * u[:, 2]
  lo, hi = distortion.scale
  scale = lo + (hi - lo) * (u[:, 3:5] + 1.0) / 2.0
  cos, sin = jnp.cos(theta), jnp.sin(theta)
  rotation = jnp.stack([jnp.stack([cos, -sin], -1), jnp.stack([sin, cos], -1)], -2)
  shearing = jnp.stack([jnp.stack([jnp.ones_like(shear_x), shear_x], -1),
                        jnp.stack([shear_y, jnp.ones_like(shear_y)], -1)], -2)
  scaling = jax.vmap(jnp.diag)(scale)
  return numerics.matmul(numerics.matmul(scaling, shearing), rotation), distortion.shift_pixels * u[:, 5:7]


def warp(images: jax.Array, matrices: jax.Array, shifts: jax.Array) -> jax.Array:
  """Images ``[B, H, W, C]`` through the affine maps ``p -> A (p - o) + o + t``, bilinear, zero outside."""
  b, h, w, c = images.shape
  centre = jnp.array([(h - 1) / 2.0, (w - 1) / 2.0])
  grid = jnp.stack(jnp.meshgrid(jnp.arange(h, dtype=jnp.float32), jnp.arange(w, dtype=jnp.float32),
                                indexing="ij"), -1).reshape(-1, 2)  # output pixel (y, x)

  def one(image, matrix, shift):
    sampled_at = numerics.matmul(grid - centre - shift, jnp.linalg.inv(matrix).T) + centre  # each output pixel's
    sample = lambda channel: jax.scipy.ndimage.map_coordinates(channel, [sampled_at[:, 0], sampled_at[:, 1]], order=1,
                                                               mode="constant", cval=0.0)
    return jax.vmap(sample, in_axes=2, out_axes=1)(image).reshape(h, w, c)

  return jax.vmap(one)(images.astype(jnp.float32), matrices, shifts)


def distort(key: jax.Array, images: jax.Array, distortion: Distortion) -> jax.Array:
  """``images`` (float ``[B, H, W, C]``, background 0) each through its own random affine distortion."""
  matrices, shifts = affine_matrices(key, images.shape[0], distortion)
  return warp(images, matrices, shifts)


def translations(images: jax.Array, max_shift: int) -> jax.Array:
  """Every translation of ``images`` ``[B, H, W, C]`` (background 0) by whole pixels, zero filled.

  View ``(dy, dx)``, each in ``-max_shift..max_shift``, moves the content ``dy`` down and ``dx`` right;
  returns ``[(2·max_shift + 1)², B, H, W, C]``, ``dy`` major, the unshifted images in the middle.

  >>> views = translations(jnp.arange(9.0).reshape(1, 3, 3, 1), 1)
  >>> views.shape, float(views[4].sum()), views[0, 0, :, :, 0].tolist()  # view 0: (dy, dx) = (-1, -1), up and left
  ((9, 1, 3, 3, 1), 36.0, [[4.0, 5.0, 0.0], [7.0, 8.0, 0.0], [0.0, 0.0, 0.0]])
  """
  _, h, w, _ = images.shape
  s = max_shift
  padded = jnp.pad(images, ((0, 0), (s, s), (s, s), (0, 0)))
  return jnp.stack([padded[:, s - dy : s - dy + h, s - dx : s - dx + w]
                    for dy in range(-s, s + 1) for dx in range(-s, s + 1)])
