"""On-device augmentation against PIL / numpy references of the torchvision + ImageEnhance pipeline."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image, ImageEnhance

from fewshot import numerics
from fewshot.augment import random_params, transforms
from fewshot.augment.augmentation import NO_AUGMENTATION, Augmentation

MEAN = np.asarray(transforms.IMAGENET_MEAN, np.float32)
STD = np.asarray(transforms.IMAGENET_STD, np.float32)
# Crop covering the whole (square) image, no flip, no jitter, no normalisation: isolates one step.
WHOLE = dict(scale=(1.0, 1.0), ratio=(1.0, 1.0), brightness=0.0, contrast=0.0, saturation=0.0, flip_prob=0.0,
             mean=None, std=None)


def params_of(key, images, config):
  """The draws train_transform(key, images, size, **config) made (the same static arguments: one compile)."""
  batch, height, width, _ = np.shape(images)
  return random_params.sample_params(key, batch, height, width, **{k: v for k, v in config.items() if k not in ("mean", "std")})


def random_uint8(shape, seed=0):
  return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def skewed_uint8(shape, seed=0):
  """Pixels with mean ≈ 85, not 127.5: a contrast blend with 0.5 instead of the mean would show."""
  return (np.random.default_rng(seed).random(shape) ** 2 * 255).astype(np.uint8)


def pil_crop_resize(image: np.ndarray, box, size: int) -> np.ndarray:
  """PIL's bilinear crop + resize of a float ``[H, W, C]`` image, channel by channel in mode "F" (no rounding)."""
  top, left, h, w = box
  return np.stack([
      np.asarray(Image.fromarray(image[..., c]).crop((left, top, left + w, top + h)).resize((size, size), Image.BILINEAR))
      for c in range(image.shape[-1])
  ], axis=-1)


def numpy_jitter(image: np.ndarray, factors) -> np.ndarray:
  """PIL ImageEnhance Brightness → Contrast → Color as float formulas: blend(degenerate, image, f), clipped."""
  luma = (lambda x: x) if image.shape[-1] == 1 else (lambda x: (x @ np.asarray(transforms.LUMA))[..., None])
  x = np.clip(image * factors[0], 0, 1)
  mean = luma(x).mean()
  x = np.clip(mean + factors[1] * (x - mean), 0, 1)
  gray = luma(x)
  return np.clip(gray + factors[2] * (x - gray), 0, 1)


# ---- shapes, ranges, determinism ---------------------------------------------------------------
@pytest.mark.parametrize("channels", [1, 3])
def test_shapes_dtypes_and_ranges(channels):
  images = random_uint8((6, 32, 32, channels))
  key = jax.random.key(0)
  plain = transforms.train_transform(key, images, 28, mean=None, std=None)
  assert plain.shape == (6, 28, 28, channels) and plain.dtype == jnp.float32
  assert float(plain.min()) >= 0.0 and float(plain.max()) <= 1.0
  assert transforms.eval_transform(images, 28, mean=None, std=None).shape == (6, 28, 28, channels)
  mean, std = (transforms.IMAGENET_MEAN, transforms.IMAGENET_STD) if channels == 3 else ((0.5,), (0.25,))
  lo, hi = -np.asarray(mean) / np.asarray(std), (1 - np.asarray(mean)) / np.asarray(std)
  for out in (transforms.train_transform(key, images, 28, mean=mean, std=std),
              transforms.eval_transform(images, 28, mean=mean, std=std)):
    out = np.asarray(out)
    assert out.dtype == np.float32 and out.shape == (6, 28, 28, channels)
    assert np.all(out >= lo - 1e-5) and np.all(out <= hi + 1e-5)
    assert np.any(out < 0)  # normalised, not left in [0, 1]
  # uint8 and the same pixels as float in [0, 1] give the same result
  np.testing.assert_allclose(transforms.train_transform(key, images.astype(np.float32) / 255, 28, mean=mean, std=std),
                             transforms.train_transform(key, images, 28, mean=mean, std=std), atol=1e-5)


