"""On-device image augmentation of the distance-ratio paper, jittable and batched.

The DR paper (arXiv 2201.08676, Sec. 4) follows Chen et al., "A Closer Look at Few-shot Classification" (arXiv
1904.04232); the pipeline and its parameters are listed in docs/protocol.md#data.

Training: RandomResizedCrop(size, scale (0.08, 1), ratio (3/4, 4/3)) → brightness,
contrast, saturation jitter, each factor U[0.6, 1.4], in that order → horizontal flip
(p = 0.5) → normalise. Evaluation: resize to ``int(1.15·size)`` square → center crop
``size`` → normalise. Both take a uint8 (or float in [0, 1]) batch ``[B, H, W, C]`` and
return float32 ``[B, size, size, C]``; all sizes are static, so one compile serves a run.

The reference pipeline (CloserLookFewShot: torchvision on PIL images) is followed
operation by operation, with two deliberate differences, both because we work in float32:
* no uint8 quantisation between steps (PIL rounds after each resize pass, with
  fixed-point weights: < 1 level; and truncates after each enhancement: ≈ 0.5 level
  low per step, up to ~3 levels after the three);
* Contrast blends with the exact mean luma, where PIL first rounds it to an integer.
One difference comes from the data, not from here: the images arrive already stored at
``int(1.15·size)``, so the random crop is taken from that, where torchvision crops the
original image (same geometry relative to the image, less detail in small crops).

Randomness: ``jax.random.split(key, B)`` gives one key per image, and each image's crop,
jitter factors and flip are a pure function of its key (:func:`fewshot.augment.random_params.sample_params`), so a
batch is reproducible from its key alone.
"""

from __future__ import annotations

import functools
from typing import Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np

from fewshot import numerics
from fewshot.augment.random_params import AugmentParams, sample_params
from fewshot.data.catalog import stored_size

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# ITU-R 601-2 luma, as in PIL's convert("L").
LUMA = (0.299, 0.587, 0.114)
# The pieces are jitted with their configuration static (so hashable: tuples, not lists):
# eagerly called, each is one compiled program per configuration and shape, not hundreds
# of dispatched ops; inside an outer jit they are simply inlined.


def to_float(images: jax.Array) -> jax.Array:
  """Stored uint8 pixels to float32 in [0, 1]; float images pass through unchanged.

  Multiplies by the float32 reciprocal of 255, which XLA substitutes for the division
  under jit anyway: written out, eager and compiled results agree bit for bit.
  """
  if images.dtype == jnp.uint8:
    return images.astype(jnp.float32) * np.float32(1 / 255)
  return images.astype(jnp.float32)


def eval_resize(size: int) -> int:
  """The evaluation transform's square resize side: the stored size, ``int(1.15·size)`` (96 for 84, 257 for 224)."""
  return stored_size(size)


# ---- resampling ----------------------------------------------------------------------------
@functools.partial(jax.jit, static_argnames=("in_size", "out_size", "full", "offset"))
def resample_weights(in_size: int, out_size: int, start, length, full=None, offset=0) -> jax.Array:
  """``[out_size, in_size]`` bilinear weights mapping the window ``[start, start + length)`` onto ``full`` pixels.

  Output pixel ``o`` is pixel ``o + offset`` of the window resized to ``full`` pixels
  (default ``out_size``), so a resize followed by a crop is one matrix. The conventions
  are ``jax.image.scale_and_translate``'s and PIL's (they agree): half-pixel centres, so
  output centre ``o + offset + 0.5`` samples the input at ``start + (o + offset + 0.5)·length/full``;
  a triangle kernel widened by ``length/full`` when downscaling (antialias); weights
  renormalised over the pixels used. The one change from ``scale_and_translate``: the
  kernel's support is clipped to the window, not to the whole image, which is what
  torchvision's crop-then-resize does; with ``scale_and_translate`` the pixels just
  outside a crop would bleed into its border. ``start``/``length`` may be traced.
  """
  full = out_size if full is None else full
  length = jnp.asarray(length, jnp.float32)
  start = jnp.asarray(start, jnp.float32)
  step = length / full  # input pixels per output pixel
  centres = start + (jnp.arange(out_size, dtype=jnp.float32) + offset + 0.5) * step
  pixels = jnp.arange(in_size, dtype=jnp.float32) + 0.5
  weights = jnp.maximum(0.0, 1.0 - jnp.abs(pixels[None, :] - centres[:, None]) / jnp.maximum(step, 1.0))
  inside = (pixels >= start) & (pixels < start + length)
  weights = jnp.where(inside[None, :], weights, 0.0)
  return weights / weights.sum(axis=1, keepdims=True)


def _resample(image: jax.Array, wy: jax.Array, wx: jax.Array) -> jax.Array:
  """``[H, W, C]`` → ``[S, S', C]`` by separable weights ``wy [S, H]`` and ``wx [S', W]``."""
  # HIGHEST keeps float32 on accelerators (TF32/bf16 passes would blur pixel-exact crops).
  rows = numerics.einsum("oh,hwc->owc", wy, image)
  return numerics.einsum("pw,owc->opc", wx, rows)


# ---- deterministic pieces --------------------------------------------------------------------
def grayscale(image: jax.Array) -> jax.Array:
  """``[..., C]`` → ``[..., 1]`` luma (PIL's ``convert("L")`` weights); one channel is its own grayscale."""
  if image.shape[-1] == 1:
    return image
  if image.shape[-1] != 3:
    raise ValueError(f"colour jitter needs 1 or 3 channels, got {image.shape[-1]}.")
  return numerics.einsum("...c,c->...", image, jnp.asarray(LUMA, image.dtype))[..., None]


