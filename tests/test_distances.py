"""Pairwise distances against float64 numpy loops, clamping at coincident points, shape checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot import distances

SHAPES = [(1, 1, 1), (5, 7, 3), (9, 4, 16)]  # (n, m, d)


def random_pair(n, m, d, seed=0, scale=1.0):
  rng = np.random.default_rng(seed)
  x = (scale * rng.normal(size=(n, d))).astype(np.float32)
  y = (scale * rng.normal(size=(m, d))).astype(np.float32)
  return x, y


def loop(x, y, f):
  """``[n, m]`` matrix of ``f(x_i, y_j)`` evaluated in float64, one pair at a time."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  out = np.empty((len(x), len(y)))
  for i in range(len(x)):
    for j in range(len(y)):
      out[i, j] = f(x[i], y[j])
  return out


def sq_euclid(a, b):
  return float(np.sum((a - b) ** 2))


def cosine(a, b):
  return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


SQUARED_FORMS = [distances.squared_euclidean, distances.squared_euclidean_matmul]
FORMS = [distances.euclidean, distances.euclidean_matmul]


@pytest.mark.parametrize("f", SQUARED_FORMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("n,m,d", SHAPES)
def test_squared_euclidean_matches_loops(n, m, d, f):
  x, y = random_pair(n, m, d)
  got = np.asarray(f(x, y))
  assert got.shape == (n, m)
  np.testing.assert_allclose(got, loop(x, y, sq_euclid), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("f", FORMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("n,m,d", SHAPES)
def test_euclidean_matches_loops(n, m, d, f):
  x, y = random_pair(n, m, d, seed=1)
  got = np.asarray(f(x, y))
  assert got.shape == (n, m)
  np.testing.assert_allclose(got, loop(x, y, lambda a, b: np.sqrt(sq_euclid(a, b))), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n,m,d", SHAPES)
def test_cosine_similarity_matches_loops(n, m, d):
  x, y = random_pair(n, m, d, seed=2, scale=3.0)
  got = np.asarray(distances.cosine_similarity(x, y))
  assert got.shape == (n, m)
  np.testing.assert_allclose(got, loop(x, y, cosine), atol=1e-6)


@pytest.mark.parametrize("n,m,d", SHAPES[1:])  # d = 1 puts every angle at 0 or pi, where arccos is ill-conditioned
def test_angular_matches_loops(n, m, d):
  x, y = random_pair(n, m, d, seed=3, scale=0.1)
  got = np.asarray(distances.angular(x, y))
  assert got.shape == (n, m)
  np.testing.assert_allclose(got, loop(x, y, lambda a, b: np.arccos(cosine(a, b))), atol=1e-5)


def test_cosine_and_angular_are_scale_invariant_and_symmetric():
  x, y = random_pair(6, 4, 5, seed=4)
  base = np.asarray(distances.cosine_similarity(x, y))
  np.testing.assert_allclose(np.asarray(distances.cosine_similarity(250.0 * x, 0.01 * y)), base, atol=1e-6)
  np.testing.assert_allclose(np.asarray(distances.cosine_similarity(y, x)), base.T, atol=1e-7)
  np.testing.assert_allclose(np.asarray(distances.angular(-x, y)), np.pi - np.asarray(distances.angular(x, y)), atol=1e-5)


def test_angular_of_identical_and_opposite_points():
  x, _ = random_pair(8, 1, 6, seed=5)
  ang = np.asarray(distances.angular(x, np.concatenate([x, -x])))
  np.testing.assert_allclose(np.diag(ang[:, :8]), 0.0, atol=1e-3)  # arccos(1 - 1e-7) = 4.5e-4
  np.testing.assert_allclose(np.diag(ang[:, 8:]), np.pi, atol=1e-3)
  grad = jax.jit(jax.grad(lambda x: distances.angular(x, x).sum()))(jnp.asarray(x))
  assert np.all(np.isfinite(grad))


def test_squared_euclidean_by_difference_is_exactly_zero_with_zero_gradient_at_coincident_points():
  # Large coordinates, where the expansion leaves rounding (next test); the difference form leaves none.
  x = jnp.asarray(100.0 * np.random.default_rng(1).normal(size=(16, 32)), jnp.float32)
  assert np.all(np.diag(np.asarray(distances.squared_euclidean(x, x))) == 0.0)
  y = jnp.asarray(np.random.default_rng(2).normal(size=(3, 32)), jnp.float32)
  w = jnp.asarray(np.random.default_rng(3).normal(size=(16, 3)), jnp.float32)
  # d/dx_i of sum_j w_ij |x_i - y_j| with y_0 = x_0: the j = 0 term contributes exactly nothing.
  y = y.at[0].set(x[0])
  grad = np.asarray(jax.jit(jax.grad(lambda x: jnp.sum(w * distances.euclidean(x, y))))(x))
  x64, y64, w64 = (np.asarray(a, np.float64) for a in (x, y, w))
  ref = sum(w64[0, j] * (x64[0] - y64[j]) / np.linalg.norm(x64[0] - y64[j]) for j in (1, 2))
  np.testing.assert_allclose(grad[0], ref, rtol=1e-5, atol=1e-6)


def test_squared_euclidean_matmul_is_clamped_at_zero_for_identical_points():
  # Large coordinates make the expansion |x|^2 + |y|^2 - 2 x.y round below zero on the
  # diagonal; check that this input really does so, then that the result is clamped.
  x = jnp.asarray(100.0 * np.random.default_rng(1).normal(size=(64, 32)), jnp.float32)
  sq_norms = jnp.sum(x * x, axis=-1)
  raw = sq_norms[:, None] + sq_norms[None, :] - 2.0 * (x @ x.T)
  assert float(jnp.diag(raw).min()) < 0.0, "precondition: the unclamped expansion goes negative"
  got = np.asarray(distances.squared_euclidean_matmul(x, x))
  assert got.min() >= 0.0
  # What rounding leaves on the diagonal is small against the squared norms.
  assert np.all(np.diag(got) <= 1e-5 * np.asarray(sq_norms))
  assert np.all(np.isfinite(np.asarray(distances.euclidean_matmul(x, x))))


def test_euclidean_gradient_is_finite_at_coincident_points():
  x, _ = random_pair(6, 1, 8, seed=6)
  value = np.asarray(distances.euclidean(x, x))
  # sqrt(0 + 1e-10) = 1e-5; rounding may leave a little more, never less nor a NaN.
  assert np.all(np.diag(value) >= 1e-5 * (1 - 1e-6)) and np.all(np.diag(value) < 1e-2)
  grad_fn = jax.jit(jax.grad(lambda x: distances.euclidean(x, x).sum()))
  assert np.all(np.isfinite(np.asarray(grad_fn(jnp.asarray(x)))))
  # Two exactly coincident rows (a duplicated embedding) keep the gradient finite too.
  assert np.all(np.isfinite(np.asarray(grad_fn(jnp.asarray(np.concatenate([x, x[:2]]))))))


def test_euclidean_gradient_matches_closed_form_at_distinct_points():
  x, y = random_pair(4, 5, 3, seed=7)
  w = np.random.default_rng(8).normal(size=(4, 5))  # a random cotangent
  grad_fn = jax.jit(jax.grad(lambda x: jnp.sum(jnp.asarray(w, jnp.float32) * distances.euclidean(x, y))))
  grad = np.asarray(grad_fn(jnp.asarray(x)))
  x64, y64 = x.astype(np.float64), y.astype(np.float64)
  ref = np.zeros_like(x64)
  for i in range(4):
    for j in range(5):
      diff = x64[i] - y64[j]
      ref[i] += w[i, j] * diff / np.sqrt(diff @ diff)
  np.testing.assert_allclose(grad, ref, rtol=1e-4, atol=1e-4)


def test_cosine_similarity_of_a_zero_vector_is_zero_with_finite_gradient():
  # The eps clamp in the normalisation exists for zero vectors (e.g. an all-zero ReLU
  # embedding); their gradient must be finite too, or one such embedding NaNs every parameter.
  x = jnp.asarray([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]])
  y = jnp.asarray([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
  np.testing.assert_allclose(np.asarray(distances.cosine_similarity(x, y))[0], 0.0, atol=1e-7)
  for f in (distances.cosine_similarity, distances.angular):
    grad = np.asarray(jax.jit(jax.grad(lambda x: f(x, y).sum()))(x))
    assert np.all(np.isfinite(grad)), f"{f.__name__}: gradient at a zero vector is {grad[0]}"


FUNCTIONS = [*SQUARED_FORMS, *FORMS, distances.cosine_similarity, distances.angular]


@pytest.mark.parametrize("f", FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("shape_x,shape_y", [
    ((4, 3), (5, 2)),  # feature dimensions differ
    ((3,), (5, 3)),  # rank 1
    ((4, 3), (5, 3, 1)),  # rank 3
])
def test_shape_errors(f, shape_x, shape_y):
  with pytest.raises((AssertionError, ValueError), match="rank|shape"):
    f(jnp.ones(shape_x), jnp.ones(shape_y))
