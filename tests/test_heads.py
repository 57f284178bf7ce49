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
      if classifier == 'proto':
        out[i, c] = np.sum((q - protos[c]) ** 2)
      else:
        out[i, c] = min(np.sum((q - s) ** 2) for s in support[labels == c])
  return out


def np_logits(sq_dist, head, rho):
  if head == 'softmax':
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
@functools.partial(jax.jit, static_argnames=('way', 'classifier', 'head'))
def jit_logits(support, labels, query, rho, *, way, classifier, head):
  return heads.episode_logits(support, labels, query, way, classifier=classifier, head=head, rho=rho)


def episode_loss(support, labels, query, query_labels, rho, *, way, classifier, head):
  logits = heads.episode_logits(support, labels, query, way, classifier=classifier, head=head, rho=rho)
  return heads.loss_and_accuracy(logits, query_labels)[0]


jit_loss = jax.jit(episode_loss, static_argnames=('way', 'classifier', 'head'))
# Gradient w.r.t. support, query and rho.
loss_grads = jax.jit(jax.grad(episode_loss, argnums=(0, 2, 4)), static_argnames=('way', 'classifier', 'head'))


def jax_probs(support, labels, query, classifier, head, rho=heads.RHO_INIT, way=WAY):
  logits = jit_logits(support, labels, query, jnp.float32(rho), way=way, classifier=classifier, head=head)
  return np.asarray(jax.nn.softmax(logits, axis=-1), np.float64)


# ----------------------------------------------------------------------------- against numpy