def color_jitter(image: jax.Array, factors: jax.Array, enabled: Sequence[bool] = (True, True, True)) -> jax.Array:
  """PIL ``ImageEnhance`` Brightness → Contrast → Color on one float image ``[H, W, C]`` in [0, 1].

  Each is PIL's ``Image.blend(degenerate, image, f) = degenerate + f·(image − degenerate)``,
  clipped to [0, 1] as PIL's blend clips to [0, 255]: Brightness blends with black,
  Contrast with the (scalar) mean luma of the image, Color with its luma image, each
  computed from the output of the previous step. ``enabled`` (static) skips steps whose
  strength is zero, so a jitter-free transform costs nothing and is exactly the identity.
  """
  chex.assert_rank(image, 3)
  chex.assert_shape(factors, (3,))
  if enabled[0]:
    image = jnp.clip(image * factors[0], 0.0, 1.0)
  if enabled[1]:
    mean = grayscale(image).mean()
    image = jnp.clip(mean + factors[1] * (image - mean), 0.0, 1.0)
  if enabled[2] and image.shape[-1] != 1:  # grayscale of one channel is the image: Color is the identity
    gray = grayscale(image)
    image = jnp.clip(gray + factors[2] * (image - gray), 0.0, 1.0)
  return image


def normalize(images: jax.Array, mean: Sequence[float] | None, std: Sequence[float] | None) -> jax.Array:
  """``(x − mean) / std`` per channel; ``mean=None`` (with ``std=None``) leaves the images in [0, 1]."""
  if mean is None and std is None:
    return images
  if mean is None or std is None or len(mean) != images.shape[-1] or len(std) != images.shape[-1]:
    raise ValueError(
        f"normalisation needs a mean and a std per channel ({images.shape[-1]}), got mean={mean}, std={std};"
        " pass mean=None, std=None for none."
    )
  return (images - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)


def _check_images(images: jax.Array) -> None:
  chex.assert_rank(images, 4)
  if images.dtype != jnp.uint8 and not jnp.issubdtype(images.dtype, jnp.floating):
    raise TypeError(f"images must be uint8 or float, got {images.dtype}.")


@functools.partial(jax.jit, static_argnames=("size", "jitter", "mean", "std"))
def apply_params(images: jax.Array, params: AugmentParams, size: int, *, jitter: Sequence[bool] = (True, True, True),
                 mean=IMAGENET_MEAN, std=IMAGENET_STD) -> jax.Array:
  """The training transform with given draws: crop + resize (+ flip) → jitter → normalise; ``[B, size, size, C]``.

  The flip is folded into the column weights (reversed output columns): it commutes with
  the jitter, whose contrast mean is flip-invariant, so applying it first costs nothing
  and is exactly torchvision's order in result.
  """
  _check_images(images)
  batch, height, width, _ = images.shape
  chex.assert_shape([params.top, params.left, params.height, params.width, params.flip], (batch,))
  chex.assert_shape(params.factors, (batch, 3))

  def one(image, p: AugmentParams):
    wy = resample_weights(height, size, p.top, p.height)
    wx = resample_weights(width, size, p.left, p.width)
    wx = jnp.where(p.flip, wx[::-1], wx)
    return color_jitter(_resample(image, wy, wx), p.factors, jitter)

  return normalize(jax.vmap(one)(to_float(images), params), mean, std)


# ---- the transforms ------------------------------------------------------------------------
def train_transform(
    key: jax.Array,
    images: jax.Array,
    size: int,
    *,
    scale=(0.08, 1.0),
    ratio=(3 / 4, 4 / 3),
    brightness: float = 0.4,
    contrast: float = 0.4,
    saturation: float = 0.4,
    flip_prob: float = 0.5,
    mean=IMAGENET_MEAN,
    std=IMAGENET_STD,
) -> jax.Array:
  """The paper's training augmentation of a uint8 batch ``[B, H, W, C]`` → float32 ``[B, size, size, C]``.

  Everything is determined by ``key`` (see :func:`sample_params`, which returns the draws).
  Jitter strengths of 0 and ``flip_prob=0`` switch those steps off.
  """
  _check_images(images)
  batch, height, width, _ = images.shape
  params = sample_params(key, batch, height, width, scale=scale, ratio=ratio, brightness=brightness,
                         contrast=contrast, saturation=saturation, flip_prob=flip_prob)
  jitter = (brightness != 0, contrast != 0, saturation != 0)
  return apply_params(images, params, size, jitter=jitter, mean=mean, std=std)


@functools.partial(jax.jit, static_argnames=("size", "resize", "mean", "std"))
def eval_transform(images: jax.Array, size: int, *, resize: int | None = None, mean=IMAGENET_MEAN,
                   std=IMAGENET_STD) -> jax.Array:
  """The paper's evaluation transform: resize to ``resize`` square (default ``int(1.15·size)``), center crop ``size``.

  Stored images already ``resize × resize`` are only sliced (exactly); otherwise the
  resize and the crop are one bilinear resample (PIL's conventions, antialiased when
  downscaling). The crop offset is torchvision's ``int(round((resize − size) / 2))``.
  """
  _check_images(images)
  _, height, width, _ = images.shape
  resize = eval_resize(size) if resize is None else resize
  if resize < size:
    raise ValueError(f"the evaluation resize ({resize}) must be at least the crop size ({size}).")
  offset = int(round((resize - size) / 2.0))
  images = to_float(images)
  if (height, width) == (resize, resize):
    out = images[:, offset:offset + size, offset:offset + size]
  else:
    wy = resample_weights(height, size, 0, height, full=resize, offset=offset)
    wx = resample_weights(width, size, 0, width, full=resize, offset=offset)
    out = jax.vmap(_resample, in_axes=(0, None, None))(images, wy, wx)
  return normalize(out, mean, std)
