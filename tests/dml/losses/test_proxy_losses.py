"""Proxy / classification DML losses against float64 numpy loops, finite differences and closed forms."""

from __future__ import annotations

import dataclasses
import inspect
import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot import distances, heads
from fewshot.dml.losses import margin_losses as ml
from fewshot.dml.losses import proxy_losses as pl

B, C, D, K = 10, 4, 6, 3


# ----------------------------------------------------------------------------- numpy references (float64, loops)


def unit(v):
  norm = math.sqrt(float(np.sum(v * v)))
  return v / norm if norm > 0 else v


def logsumexp(values):
  top = max(values)
  return top + math.log(sum(math.exp(v - top) for v in values))


def cosines_of(x_i, w):
  """Cosine of one embedding with each proxy (``w: [C, d]``) or each centre (``w: [C, K, d]``)."""
  if w.ndim == 3:
    return [[float(unit(x_i) @ unit(w[c, k])) for k in range(w.shape[1])] for c in range(w.shape[0])]
  return [float(unit(x_i) @ unit(w[j])) for j in range(len(w))]


def batch_mean(x, y, w, row, *, include_positive=True):
  """Mean over examples of ``-log softmax(row)[y]``; ``row(x_i, y_i)`` gives one example's logits."""
  total = 0.0
  for i in range(len(x)):
    logits = row(x[i], int(y[i]))
    others = [v for j, v in enumerate(logits) if include_positive or j != y[i]]
    total += logsumexp(others) - logits[y[i]]
  return total / max(len(x), 1)


def ref_nsl(x, y, w, scale=10.0):
  return batch_mean(x, y, w, lambda x_i, y_i: [scale * c for c in cosines_of(x_i, w)])


def ref_cosface(x, y, w, scale=64.0, margin=0.35):
  return batch_mean(x, y, w, lambda x_i, y_i: [scale * (c - margin * (j == y_i)) for j, c in enumerate(cosines_of(x_i, w))])


def arcface_target(c, m):
  theta = math.acos(c)
  return math.cos(theta + m) if theta + m < math.pi else c - m * math.sin(m)


def ref_arcface(x, y, w, scale=64.0, margin=0.5):
  return batch_mean(x, y, w, lambda x_i, y_i: [
      scale * (arcface_target(c, margin) if j == y_i else c) for j, c in enumerate(cosines_of(x_i, w))])


def sphereface_target(c, m, blend):
  theta = math.acos(c)
  k = min(math.floor(m * theta / math.pi), m - 1)
  psi = (-1) ** k * math.cos(m * theta) - 2 * k
  return (blend * c + psi) / (1 + blend)


def ref_sphereface(x, y, w, scale=64.0, margin=4, blend=0.0):
  return batch_mean(x, y, w, lambda x_i, y_i: [
      scale * (sphereface_target(c, margin, blend) if j == y_i else c) for j, c in enumerate(cosines_of(x_i, w))])


def ref_proxy_nca(x, y, w, scale=1.0, include_positive=True):
  def row(x_i, y_i):
    return [-scale * float(np.sum((unit(x_i) - unit(w[j])) ** 2)) for j in range(len(w))]
  return batch_mean(x, y, w, row, include_positive=include_positive)


def ref_soft_triple(x, y, w, scale=20.0, gamma=0.1, tau=0.2, margin=0.01, eps=1e-5):
  def row(x_i, y_i):
    logits = []
    for c, centres in enumerate(cosines_of(x_i, w)):
      weights = [math.exp(v / gamma - logsumexp([u / gamma for u in centres])) for v in centres]
      logits.append(scale * (sum(a * v for a, v in zip(weights, centres)) - margin * (c == y_i)))
    return logits
  loss = batch_mean(x, y, w, row)
  n_classes, n_centres = w.shape[:2]
  if len(x) == 0 or n_centres < 2:
    return loss
  spread = 0.0
  for c in range(n_classes):
    for t in range(n_centres):
      for s in range(t + 1, n_centres):
        spread += math.sqrt(float(np.sum((unit(w[c, t]) - unit(w[c, s])) ** 2)) + eps)
  return loss + tau * spread / (n_classes * n_centres * (n_centres - 1))


