"""Random affine distortions of characters: the warp against scipy, the ranges, and the identity."""

import jax
import jax.numpy as jnp
import numpy as np
import scipy.ndimage

from fewshot.augment import affine


def _images(seed=0, b=3):
  rng = np.random.default_rng(seed)
  return rng.uniform(size=(b, 28, 28, 1)).astype(np.float32)


def test_warp_matches_scipy_affine_transform():
  images = _images()
  matrices, shifts = affine.affine_matrices(jax.random.key(1), 3, affine.Distortion())
  got = np.asarray(affine.warp(jnp.asarray(images), matrices, shifts))
  centre = np.array([13.5, 13.5])
  for i in range(3):
    inverse = np.linalg.inv(np.asarray(matrices[i], np.float64))
    # scipy: output p samples input at M p + offset; here M = A^-1, offset = o - A^-1 (o + t). Outside the
    # image the input is 0 and interpolation goes on ("grid-constant", JAX's "constant").
    offset = centre - inverse @ (centre + np.asarray(shifts[i], np.float64))
    want = scipy.ndimage.affine_transform(images[i, ..., 0].astype(np.float64), inverse, offset=offset, order=1,
                                          mode="grid-constant", cval=0.0)
    np.testing.assert_allclose(got[i, ..., 0], want, atol=1e-4)


def test_the_identity_leaves_images_unchanged_and_draws_stay_in_range():
  images = _images(1)
  identity = affine.warp(jnp.asarray(images), jnp.broadcast_to(jnp.eye(2), (3, 2, 2)), jnp.zeros((3, 2)))
  np.testing.assert_allclose(np.asarray(identity), images, atol=1e-6)
  d = affine.Distortion(rotation_degrees=10.0, shear=0.3, scale=(0.8, 1.2), shift_pixels=2.0)
  matrices, shifts = affine.affine_matrices(jax.random.key(2), 4000, d)
  assert np.abs(np.asarray(shifts)).max() <= 2.0 and np.abs(np.asarray(shifts)).max() > 1.9
  # det A = c_x c_y (1 - s_x s_y): within the product of the ranges
  det = np.linalg.det(np.asarray(matrices, np.float64))
  assert det.min() >= 0.8 * 0.8 * (1 - 0.09) - 1e-6 and det.max() <= 1.2 * 1.2 * (1 + 0.09) + 1e-6
  # Different keys, different distortions; the same key, the same.
  a = affine.distort(jax.random.key(3), jnp.asarray(images), d)
  b = affine.distort(jax.random.key(3), jnp.asarray(images), d)
  c = affine.distort(jax.random.key(4), jnp.asarray(images), d)
  np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert np.abs(np.asarray(a) - np.asarray(c)).max() > 0.1