def test_same_key_same_output_different_keys_differ():
  images = random_uint8((8, 32, 32, 3))
  a = transforms.train_transform(jax.random.key(1), images, 28)
  np.testing.assert_array_equal(a, transforms.train_transform(jax.random.key(1), images, 28))
  b = transforms.train_transform(jax.random.key(2), images, 28)
  assert not np.allclose(a, b)
  pa, pb = params_of(jax.random.key(1), images, {}), params_of(jax.random.key(2), images, {})
  assert not np.array_equal(np.stack(pa[:4]), np.stack(pb[:4]))  # different crops
  assert not np.array_equal(pa.flip, pb.flip) or not np.array_equal(pa.factors, pb.factors)
  # one key per image: a batch of copies of one image still gets different crops
  same = transforms.train_transform(jax.random.key(3), np.repeat(images[:1], 8, 0), 28)
  assert len({np.asarray(x).tobytes() for x in same}) == 8


# ---- evaluation ------------------------------------------------------------------------------
@pytest.mark.parametrize("size,stored", [(84, 96), (224, 257)])
def test_eval_is_an_exact_center_crop_when_stored_at_the_resize(size, stored):
  assert transforms.eval_resize(size) == stored
  images = random_uint8((2, stored, stored, 3))
  off = int(round((stored - size) / 2))  # torchvision CenterCrop: 6 for 96→84, round(16.5) = 16 for 257→224
  crop = images[:, off:off + size, off:off + size].astype(np.float32) * np.float32(1 / 255)
  np.testing.assert_array_equal(transforms.eval_transform(images, size, mean=None, std=None), crop)
  # normalised: XLA may fuse/contract (x·(1/255) − mean)/std differently from numpy, a few ulp at most
  np.testing.assert_allclose(transforms.eval_transform(images, size), (crop - MEAN) / STD, rtol=0, atol=1e-6)


def test_eval_general_resize_matches_pil_bilinear():
  image = random_uint8((45, 70, 3), seed=3)  # not square, downscaled in one axis, upscaled in the other
  out = np.asarray(transforms.eval_transform(image[None], 48, resize=55, mean=None, std=None))[0]
  off = int(round((55 - 48) / 2))
  # float reference: PIL mode "F", the same arithmetic without uint8 rounding
  ref = pil_crop_resize(image.astype(np.float32) / 255, (0, 0, 45, 70), 55)[off:off + 48, off:off + 48]
  np.testing.assert_allclose(out, ref, atol=1e-5)
  # torchvision's actual path (uint8 RGB resize) differs by PIL's fixed-point weights and its rounding
  # to whole levels after each of the two passes: under one level
  ref8 = np.asarray(Image.fromarray(image).resize((55, 55), Image.BILINEAR))[off:off + 48, off:off + 48]
  assert np.abs(out * 255 - ref8).max() < 1.0 and np.abs(out * 255 - ref8).mean() < 0.35
  # the default resize is int(1.15·size), also on 1-channel images
  gray = random_uint8((40, 40, 1), seed=4)
  out = np.asarray(transforms.eval_transform(gray[None], 28, mean=None, std=None))[0]
  ref = pil_crop_resize(gray.astype(np.float32) / 255, (0, 0, 40, 40), 32)[2:30, 2:30]
  np.testing.assert_allclose(out, ref, atol=1e-5)


def test_resample_weights_share_scale_and_translate_conventions_but_clip_to_the_crop():
  image = jnp.asarray(np.random.default_rng(5).random((30, 30, 1), np.float32))
  # whole image: identical to jax.image.scale_and_translate (half-pixel centres, antialias)
  resize = jax.jit(jax.image.scale_and_translate, static_argnums=(1, 2, 5))
  for out, scale in ((20, 20 / 30), (50, 50 / 30)):
    w = transforms.resample_weights(30, out, 0, 30)
    ref = resize(image, (out, 30, 1), (0,), jnp.array([scale]), jnp.array([0.0]), "linear")
    np.testing.assert_allclose(numerics.einsum("oh,hwc->owc", w, image), ref, atol=1e-5)  # 1/scale vs length/out
  # a crop: inner rows agree, the border row uses no pixel outside the crop (torchvision crops first)
  w = np.asarray(transforms.resample_weights(30, 20, 5, 10))
  assert np.all(w[:, :5] == 0) and np.all(w[:, 15:] == 0)
  np.testing.assert_allclose(w.sum(1), 1, rtol=1e-6)
  ref = resize(image, (20, 30, 1), (0,), jnp.array([2.0]), jnp.array([-10.0]), "linear")
  ours = numerics.einsum("oh,hwc->owc", w, image)
  np.testing.assert_allclose(ours[1:-1], ref[1:-1], atol=1e-6)
  assert not np.allclose(ours[0], ref[0])