def ref_dr(x, y, w, rho=heads.RHO_INIT, distance="euclidean", eps=heads.DR_EPS):
  def dist(x_i, w_j):
    if distance == "euclidean":
      return math.sqrt(float(np.sum((unit(x_i) - unit(w_j)) ** 2)))
    if distance == "angular":
      return math.acos(float(unit(x_i) @ unit(w_j)))
    return math.sqrt(float(np.sum((x_i - w_j) ** 2)) + 1e-10)  # distances.euclidean on the raw points
  theta = math.exp(rho)
  return batch_mean(x, y, w, lambda x_i, y_i: [-theta * math.log(math.sqrt(dist(x_i, w_j) ** 2 + eps)) for w_j in w])


# ----------------------------------------------------------------------------- cases


@dataclasses.dataclass
class Case:
  loss: Callable
  ref: Callable
  kwargs: dict = dataclasses.field(default_factory=dict)  # hyperparameters, same names in both
  learnable: dict = dataclasses.field(default_factory=dict)  # scalar parameters to differentiate
  ref_kwargs: dict | None = None  # where the reference names an option differently
  centres: bool = False  # proxies [C, K, d]


CASES = {
    "nsl": Case(pl.normalized_softmax_loss, ref_nsl, learnable={"scale": 3.0}),
    "nsl_default": Case(pl.normalized_softmax_loss, ref_nsl),
    "cosface": Case(ml.cosface_loss, ref_cosface, learnable={"scale": 5.0}),
    "cosface_default": Case(ml.cosface_loss, ref_cosface),
    "arcface": Case(ml.arcface_loss, ref_arcface, {"scale": 8.0}),
    "arcface_wide": Case(ml.arcface_loss, ref_arcface, {"scale": 4.0, "margin": 2.0}),
    "sphereface": Case(ml.sphereface_loss, ref_sphereface, {"scale": 4.0}),
    "sphereface_blend": Case(ml.sphereface_loss, ref_sphereface, {"scale": 4.0, "margin": 3, "blend": 2.0}),
    "proxy_nca": Case(pl.proxy_nca_loss, ref_proxy_nca, {"scale": 3.0}),
    "proxy_nca_exclusive": Case(pl.proxy_nca_loss, ref_proxy_nca, {"include_positive": False}),
    "soft_triple": Case(pl.soft_triple_loss, ref_soft_triple, centres=True),
    "soft_triple_soft": Case(pl.soft_triple_loss, ref_soft_triple, {"gamma": 0.5, "tau": 1.0, "margin": 0.2}, centres=True),
    "dr_euclidean": Case(pl.dr_proxy_loss, ref_dr, learnable={"rho": 0.7}),
    "dr_angular": Case(pl.dr_proxy_loss, ref_dr, {"distance": "angular"}, learnable={"rho": 0.7}),
    "dr_raw": Case(pl.dr_proxy_loss, ref_dr, {"distance": distances.euclidean}, learnable={"rho": 0.7},
                   ref_kwargs={"distance": "raw"}),
}


def make_batch(case, seed, batch=B):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(batch, D))
  y = rng.integers(0, C, size=batch)
  w = rng.normal(size=(C, K, D) if case.centres else (C, D))
  return x, y, w


def jax_loss(case, x, y, w):
  params = {k: jnp.float32(v) for k, v in case.learnable.items()}
  return case.loss(jnp.asarray(x, jnp.float32), jnp.asarray(y), jnp.asarray(w, jnp.float32), **params, **case.kwargs)


def run(name, x, y, w):
  """``(loss, (d/dx, d/dw, {d/dlearnable}))`` in float32, eagerly: every primitive is then compiled once
  per shape and shared by all the cases, far cheaper here than compiling each case's whole program.
  """
  case = CASES[name]

  def loss(x, w, learnable):
    return case.loss(x, jnp.asarray(y), w, **learnable, **case.kwargs)

  learnable = {k: jnp.float32(v) for k, v in case.learnable.items()}
  return jax.value_and_grad(loss, argnums=(0, 1, 2))(jnp.asarray(x, jnp.float32), jnp.asarray(w, jnp.float32), learnable)