def test_prototypes_are_class_means_for_unbalanced_shuffled_support():
  support, labels, _, _ = random_episode(seed=1)
  got = np.asarray(heads.prototypes(support, labels, WAY))
  np.testing.assert_allclose(got, np_prototypes(support, labels, WAY), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('classifier', heads.CLASSIFIERS)
def test_class_squared_distances_match_numpy(classifier):
  support, labels, query, _ = random_episode(seed=2)
  got = np.asarray(heads.class_squared_distances(support, labels, query, WAY, classifier))
  ref = np_class_sq_dist(support, labels, query, WAY, classifier)
  assert got.shape == (len(query), WAY)
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_nn_and_proto_agree_in_one_shot_and_differ_otherwise():
  support, labels, query, _ = random_episode(seed=3, counts=(1,) * WAY)
  nn = heads.class_squared_distances(support, labels, query, WAY, 'nn')
  proto = heads.class_squared_distances(support, labels, query, WAY, 'proto')
  np.testing.assert_allclose(np.asarray(nn), np.asarray(proto), rtol=1e-5, atol=1e-5)
  support, labels, query, _ = random_episode(seed=3)
  nn = np.asarray(heads.class_squared_distances(support, labels, query, WAY, 'nn'))
  proto = np.asarray(heads.class_squared_distances(support, labels, query, WAY, 'proto'))
  assert np.abs(nn - proto).max() > 0.1


@pytest.mark.parametrize('rho', [None, -0.7, 1.3])
@pytest.mark.parametrize('classifier,head', COMBOS)
def test_episode_logits_match_numpy(classifier, head, rho):
  support, labels, query, _ = random_episode(seed=4)
  kwargs = {} if rho is None else {'rho': jnp.float32(rho)}
  got = np.asarray(heads.episode_logits(support, labels, query, WAY, classifier=classifier, head=head, **kwargs))
  # rho=None checks the default: rho_0 = 2, theta_0 = e^2.
  ref = np_logits(np_class_sq_dist(support, labels, query, WAY, classifier), head, 2.0 if rho is None else rho)
  assert got.shape == (len(query), WAY)
  np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('classifier,head', COMBOS)
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


@pytest.mark.parametrize('classifier,head', COMBOS)
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


@pytest.mark.parametrize('classifier', heads.CLASSIFIERS)
@pytest.mark.parametrize('c', [1e-3, 0.5, 7.0, 1e3])
def test_dr_probabilities_are_scale_invariant_softmax_ones_are_not(classifier, c):
  # DR: exact invariance needs eps = 0; eps = 1e-10 shifts the logits by about
  # theta/2 * eps/d^2, so keep the smallest scaled d^2 (here ~5e-5) far above eps.
  support, labels, query, _ = random_episode(seed=7, scale=3.0)
  dr = jax_probs(support, labels, query, classifier, 'dr')
  dr_scaled = jax_probs(c * support, labels, c * query, classifier, 'dr')
  np.testing.assert_allclose(dr_scaled, dr, rtol=1e-4, atol=1e-6)
  assert 0.05 < dr.max(axis=1).min() and dr.max(axis=1).max() < 0.999  # not a degenerate case
  # Softmax: scale 0.3 keeps the probabilities away from one-hot, so scaling can move them.
  support, labels, query, _ = random_episode(seed=7, scale=0.3)
  sm = jax_probs(support, labels, query, classifier, 'softmax')
  sm_scaled = jax_probs(c * support, labels, c * query, classifier, 'softmax')
  assert sm.max(axis=1).max() < 0.999
  assert np.abs(sm_scaled - sm).max() > 0.05


@pytest.mark.parametrize('classifier', heads.CLASSIFIERS)
def test_dr_probability_tends_to_one_at_the_class_representative(classifier):
  support, labels, _, _ = random_episode(seed=8, scale=0.3)
  if classifier == 'proto':
    reps = np.asarray(heads.prototypes(support, labels, WAY))
  else:  # the first support point of each class
    reps = np.stack([support[labels == c][0] for c in range(WAY)])
  v = np.random.default_rng(9).normal(size=reps.shape[1])
  v /= np.linalg.norm(v)
  ts = np.logspace(0.5, -5, 12)
  for c in (0, 3):
    other = (c + 1) % WAY
    queries = (reps[c][None, :] + ts[:, None] * v[None, :]).astype(np.float32)
    probs = jax_probs(support, labels, queries, classifier, 'dr')
    p_c = probs[:, c]
    assert np.all(np.diff(p_c) >= -1e-6), p_c  # non-decreasing as t shrinks
    assert p_c[0] < 0.9 and p_c[-1] > 0.999
    # Approaching another class's representative sends p(c) to 0.
    towards_other = (reps[other][None, :] + ts[:, None] * v[None, :]).astype(np.float32)
    p_c_other = jax_probs(support, labels, towards_other, classifier, 'dr')[:, c]
    assert np.all(np.diff(p_c_other) <= 1e-6) and p_c_other[-1] < 1e-3
  # The softmax head stays unsure exactly at the representative when classes are close.
  at_rep = jax_probs(support, labels, reps, classifier, 'softmax')
  assert np.diag(at_rep).max() < 0.99


@pytest.mark.parametrize('classifier', heads.CLASSIFIERS)
def test_dr_exactly_on_the_representative_is_finite(classifier):
  support, labels, query, query_labels = random_episode(seed=10)
  if classifier == 'proto':  # the first query sits exactly on prototype 2 (bitwise)
    on = heads.prototypes(jnp.asarray(support), jnp.asarray(labels), WAY)[2]
    target = 2
  else:  # ... or exactly on a support point
    on, target = jnp.asarray(support[4]), int(labels[4])
  query = jnp.asarray(query).at[0].set(on)
  query_labels = query_labels.copy()
  query_labels[0] = target
  rho = jnp.float32(heads.RHO_INIT)
  sq = jax.jit(heads.class_squared_distances, static_argnums=(3, 4))(support, labels, query, WAY, classifier)
  assert float(sq[0, target]) < 1e-5  # on it, up to the rounding of the |q|^2 + |p|^2 - 2 q.p expansion
  logits = jit_logits(support, labels, query, rho, way=WAY, classifier=classifier, head='dr')
  assert np.all(np.isfinite(np.asarray(logits)))
  assert int(jnp.argmax(logits[0])) == target
  assert float(jax.nn.softmax(logits[0])[target]) > 0.999
  kwargs = dict(way=WAY, classifier=classifier, head='dr')
  assert np.isfinite(float(jit_loss(support, labels, query, query_labels, rho, **kwargs)))
  grads = loss_grads(support, labels, query, query_labels, rho, **kwargs)
  for name, g in zip(('support', 'query', 'rho'), grads):
    assert np.all(np.isfinite(np.asarray(g))), f'non-finite gradient w.r.t. {name}'


@pytest.mark.parametrize('classifier', heads.CLASSIFIERS)
@pytest.mark.parametrize('rho', [-0.5, 2.0])
def test_dr_loss_gradient_wrt_rho_matches_finite_differences(classifier, rho):
  support, labels, query, query_labels = random_episode(seed=11, scale=0.5)
  grad = float(loss_grads(support, labels, query, query_labels, jnp.float32(rho), way=WAY, classifier=classifier, head='dr')[2])
  h = 1e-5
  fd = (np_loss(support, labels, query, query_labels, WAY, classifier, 'dr', rho + h)
        - np_loss(support, labels, query, query_labels, WAY, classifier, 'dr', rho - h)) / (2 * h)
  assert abs(fd) > 1e-2  # a gradient worth comparing
  assert grad == pytest.approx(fd, rel=1e-3, abs=1e-5)


# ----------------------------------------------------------------------------- names


def test_model_names_cover_the_four_combinations():
  assert set(heads.MODEL_NAMES) == set(COMBOS)
  assert len(set(heads.MODEL_NAMES.values())) == 4


@pytest.mark.parametrize('call,choices', [
    (lambda s, l, q: heads.class_squared_distances(s, l, q, WAY, 'knn'), heads.CLASSIFIERS),
    (lambda s, l, q: heads.episode_logits(s, l, q, WAY, classifier='protonet'), heads.CLASSIFIERS),
    (lambda s, l, q: heads.episode_logits(s, l, q, WAY, head='ratio'), heads.HEADS),
    (lambda s, l, q: heads.logits_from_distances(jnp.ones((2, WAY)), 'Softmax'), heads.HEADS),
])
def test_unknown_names_raise_with_the_valid_choices(call, choices):
  support, labels, query, _ = random_episode(seed=12)
  with pytest.raises(ValueError) as info:
    call(support, labels, query)
  for choice in choices:
    assert repr(choice)[1:-1] in str(info.value)
  assert 'choose' in str(info.value).lower()