# ---- training: crop geometry -----------------------------------------------------------------
def test_train_crop_resize_matches_pil_on_the_drawn_box():
  images = np.random.default_rng(6).random((12, 40, 52, 3)).astype(np.float32)
  key = jax.random.key(7)
  config = dict(WHOLE, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3))
  out = np.asarray(transforms.train_transform(key, images, 24, **config))
  params = params_of(key, images, config)
  for image, o, *box in zip(images, out, params.top, params.left, params.height, params.width):
    np.testing.assert_allclose(o, pil_crop_resize(image, tuple(int(b) for b in box), 24), atol=2e-5)


def test_crop_box_picks_the_first_attempt_that_fits_like_torchvision():
  """torchvision's Python loop (float64) on the same uniform draws; scale up to 1.5 makes attempts fail."""
  n, height, width, scale, ratio = 300, 30, 40, (0.5, 1.5), (3 / 4, 4 / 3)
  uniforms = np.random.default_rng(20).random((n, random_params.CROP_UNIFORMS), np.float32)
  boxes = jax.jit(jax.vmap(lambda u: random_params.crop_box(u, height, width, scale, ratio)))(uniforms)
  boxes = np.stack([np.asarray(b) for b in boxes], 1)
  fallbacks = 0
  for u, box in zip(uniforms.astype(np.float64), boxes):
    for a in range(random_params.ATTEMPTS):  # torchvision.transforms.RandomResizedCrop.get_params
      area = height * width * (scale[0] + (scale[1] - scale[0]) * u[a])
      log_r = math.log(ratio[0]) + (math.log(ratio[1]) - math.log(ratio[0])) * u[random_params.ATTEMPTS + a]
      w, h = int(round(math.sqrt(area * math.exp(log_r)))), int(round(math.sqrt(area / math.exp(log_r))))
      if 0 < w <= width and 0 < h <= height:
        expected = (int(u[-2] * (height - h + 1)), int(u[-1] * (width - w + 1)), h, w)
        break
    else:
      fallbacks += 1
      expected = (0, 0, 30, 40)  # central crop; 40/30 is within the ratio range: the whole image
    assert tuple(box) == expected
  assert 0 < fallbacks < 15  # both paths seen (P(an attempt fails) ≈ 0.65 here)