def ref_loss(case, x, y, w, **learnable):
  kwargs = {**case.kwargs, **(case.ref_kwargs or {})}
  return case.ref(x, y, w, **{**case.learnable, **learnable}, **kwargs)


# ----------------------------------------------------------------------------- values and gradients


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", list(CASES))
def test_value_matches_numpy_loops(name, seed):
  case = CASES[name]
  x, y, w = make_batch(case, seed)
  x32, w32 = x.astype(np.float32), w.astype(np.float32)
  got = float(run(name, x32, y, w32)[0])
  want = ref_loss(case, x32.astype(np.float64), y, w32.astype(np.float64))
  assert want > 0.05  # a loss near 0 would make the comparison vacuous
  np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)


def finite_differences(f, value, coordinates, step=1e-6):
  grad = np.zeros(len(coordinates))
  for n, index in enumerate(coordinates):
    plus, minus = value.copy(), value.copy()
    plus[index] += step
    minus[index] -= step
    grad[n] = (f(plus) - f(minus)) / (2 * step)
  return grad


@pytest.mark.parametrize("name", list(CASES))
def test_gradients_match_finite_differences(name):
  # float32 gradients (the dtype the value tests already compiled) against central differences
  # of the float64 reference, on 8 random coordinates of each input.
  case = CASES[name]
  x, y, w = make_batch(case, seed=2)
  x, w = x.astype(np.float32).astype(np.float64), w.astype(np.float32).astype(np.float64)
  inputs = {"x": x, "w": w, **{k: np.asarray(v, np.float64) for k, v in case.learnable.items()}}
  _, (dx, dw, dlearnable) = run(name, x, y, w)
  grads = {"x": dx, "w": dw, **dlearnable}
  rng = np.random.default_rng(0)
  for key, value in inputs.items():
    def ref_of(v, key=key):
      a = {**inputs, key: v}
      return ref_loss(case, a["x"], y, a["w"], **{k: float(a[k]) for k in case.learnable})
    every = list(np.ndindex(value.shape))
    coordinates = [every[i] for i in rng.choice(len(every), size=min(8, len(every)), replace=False)]
    want = finite_differences(ref_of, np.array(value, np.float64), coordinates)
    got = np.array([np.asarray(grads[key])[index] for index in coordinates])
    scale = np.abs(want).max()
    assert scale > 1e-3, key  # the coordinates must matter
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-4 * scale, err_msg=key)


# ----------------------------------------------------------------------------- closed forms


def test_nsl_reaches_zero_on_its_proxies():
  proxies = 3.0 * np.eye(C, D, dtype=np.float32)
  labels = np.arange(B) % C
  embeddings = 0.5 * proxies[labels]
  for scale in (2.0, 5.0, 10.0):
    got = float(pl.normalized_softmax_loss(embeddings, labels, proxies, scale=scale))
    np.testing.assert_allclose(got, math.log1p((C - 1) * math.exp(-scale)), rtol=1e-5, atol=1e-6)
  assert float(pl.normalized_softmax_loss(embeddings, labels, proxies, scale=50.0)) < 1e-6


@pytest.mark.parametrize("loss,kwargs,nsl_scale", [
    (ml.cosface_loss, {"scale": 7.0, "margin": 0.0}, 7.0),
    (ml.arcface_loss, {"scale": 7.0, "margin": 0.0}, 7.0),
    (ml.sphereface_loss, {"scale": 7.0, "margin": 1}, 7.0),
    (pl.proxy_nca_loss, {"scale": 3.5}, 7.0),
])
def test_reduces_to_normalized_softmax(loss, kwargs, nsl_scale):
  x, y, w = make_batch(CASES["nsl"], seed=5)
  want = pl.normalized_softmax_loss(x, y, w, scale=nsl_scale)
  np.testing.assert_allclose(loss(x, y, w, **kwargs), want, rtol=1e-5)


def test_soft_triple_with_one_centre_is_normalized_softmax():
  x, y, w = make_batch(CASES["nsl"], seed=6)
  got = pl.soft_triple_loss(x, y, w[:, None, :], scale=9.0, margin=0.0, tau=5.0)
  np.testing.assert_allclose(got, pl.normalized_softmax_loss(x, y, w, scale=9.0), rtol=1e-5)


