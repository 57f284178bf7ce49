"""The random parameters of the paper's training augmentation: a crop box, three jitter factors and a flip per image.

Each image's parameters are a pure function of its own key (``jax.random.split(key, B)``),
drawn exactly as torchvision draws them (:func:`crop_box` follows ``RandomResizedCrop``'s
ten attempts and fallback), so a batch is reproducible from its key alone.
:mod:`fewshot.augment.transforms` applies them.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple, Sequence

import chex
import jax
import jax.numpy as jnp

ATTEMPTS = 10  # torchvision's RandomResizedCrop tries 10 crops before its fallback
CROP_UNIFORMS = 2 * ATTEMPTS + 2  # area and ratio per attempt, then the two offsets
# Static under jit (hashable): one compiled sampler per configuration, reused across sizes and normalisations.
_PARAM_ARGS = ("batch", "height", "width", "scale", "ratio", "brightness", "contrast", "saturation", "flip_prob")


class AugmentParams(NamedTuple):
  """What one image's training transform drew (each field gains a leading batch axis when batched)."""

  top: jax.Array  # int32: the crop's first row
  left: jax.Array  # int32: the crop's first column
  height: jax.Array  # int32: crop rows
  width: jax.Array  # int32: crop columns
  factors: jax.Array  # float32 [3]: brightness, contrast, saturation factors (1 = unchanged)
  flip: jax.Array  # bool: mirror left-right


def fallback_box(height: int, width: int, ratio: Sequence[float]) -> tuple[int, int, int, int]:
  """torchvision's crop when no attempt fits: central, aspect ratio clamped to ``ratio``; (top, left, h, w)."""
  in_ratio = width / height
  if in_ratio < min(ratio):
    w = width
    h = int(round(w / min(ratio)))
  elif in_ratio > max(ratio):
    h = height
    w = int(round(h * max(ratio)))
  else:
    h, w = height, width
  return (height - h) // 2, (width - w) // 2, h, w


def crop_box(uniforms: jax.Array, height: int, width: int, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
  """One RandomResizedCrop box ``(top, left, h, w)`` (int32 scalars) of a ``height × width`` image.

  ``uniforms`` are ``CROP_UNIFORMS`` draws from U[0, 1): torchvision's random numbers,
  made explicit so that the choice is a plain function a test can replay. As torchvision:
  attempt ``a`` has area fraction ``U(scale)`` (``uniforms[a]``) and log-uniform aspect
  ratio ``w/h`` in ``ratio`` (``uniforms[10 + a]``), ``w = round(sqrt(area·ratio))``,
  ``h = round(sqrt(area/ratio))`` (round half to even, like Python's ``round``); the first
  attempt that fits is used, else :func:`fallback_box`. The 10 attempts are computed at
  once and the first fitting one picked by ``argmax`` (no loop under jit). The position
  is uniform over the valid offsets: ``floor(u·(H − h + 1))`` from ``uniforms[20:22]``.
  """
  if not 0 < scale[0] <= scale[1]:
    raise ValueError(f"crop scale must satisfy 0 < min <= max, got {tuple(scale)}.")
  if not 0 < ratio[0] <= ratio[1]:
    raise ValueError(f"crop ratio must satisfy 0 < min <= max, got {tuple(ratio)}.")
  chex.assert_shape(uniforms, (CROP_UNIFORMS,))
  u_area, u_ratio, u_pos = uniforms[:ATTEMPTS], uniforms[ATTEMPTS:2 * ATTEMPTS], uniforms[2 * ATTEMPTS:]
  area = height * width * (scale[0] + (scale[1] - scale[0]) * u_area)
  log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
  aspect = jnp.exp(log_lo + (log_hi - log_lo) * u_ratio)
  w = jnp.round(jnp.sqrt(area * aspect)).astype(jnp.int32)
  h = jnp.round(jnp.sqrt(area / aspect)).astype(jnp.int32)
  fits = (w > 0) & (w <= width) & (h > 0) & (h <= height)
  first = jnp.argmax(fits)  # index of the first True (0 when none, masked below)
  found = fits.any()
  f_top, f_left, f_h, f_w = fallback_box(height, width, ratio)
  h = jnp.where(found, h[first], f_h)
  w = jnp.where(found, w[first], f_w)
  # the min guards u·n rounding up to n in float32
  top = jnp.minimum(jnp.floor(u_pos[0] * (height - h + 1)).astype(jnp.int32), height - h)
  left = jnp.minimum(jnp.floor(u_pos[1] * (width - w + 1)).astype(jnp.int32), width - w)
  return jnp.where(found, top, f_top), jnp.where(found, left, f_left), h, w


def jitter_factors(uniforms: jax.Array, brightness: float = 0.4, contrast: float = 0.4, saturation: float = 0.4):
  """``[3]`` factors ``1 + s·(2u − 1)`` from ``u ~ U[0, 1)``: CloserLookFewShot's ``ImageJitter`` (s = 0.4: U[0.6, 1.4])."""
  strengths = jnp.asarray([brightness, contrast, saturation], jnp.float32)
  return 1.0 + strengths * (2.0 * uniforms - 1.0)


@functools.partial(jax.jit, static_argnames=_PARAM_ARGS)
def sample_params(
    key: jax.Array,
    batch: int,
    height: int,
    width: int,
    *,
    scale=(0.08, 1.0),
    ratio=(3 / 4, 4 / 3),
    brightness: float = 0.4,
    contrast: float = 0.4,
    saturation: float = 0.4,
    flip_prob: float = 0.5,
) -> AugmentParams:
  """The random draws of :func:`train_transform` for a batch: one ``jax.random.split(key, batch)`` key per image.

  Each image's key gives one vector of ``CROP_UNIFORMS + 4`` uniforms (crop, three jitter
  factors, flip): one threefry call per image keeps the compiled program small, where
  a call per draw (``randint``, ``bernoulli``, ...) made it compile ~10× slower on CPU.
  """

  def one(k):
    u = jax.random.uniform(k, (CROP_UNIFORMS + 4,))
    top, left, h, w = crop_box(u[:CROP_UNIFORMS], height, width, scale, ratio)
    factors = jitter_factors(u[CROP_UNIFORMS:CROP_UNIFORMS + 3], brightness, contrast, saturation)
    return AugmentParams(top, left, h, w, factors, u[-1] < flip_prob)

  return jax.vmap(one)(jax.random.split(key, batch))