def test_crop_geometry_from_an_image_that_encodes_coordinates():
  """Rows and columns read back from the output give the crop; its area and aspect ratio obey the ranges."""
  n, stored, size = 256, 60, 84  # upscaling only: bilinear interpolation reproduces a ramp exactly
  rows, cols = np.meshgrid(np.arange(stored, dtype=np.float32), np.arange(stored, dtype=np.float32), indexing="ij")
  coords = np.repeat(np.stack([rows, cols], -1)[None], n, 0)  # value = pixel index; no jitter: no clipping
  config = dict(WHOLE, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3))
  out = np.asarray(transforms.train_transform(jax.random.key(8), coords, size, **config))
  inner = np.arange(size // 4, 3 * size // 4)  # away from the border, where the kernel is clipped to the crop
  # interior output pixel o samples index start + (o + 0.5)·length/size − 0.5 of a linear ramp
  slope_r, icpt_r = np.polyfit(inner + 0.5, out[:, inner, size // 2, 0].T, 1)
  slope_c, icpt_c = np.polyfit(inner + 0.5, out[:, size // 2, inner, 1].T, 1)
  h, w = slope_r * size, slope_c * size
  top, left = icpt_r + 0.5, icpt_c + 0.5
  for value in (h, w, top, left):
    np.testing.assert_allclose(value, np.round(value), atol=2e-3)  # whole-pixel crops
  h, w, top, left = (np.round(v) for v in (h, w, top, left))
  assert np.all(top >= 0) and np.all(left >= 0) and np.all(top + h <= stored) and np.all(left + w <= stored)
  # w = round(sqrt(A·r)), h = round(sqrt(A/r)) with A/(H·W) in [0.08, 1] and r in [3/4, 4/3]: bounds up to rounding
  total = stored * stored
  assert np.all((w + 0.5) * (h + 0.5) >= 0.08 * total) and np.all((w - 0.5) * (h - 0.5) <= total)
  assert np.all((w + 0.5) / (h - 0.5) >= 3 / 4) and np.all((w - 0.5) / (h + 0.5) <= 4 / 3)
  # statistically: the ranges are used, the log ratio is centred, the position is uniform
  fraction, log_ratio = w * h / total, np.log(w / h)
  assert fraction.min() < 0.15 and fraction.max() > 0.85
  assert abs(fraction.mean() - 0.483) < 0.05  # torchvision's loop in numpy: 0.483 ± 0.236 (sd), here SE 0.015
  assert log_ratio.min() < -0.2 and log_ratio.max() > 0.2 and abs(log_ratio.mean()) < 0.04
  slack = stored - h
  position = (top[slack > 10] / slack[slack > 10])
  assert abs(position.mean() - 0.5) < 0.08
  # the recovered boxes are the drawn ones
  params = params_of(jax.random.key(8), coords, config)
  for recovered, drawn in ((top, params.top), (left, params.left), (h, params.height), (w, params.width)):
    np.testing.assert_array_equal(recovered, drawn)


@pytest.mark.parametrize("height,width,box", [(60, 100, (0, 10, 60, 80)), (100, 60, (10, 0, 80, 60)),
                                             (32, 32, (0, 0, 32, 32))])
def test_fallback_when_no_crop_fits(height, width, box):
  """Area fractions in [1.5, 2] never fit: torchvision's central crop with the ratio clamped to [3/4, 4/3]."""
  image = np.random.default_rng(9).random((height, width, 1)).astype(np.float32)
  config = dict(WHOLE, scale=(1.5, 2.0), ratio=(3 / 4, 4 / 3))
  images = np.repeat(image[None], 4, 0)
  params = params_of(jax.random.key(10), images, config)
  assert all(np.all(np.asarray(v) == b) for v, b in zip(params[:4], box))
  out = transforms.train_transform(jax.random.key(10), images, 20, **config)
  for o in np.asarray(out):
    np.testing.assert_allclose(o, pil_crop_resize(image, box, 20), atol=2e-5)


# ---- training: jitter and flip ---------------------------------------------------------------
def test_brightness_alone_multiplies_a_constant_image():
  n = 200
  images = np.full((n, 8, 8, 3), 0.5, np.float32)
  config = dict(WHOLE, brightness=0.4)
  out = np.asarray(transforms.train_transform(jax.random.key(11), images, 8, **config))
  factors = out[:, 0, 0, 0] / 0.5
  np.testing.assert_allclose(out, 0.5 * factors[:, None, None, None] * np.ones_like(out), rtol=1e-6)
  assert factors.min() >= 0.6 and factors.max() <= 1.4
  assert factors.min() < 0.65 and factors.max() > 1.35 and abs(factors.mean() - 1) < 0.05
  drawn = params_of(jax.random.key(11), images, config).factors
  np.testing.assert_allclose(factors, drawn[:, 0], rtol=1e-6)
  np.testing.assert_array_equal(drawn[:, 1:], 1.0)


@pytest.mark.parametrize("channels", [1, 3])
def test_jitter_matches_the_imageenhance_formulas_for_the_drawn_factors(channels):
  images = skewed_uint8((16, 20, 20, channels), seed=12)
  config = dict(WHOLE, brightness=0.4, contrast=0.4, saturation=0.4)
  key = jax.random.key(13)
  out = np.asarray(transforms.train_transform(key, images, 20, **config))
  factors = np.asarray(params_of(key, images, config).factors)
  assert np.all((factors >= 0.6) & (factors <= 1.4))
  for image, o, f in zip(images.astype(np.float32) / 255, out, factors):
    np.testing.assert_allclose(o, numpy_jitter(image, f), atol=2e-6)


@pytest.mark.parametrize("mode,channels", [("RGB", 3), ("L", 1)])
def test_color_jitter_against_pil_imageenhance(mode, channels):
  """PIL works in uint8 and truncates after every blend (and rounds the contrast mean): ≈ 0.5 level low per step."""
  image = skewed_uint8((24, 24, channels), seed=14)
  pil = Image.fromarray(image[..., 0] if channels == 1 else image, mode)
  for factors in ([0.6, 1.4, 0.7], [1.4, 0.6, 1.3], [1.2, 1.3, 1.4], [0.8, 0.9, 0.6]):
    ref = pil
    for enhancer, f in zip((ImageEnhance.Brightness, ImageEnhance.Contrast, ImageEnhance.Color), factors):
      ref = enhancer(ref).enhance(f)
    ref = np.asarray(ref, np.float32).reshape(image.shape)
    out = transforms.color_jitter(jnp.asarray(image, jnp.float32) / 255, jnp.asarray(factors, jnp.float32))
    error = np.abs(np.asarray(out) * 255 - ref)
    assert error.max() <= 4.0 and error.mean() < 1.5


def test_flip_about_half_and_exact():
  n = 400
  image = random_uint8((1, 12, 12, 3), seed=15)
  images = np.repeat(image, n, 0)
  config = dict(WHOLE, flip_prob=0.5)
  out = np.asarray(transforms.train_transform(jax.random.key(16), images, 12, **config))
  flip = np.asarray(params_of(jax.random.key(16), images, config).flip)
  assert 150 < flip.sum() < 250  # Binomial(400, 0.5): ±5 standard deviations
  base = image[0].astype(np.float32) * np.float32(1 / 255)  # to_float's exact arithmetic
  for o, f in zip(out, flip):
    np.testing.assert_array_equal(o, base[:, ::-1] if f else base)


# ---- compiled use ----------------------------------------------------------------------------
@pytest.mark.parametrize("channels", [1, 3])
def test_under_jit_and_inside_scan(channels):
  images = jnp.asarray(random_uint8((5, 32, 32, channels), seed=17))
  aug = Augmentation.paper(28, channels)

  def body(carry, key):
    out = aug.train(key, images)
    return carry + out.sum(), out

  keys = jax.random.split(jax.random.key(18), 3)
  total, outs = jax.jit(lambda ks: jax.lax.scan(body, jnp.float32(0), ks))(keys)
  assert outs.shape == (3, 5, 28, 28, channels)
  for key, out in zip(keys, outs):
    np.testing.assert_allclose(out, aug.train(key, images), atol=1e-4)  # compiled alone vs in a scan: fusion
  assert not np.allclose(outs[0], outs[1])
  np.testing.assert_allclose(jax.jit(aug.eval)(images), aug.eval(images), atol=1e-6)


def test_augmentation_config_and_no_augmentation():
  images = random_uint8((3, 10, 10, 1))
  none = NO_AUGMENTATION
  assert not none.enabled
  for out in (none.train(jax.random.key(0), images), none.eval(images)):
    np.testing.assert_array_equal(out, images.astype(np.float32) * np.float32(1 / 255))
  gray = Augmentation.paper(8, channels=1)
  assert gray.mean is None and gray.std is None and gray.enabled
  assert float(gray.train(jax.random.key(0), images).min()) >= 0
  assert Augmentation.paper(84) == Augmentation(size=84)
  listed = Augmentation(size=84, scale=[0.08, 1], mean=[0.485, 0.456, 0.406])
  hash(listed)  # frozen, sequences made tuples: usable as a static argument
  assert listed == Augmentation(size=84)
  fixed = Augmentation(size=8, mean=None, std=None, random=False)  # augmentation off, input size kept
  np.testing.assert_array_equal(fixed.train(jax.random.key(0), images), fixed.eval(images))
  assert fixed.train(jax.random.key(0), images).shape == (3, 8, 8, 1)
  with pytest.raises(ValueError, match="mean=None"):
    Augmentation(size=8).eval(images)  # ImageNet statistics on one channel
  with pytest.raises(ValueError, match="ratio"):
    random_params.crop_box(jax.random.key(0), 10, 10, ratio=(4 / 3, 3 / 4))
  with pytest.raises(ValueError, match="at least"):
    transforms.eval_transform(images, 12, resize=11)