def test_margins_make_the_loss_larger():
  x, y, w = make_batch(CASES["nsl"], seed=7)
  nsl = float(pl.normalized_softmax_loss(x, y, w, scale=8.0))
  assert float(ml.cosface_loss(x, y, w, scale=8.0, margin=0.3)) > nsl
  assert float(ml.arcface_loss(x, y, w, scale=8.0, margin=0.3)) > nsl
  assert float(ml.sphereface_loss(x, y, w, scale=8.0, margin=2)) > nsl


def test_dr_with_two_classes_is_logistic_in_the_log_distance_ratio():
  rng = np.random.default_rng(8)
  x, y, w = rng.normal(size=(B, D)), rng.integers(0, 2, size=B), rng.normal(size=(2, D))
  theta = math.exp(0.9)
  chord = np.linalg.norm(x[:, None] / np.linalg.norm(x, axis=1)[:, None, None]
                         - (w / np.linalg.norm(w, axis=1)[:, None])[None], axis=-1)
  d_own, d_other = chord[np.arange(B), y], chord[np.arange(B), 1 - y]
  p_own = 1.0 / (1.0 + np.exp(-theta * np.log(d_other / d_own)))  # sigmoid(theta log(d_other / d_own))
  got = pl.dr_proxy_loss(x, y, w, rho=0.9)
  np.testing.assert_allclose(got, np.mean(-np.log(p_own)), rtol=1e-5)


def test_scale_invariances():
  """DR on raw Euclidean distances ignores a common scale of the space; normalised losses ignore |x|."""
  x, y, w = make_batch(CASES["dr_raw"], seed=9)
  loss = lambda a: pl.dr_proxy_loss(a * x, y, a * w, distance=distances.euclidean)  # noqa: E731
  np.testing.assert_allclose(loss(7.0), loss(1.0), rtol=1e-5)
  assert abs(float(pl.proxy_nca_loss(7 * x, y, w, scale=1.0)) - float(pl.proxy_nca_loss(x, y, w))) < 1e-5


def test_margin_targets_decrease_with_the_angle():
  cosines = jnp.linspace(-1.0, 1.0, 2001)
  arc = np.asarray(ml._additive_angular_target(cosines, 0.5))
  assert np.all(np.diff(arc) >= 0)
  np.testing.assert_allclose(arc, [arcface_target(float(c), 0.5) for c in np.clip(cosines, -1, 1)], atol=1e-3)
  for margin, blend in ((2, 0.0), (3, 0.0), (4, 0.0), (4, 5.0)):
    psi = np.asarray(ml._multiplicative_angular_target(cosines, margin, blend))
    assert np.all(np.diff(psi) >= -1e-6)
    assert np.abs(np.diff(psi)).max() < 0.05  # continuous across the branches
    want = [sphereface_target(float(c), margin, blend) for c in np.clip(cosines, -1, 1)]
    np.testing.assert_allclose(psi, want, atol=1e-4)


# ----------------------------------------------------------------------------- edge cases


@pytest.mark.parametrize("name", list(CASES))
def test_empty_batch_is_zero_with_zero_gradient(name):
  case = CASES[name]
  _, _, w = make_batch(case, seed=0)
  x, y = np.zeros((0, D), np.float32), np.zeros((0,), np.int32)
  loss, (dx, dw, dlearnable) = run(name, x, y, w)
  assert float(loss) == 0.0
  assert dx.shape == x.shape and dw.shape == w.shape
  for key, g in {"w": dw, **dlearnable}.items():
    assert np.all(np.asarray(g) == 0.0), key


@pytest.mark.parametrize("name", list(CASES))
def test_gradient_finite_at_zero_embedding_and_on_proxies(name):
  case = CASES[name]
  x, y, w = make_batch(case, seed=3)
  own = w[y, 0] if case.centres else w[y]
  x[0] = 0.0
  x[1] = own[1]  # exactly on its proxy: cosine 1, DR distance 0
  x[2] = -own[2]  # opposite its proxy: cosine -1
  x[3] = 2.5 * own[3]
  loss, grads = run(name, x, y, w)
  assert np.isfinite(float(loss))
  for g in jax.tree.leaves(grads):
    assert np.all(np.isfinite(np.asarray(g))), name
  # (The zero embedding's own gradient is finite but about 1e11: distances' normalisation divides
  # by max(|x|, 1e-12), as torch's F.normalize does.)


