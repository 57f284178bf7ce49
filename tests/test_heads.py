"""The four heads (proto|nn x softmax|dr) against float64 numpy, and the DR properties of the paper."""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot import heads

COMBOS = list(itertools.product(heads.CLASSIFIERS, heads.HEADS))
WAY = 5
DR_EPS = 1e-10


# ----------------------------------------------------------------------------- float64 reference


def np_prototypes(support, labels, way):
  support = np.asarray(support, np.float64)
  return np.stack([support[labels == c].mean(axis=0) for c in range(way)])


def np_class_sq_dist(support, labels, query, way, classifier):
  support, query = np.asarray(support, np.float64), np.asarray(query, np.float64)
  protos = np_prototypes(support, labels, way)
  out = np.empty((len(query), way))
  for i, q in enumerate(query):
    for c in range(way):
      if classifier == "proto":
        out[i, c] = np.sum((q - protos[c]) ** 2)
      else:
        out[i, c] = min(np.sum((q - s) ** 2) for s in support[labels == c])
  return out


def np_logits(sq_dist, head, rho):
  if head == "softmax":
    return -sq_dist
  return -np.exp(rho) * np.log(np.sqrt(sq_dist + DR_EPS))


def np_log_softmax(logits):
  shifted = logits - logits.max(axis=1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def np_loss(support, labels, query, query_labels, way, classifier, head, rho):
  logp = np_log_softmax(np_logits(np_class_sq_dist(support, labels, query, way, classifier), head, rho))
  return -logp[np.arange(len(query)), query_labels].mean()


def random_episode(seed=0, way=WAY, dim=16, counts=(1, 2, 3, 4, 5), n_query=12, scale=1.0, noise=0.7):
  """Unbalanced support (class c has counts[c] points) in shuffled order, random queries."""
  rng = np.random.default_rng(seed)
  labels = rng.permutation(np.repeat(np.arange(way), counts)).astype(np.int32)
  centres = rng.normal(size=(way, dim))
  support = (scale * (centres[labels] + noise * rng.normal(size=(len(labels), dim)))).astype(np.float32)
  query_labels = rng.integers(0, way, n_query).astype(np.int32)
  query = (scale * (centres[query_labels] + noise * rng.normal(size=(n_query, dim)))).astype(np.float32)
  return support, labels, query, query_labels


# Jitted once per (shape, classifier, head): op-by-op dispatch of the gradients is far slower.
@functools.partial(jax.jit, static_argnames=("way", "classifier", "head"))
def jit_logits(support, labels, query, rho, *, way, classifier, head):
  return heads.episode_logits(support, labels, query, way, classifier=classifier, head=head, rho=rho)


def episode_loss(support, labels, query, query_labels, rho, *, way, classifier, head):
  logits = heads.episode_logits(support, labels, query, way, classifier=classifier, head=head, rho=rho)
  return heads.loss_and_accuracy(logits, query_labels)[0]


jit_loss = jax.jit(episode_loss, static_argnames=("way", "classifier", "head"))
# Gradient w.r.t. support, query and rho.
loss_grads = jax.jit(jax.grad(episode_loss, argnums=(0, 2, 4)), static_argnames=("way", "classifier", "head"))


def jax_probs(support, labels, query, classifier, head, rho=heads.RHO_INIT, way=WAY):
  logits = jit_logits(support, labels, query, jnp.float32(rho), way=way, classifier=classifier, head=head)
  return np.asarray(jax.nn.softmax(logits, axis=-1), np.float64)


# ----------------------------------------------------------------------------- against numpy


def test_prototypes_are_class_means_for_unbalanced_shuffled_support():
  support, labels, _, _ = random_episode(seed=1)
  got = np.asarray(heads.prototypes(support, labels, WAY))
  np.testing.assert_allclose(got, np_prototypes(support, labels, WAY), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("classifier", heads.CLASSIFIERS)
def test_class_squared_distances_match_numpy(classifier):
  support, labels, query, _ = random_episode(seed=2)
  got = np.asarray(heads.class_squared_distances(support, labels, query, WAY, classifier))
  ref = np_class_sq_dist(support, labels, query, WAY, classifier)
  assert got.shape == (len(query), WAY)
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_nn_and_proto_agree_in_one_shot_and_differ_otherwise():
  support, labels, query, _ = random_episode(seed=3, counts=(1,) * WAY)
  nn = heads.class_squared_distances(support, labels, query, WAY, "nn")
  proto = heads.class_squared_distances(support, labels, query, WAY, "proto")
  np.testing.assert_allclose(np.asarray(nn), np.asarray(proto), rtol=1e-5, atol=1e-5)
  support, labels, query, _ = random_episode(seed=3)
  nn = np.asarray(heads.class_squared_distances(support, labels, query, WAY, "nn"))
  proto = np.asarray(heads.class_squared_distances(support, labels, query, WAY, "proto"))
  assert np.abs(nn - proto).max() > 0.1


@pytest.mark.parametrize("rho", [None, -0.7, 1.3])
@pytest.mark.parametrize("classifier,head", COMBOS)
def test_episode_logits_match_numpy(classifier, head, rho):
  support, labels, query, _ = random_episode(seed=4)
  kwargs = {} if rho is None else {"rho": jnp.float32(rho)}
  got = np.asarray(heads.episode_logits(support, labels, query, WAY, classifier=classifier, head=head, **kwargs))
  # rho=None checks the default: rho_0 = 2, theta_0 = e^2.
  ref = np_logits(np_class_sq_dist(support, labels, query, WAY, classifier), head, 2.0 if rho is None else rho)
  assert got.shape == (len(query), WAY)
  np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("classifier,head", COMBOS)
def test_loss_and_accuracy_match_numpy_cross_entropy(classifier, head):
  support, labels, query, query_labels = random_episode(seed=5, n_query=40, scale=0.5, noise=1.5)
  logits = jit_logits(support, labels, query, jnp.float32(1.0), way=WAY, classifier=classifier, head=head)
  loss, accuracy = jax.jit(heads.loss_and_accuracy)(logits, query_labels)
  ref_logits = np_logits(np_class_sq_dist(support, labels, query, WAY, classifier), head, 1.0)
  ref_loss = -np_log_softmax(ref_logits)[np.arange(len(query)), query_labels].mean()
  ref_accuracy = np.mean(ref_logits.argmax(axis=1) == query_labels)
  assert 0.0 < ref_accuracy < 1.0  # both a right and a wrong prediction are exercised
  np.testing.assert_allclose(float(loss), ref_loss, rtol=1e-4)
  assert float(accuracy) == pytest.approx(ref_accuracy, abs=1e-6)


@pytest.mark.parametrize("classifier,head", COMBOS)
def test_loss_gradient_wrt_embeddings_matches_finite_differences(classifier, head):
  support, labels, query, query_labels = random_episode(seed=6, way=3, dim=4, counts=(1, 2, 3), n_query=4)

  grads = loss_grads(support, labels, query, query_labels, jnp.float32(0.5), way=3, classifier=classifier, head=head)
  s64, q64, h = support.astype(np.float64), query.astype(np.float64), 1e-6
  for which, (x64, grad) in enumerate([(s64, grads[0]), (q64, grads[1])]):
    fd = np.zeros_like(x64)
    for idx in np.ndindex(*x64.shape):
      plus, minus = x64.copy(), x64.copy()
      plus[idx] += h
      minus[idx] -= h
      args_p = (plus, q64) if which == 0 else (s64, plus)
      args_m = (minus, q64) if which == 0 else (s64, minus)
      fd[idx] = (np_loss(args_p[0], labels, args_p[1], query_labels, 3, classifier, head, 0.5)
                 - np_loss(args_m[0], labels, args_m[1], query_labels, 3, classifier, head, 0.5)) / (2 * h)
    np.testing.assert_allclose(np.asarray(grad), fd, rtol=2e-3, atol=2e-4)


# ----------------------------------------------------------------------------- DR properties (Kim et al.)


@pytest.mark.parametrize("classifier", heads.CLASSIFIERS)
@pytest.mark.parametrize("c", [1e-3, 0.5, 7.0, 1e3])
def test_dr_probabilities_are_scale_invariant_softmax_ones_are_not(classifier, c):
  # DR: exact invariance needs eps = 0; eps = 1e-10 shifts the logits by about
  # theta/2 * eps/d^2, so keep the smallest scaled d^2 (here ~5e-5) far above eps.
  support, labels, query, _ = random_episode(seed=7, scale=3.0)
  dr = jax_probs(support, labels, query, classifier, "dr")
  dr_scaled = jax_probs(c * support, labels, c * query, classifier, "dr")
  np.testing.assert_allclose(dr_scaled, dr, rtol=1e-4, atol=1e-6)
  assert 0.05 < dr.max(axis=1).min() and dr.max(axis=1).max() < 0.999  # not a degenerate case
  # Softmax: scale 0.3 keeps the probabilities away from one-hot, so scaling can move them.
  support, labels, query, _ = random_episode(seed=7, scale=0.3)
  sm = jax_probs(support, labels, query, classifier, "softmax")
  sm_scaled = jax_probs(c * support, labels, c * query, classifier, "softmax")
  assert sm.max(axis=1).max() < 0.999
  assert np.abs(sm_scaled - sm).max() > 0.05


@pytest.mark.parametrize("classifier", heads.CLASSIFIERS)
def test_dr_probability_tends_to_one_at_the_class_representative(classifier):
  support, labels, _, _ = random_episode(seed=8, scale=0.3)
  if classifier == "proto":
    reps = np.asarray(heads.prototypes(support, labels, WAY))
  else:  # the first support point of each class
    reps = np.stack([support[labels == c][0] for c in range(WAY)])
  v = np.random.default_rng(9).normal(size=reps.shape[1])
  v /= np.linalg.norm(v)
  ts = np.logspace(0.5, -5, 12)
  for c in (0, 3):
    other = (c + 1) % WAY
    queries = (reps[c][None, :] + ts[:, None] * v[None, :]).astype(np.float32)
    probs = jax_probs(support, labels, queries, classifier, "dr")
    p_c = probs[:, c]
    assert np.all(np.diff(p_c) >= -1e-6), p_c  # non-decreasing as t shrinks
    assert p_c[0] < 0.9 and p_c[-1] > 0.999
    # Approaching another class's representative sends p(c) to 0.
    towards_other = (reps[other][None, :] + ts[:, None] * v[None, :]).astype(np.float32)
    p_c_other = jax_probs(support, labels, towards_other, classifier, "dr")[:, c]
    assert np.all(np.diff(p_c_other) <= 1e-6) and p_c_other[-1] < 1e-3
  # The softmax head stays unsure exactly at the representative when classes are close.
  at_rep = jax_probs(support, labels, reps, classifier, "softmax")
  assert np.diag(at_rep).max() < 0.99


def np_loss_and_grads(support, labels, query, query_labels, way, classifier, head, rho):
  """Loss and its analytic gradients w.r.t. support, query and rho, in float64.

  With ``D_ic = |q_i - r_ic|^2`` (``r_ic`` the prototype, or the nearest support point of
  class c) and ``G = (softmax - onehot) / n_query``: ``dL/dq_i = sum_c G_ic dlogit/dD 2 (q_i - r_ic)``,
  the representative gets the opposite, split over its class (prototype) or given to the
  nearest point (1-NN); ``dL/drho = sum G * logits`` for DR (its logits are linear in theta).
  """
  support, query = np.asarray(support, np.float64), np.asarray(query, np.float64)
  n, theta = len(query), np.exp(rho)
  members = [np.flatnonzero(labels == c) for c in range(way)]
  reps = np.empty((n, way, support.shape[1]))
  nearest = np.empty((n, way), np.int64)
  for i in range(n):
    for c in range(way):
      if classifier == "proto":
        reps[i, c] = support[members[c]].mean(axis=0)
      else:
        nearest[i, c] = members[c][np.argmin([np.sum((query[i] - support[j]) ** 2) for j in members[c]])]
        reps[i, c] = support[nearest[i, c]]
  diff = query[:, None, :] - reps  # [n, way, d]
  sq = np.sum(diff ** 2, axis=-1)
  logits = np_logits(sq, head, rho)
  logp = np_log_softmax(logits)
  g = (np.exp(logp) - np.eye(way)[query_labels]) / n
  dlogit_dsq = -np.ones_like(sq) if head == "softmax" else -theta / (2.0 * (sq + DR_EPS))
  coef = (g * dlogit_dsq)[..., None] * 2.0 * diff  # dL/dq_i contribution of class c
  grad_query = coef.sum(axis=1)
  grad_support = np.zeros_like(support)
  for i in range(n):
    for c in range(way):
      if classifier == "proto":
        grad_support[members[c]] -= coef[i, c] / len(members[c])
      else:
        grad_support[nearest[i, c]] -= coef[i, c]
  grad_rho = 0.0 if head == "softmax" else float(np.sum(g * logits))
  loss = -logp[np.arange(n), query_labels].mean()
  return loss, (grad_support, grad_query, grad_rho), np.exp(logp)


def on_grid_episode(classifier):
  """An episode on the grid of multiples of 1/4: every prototype is exact in float32, so a
  query placed on a class representative has d^2 = 0 exactly. Query 0 sits on class 2's
  representative and is labelled 2; query 1 sits on it too but is labelled 0 (it lies on
  another class's representative).
  """
  rng = np.random.default_rng(13)
  labels = np.repeat(np.arange(WAY), 2).astype(np.int32)  # 2-shot: the prototype differs from every point
  support = (rng.integers(-8, 9, size=(len(labels), 6)) / 4).astype(np.float32)
  rep = support[labels == 2].mean(axis=0) if classifier == "proto" else support[np.flatnonzero(labels == 2)[1]]
  query = (rng.integers(-8, 9, size=(6, 6)) / 4).astype(np.float32)
  query[:2] = rep
  query_labels = np.array([2, 0, 1, 3, 4, 0], np.int32)
  return support, labels, query, query_labels


@pytest.mark.parametrize("classifier,head", COMBOS)
def test_loss_and_gradients_are_exact_with_a_query_on_a_class_representative(classifier, head):
  # The matmul expansion |q|^2 + |p|^2 - 2 q.p left float32 rounding in the d^2 = 0 term,
  # which the DR head's d(logit)/d(d^2) ~ -theta / (2 eps) = -3.7e10 turned into gradients
  # off by up to 128 (issue 15); by difference that term is exactly 0.
  support, labels, query, query_labels = on_grid_episode(classifier)
  rho = 0.7
  kwargs = dict(way=WAY, classifier=classifier, head=head)
  sq = np.asarray(jax.jit(heads.class_squared_distances, static_argnums=(3, 4))(support, labels, query, WAY, classifier))
  assert sq[0, 2] == 0.0 and sq[1, 2] == 0.0
  loss, ref_grads, ref_probs = np_loss_and_grads(support, labels, query, query_labels, WAY, classifier, head, rho)
  assert float(jit_loss(support, labels, query, query_labels, jnp.float32(rho), **kwargs)) == pytest.approx(loss, rel=1e-5)
  grads = loss_grads(support, labels, query, query_labels, jnp.float32(rho), **kwargs)
  for name, got, ref in zip(("support", "query", "rho"), grads, ref_grads):
    scale = max(np.abs(ref).max(), 1e-3)
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-4, atol=1e-5 * scale, err_msg=f"gradient w.r.t. {name}")
  if head == "dr":  # d^2 = 0: probability 1 for the class it sits on, whatever its label
    probs = np.asarray(jax.nn.softmax(jit_logits(support, labels, query, jnp.float32(rho), **kwargs), axis=-1))
    np.testing.assert_allclose(probs[:2, 2], 1.0, atol=1e-6)
    np.testing.assert_allclose(probs, ref_probs, atol=1e-6)


@pytest.mark.parametrize("classifier", heads.CLASSIFIERS)
@pytest.mark.parametrize("rho", [-0.5, 2.0])
def test_dr_loss_gradient_wrt_rho_matches_finite_differences(classifier, rho):
  support, labels, query, query_labels = random_episode(seed=11, scale=0.5)
  grad = float(loss_grads(support, labels, query, query_labels, jnp.float32(rho), way=WAY, classifier=classifier, head="dr")[2])
  h = 1e-5
  fd = (np_loss(support, labels, query, query_labels, WAY, classifier, "dr", rho + h)
        - np_loss(support, labels, query, query_labels, WAY, classifier, "dr", rho - h)) / (2 * h)
  assert abs(fd) > 1e-2  # a gradient worth comparing
  assert grad == pytest.approx(fd, rel=1e-3, abs=1e-5)


# ----------------------------------------------------------------------------- names


def test_model_names_cover_the_four_combinations():
  assert set(heads.MODEL_NAMES) == set(COMBOS)
  assert len(set(heads.MODEL_NAMES.values())) == 4


@pytest.mark.parametrize("call,choices", [
    (lambda s, l, q: heads.class_squared_distances(s, l, q, WAY, "knn"), heads.CLASSIFIERS),
    (lambda s, l, q: heads.episode_logits(s, l, q, WAY, classifier="protonet"), heads.CLASSIFIERS),
    (lambda s, l, q: heads.episode_logits(s, l, q, WAY, head="ratio"), heads.HEADS),
    (lambda s, l, q: heads.logits_from_distances(jnp.ones((2, WAY)), "Softmax"), heads.HEADS),
])
def test_unknown_names_raise_with_the_valid_choices(call, choices):
  support, labels, query, _ = random_episode(seed=12)
  with pytest.raises(ValueError) as info:
    call(support, labels, query)
  for choice in choices:
    assert repr(choice)[1:-1] in str(info.value)
  assert "choose" in str(info.value).lower()