@pytest.mark.parametrize("name", ["arcface", "sphereface_blend", "soft_triple"])
def test_jit_matches_eager(name):
  case = CASES[name]
  x, y, w = make_batch(case, seed=4)
  jitted = jax.jit(lambda a, b, c: jax_loss(case, a, b, c))
  np.testing.assert_allclose(jitted(x, y, w), jax_loss(case, x, y, w), rtol=1e-5)


@pytest.mark.parametrize("bad", [-1, C])
def test_out_of_range_label_gives_nan(bad):
  x, y, w = make_batch(CASES["nsl"], seed=0)
  y[4] = bad
  assert np.isnan(float(pl.normalized_softmax_loss(x, y, w)))
  assert np.isnan(float(ml.arcface_loss(x, y, w)))


def test_shape_and_option_errors():
  x, y, w = make_batch(CASES["nsl"], seed=0)
  with pytest.raises(AssertionError):
    pl.normalized_softmax_loss(x, y, w[:, :-1])  # proxies' dim differs
  with pytest.raises(AssertionError):
    ml.cosface_loss(x, y[:-1], w)  # batch sizes differ
  with pytest.raises(AssertionError):
    pl.soft_triple_loss(x, y, w)  # SoftTriple wants [C, K, d]
  with pytest.raises(AssertionError):
    pl.proxy_nca_loss(x, y.astype(np.float32), w)  # float labels
  with pytest.raises(AssertionError):
    pl.dr_proxy_loss(x.astype(np.int32), y, w)  # integer embeddings
  with pytest.raises(ValueError, match="angular"):
    pl.dr_proxy_loss(x, y, w, distance="cosine")
  with pytest.raises(ValueError, match="integer margin"):
    ml.sphereface_loss(x, y, w, margin=1.5)


INITS = [
    (pl.init_normalized_softmax_params, pl.normalized_softmax_loss, {}, {"proxies"}),
    (pl.init_normalized_softmax_params, pl.normalized_softmax_loss, {"scale": 10.0}, {"proxies", "scale"}),
    (pl.init_proxies, ml.cosface_loss, {}, {"proxies"}),
    (pl.init_proxies, ml.arcface_loss, {}, {"proxies"}),
    (pl.init_proxies, ml.sphereface_loss, {}, {"proxies"}),
    (pl.init_proxies, pl.proxy_nca_loss, {}, {"proxies"}),
    (pl.init_soft_triple_params, pl.soft_triple_loss, {"num_centres": K}, {"proxies"}),
    (pl.init_dr_proxy_params, pl.dr_proxy_loss, {}, {"proxies", "rho"}),
]


@pytest.mark.parametrize("init,loss,kwargs,keys", INITS)
def test_init_params_feed_the_loss(init, loss, kwargs, keys):
  params = init(jax.random.key(0), C, D, **kwargs)
  assert set(params) == keys and keys <= set(inspect.signature(loss).parameters)
  assert params["proxies"].shape == ((C, K, D) if "num_centres" in kwargs else (C, D))
  if "rho" in params:
    assert float(params["rho"]) == heads.RHO_INIT
  x = np.random.default_rng(0).normal(size=(B, D)).astype(np.float32)
  y = np.arange(B) % C
  grads = jax.grad(lambda p: loss(x, y, **p))(params)
  assert all(np.all(np.isfinite(np.asarray(g))) and np.any(np.asarray(g) != 0) for g in jax.tree.leaves(grads))


def test_init_proxies_have_unit_norm_on_average():
  proxies = np.asarray(pl.init_soft_triple_params(jax.random.key(1), 64, 128, num_centres=4)["proxies"])
  norms = np.linalg.norm(proxies.reshape(-1, 128), axis=1)
  assert abs(norms.mean() - 1.0) < 0.05
