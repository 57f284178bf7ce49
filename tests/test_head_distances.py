"""--distance: every head x classifier x distance against float64 numpy, scale invariance, certainty, the option."""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot import distances, heads
from fewshot.config import Config
from fewshot.episodic import diagnostics
from fewshot.errors import ConfigError

WAY = 4
EPS = 1e-10
COMBOS = list(itertools.product(heads.HEADS, heads.CLASSIFIERS, heads.DISTANCES))


def random_episode(seed=0, dim=6, counts=(1, 2, 3, 2), n_query=7):
  """Unbalanced, shuffled support; queries near their class centres; embeddings of mixed sign and norm."""
  rng = np.random.default_rng(seed)
  labels = rng.permutation(np.repeat(np.arange(WAY), counts)).astype(np.int32)
  centres = rng.normal(size=(WAY, dim))
  support = (centres[labels] + 0.6 * rng.normal(size=(len(labels), dim))).astype(np.float32)
  query_labels = rng.integers(0, WAY, n_query)
  query = (centres[query_labels] + 0.6 * rng.normal(size=(n_query, dim))).astype(np.float32)
  return support, labels, query


# ----------------------------------------------------------------------------- float64 reference, from the docs' table
def np_pair(q, r, distance):
  """(D, delta): what the softmax negates, and the distance the DR formulation raises to -theta."""
  d2 = float(np.sum((q - r) ** 2))
  cos = float(q @ r / (np.linalg.norm(q) * np.linalg.norm(r)))
  angle = float(np.arccos(np.clip(cos, -1.0, 1.0)))
  return {"squared_euclidean": (d2, np.sqrt(d2 + EPS)),
          "euclidean": (np.sqrt(d2 + EPS), np.sqrt(d2 + EPS)),
          "cosine": (1.0 - cos, 1.0 - cos + EPS),
          "angular": (angle ** 2, np.sqrt(angle ** 2 + EPS))}[distance]


def np_logits(support, labels, query, formulation, classifier, distance, rho):
  support, query = np.asarray(support, np.float64), np.asarray(query, np.float64)
  if distance in ("cosine", "angular"):  # the normalised embedding space: prototypes of unit vectors
    support = support / np.linalg.norm(support, axis=1, keepdims=True)
    query = query / np.linalg.norm(query, axis=1, keepdims=True)
  out = np.empty((len(query), WAY))
  for i, q in enumerate(query):
    for c in range(WAY):
      members = support[labels == c]
      candidates = [members.mean(axis=0)] if classifier == "proto" else list(members)
      # The class's D and delta come from the same representative (the nearest one under 1-NN).
      big_d, delta = min(np_pair(q, r, distance) for r in candidates)
      out[i, c] = -big_d if formulation == "softmax" else -np.exp(rho) * np.log(delta)
  return out


@functools.partial(jax.jit, static_argnums=(4,))
def jit_logits(support, labels, query, rho, head):
  return head.logits({"rho": rho}, support, labels, query, WAY)


def probabilities(support, labels, query, head, rho=1.3):
  return np.asarray(jax.nn.softmax(jit_logits(support, labels, query, jnp.float32(rho), head), axis=-1), np.float64)


# ----------------------------------------------------------------------------- against numpy
@pytest.mark.parametrize("formulation,classifier,distance", COMBOS)
def test_every_head_under_every_distance_matches_numpy(formulation, classifier, distance):
  support, labels, query = random_episode(seed=1)
  head = heads.DistanceHead(formulation, classifier, distance)
  got = np.asarray(jit_logits(support, labels, query, jnp.float32(0.7), head))
  ref = np_logits(support, labels, query, formulation, classifier, distance, 0.7)
  assert got.shape == (len(query), WAY)
  np.testing.assert_allclose(got, ref, rtol=2e-4, atol=2e-4)
  # The same logits from the pure function the head wraps.
  pure = heads.episode_logits(support, labels, query, WAY, classifier=classifier, head=formulation, rho=0.7,
                              distance=distance)
  np.testing.assert_allclose(np.asarray(pure), got, rtol=1e-6, atol=1e-6)


def test_the_paper_distance_is_the_heads_default_bit_for_bit():
  support, labels, query = random_episode(seed=2)
  for formulation, classifier in itertools.product(heads.HEADS, heads.CLASSIFIERS):
    default = heads.episode_logits(support, labels, query, WAY, classifier=classifier, head=formulation)
    sq = heads.class_squared_distances(support, labels, query, WAY, classifier)
    assert np.array_equal(np.asarray(default), np.asarray(heads.logits_from_distances(sq, formulation)))


@pytest.mark.parametrize("distance", heads.DISTANCES)
def test_scale_invariance_holds_where_the_docs_say(distance):
  support, labels, query = random_episode(seed=3)
  for formulation in heads.HEADS:
    head = heads.DistanceHead(formulation, "proto", distance)
    base = probabilities(support, labels, query, head)
    scaled = probabilities(3.7 * support, labels, 3.7 * query, head)
    invariant = formulation == "dr" or distance in ("cosine", "angular")
    if invariant:
      np.testing.assert_allclose(scaled, base, atol=2e-5)
    else:
      assert np.abs(scaled - base).max() > 1e-2
  if distance in ("cosine", "angular"):  # each point's own scale is ignored too, under both formulations
    factors = np.random.default_rng(4).uniform(0.2, 5.0, size=(len(support) + len(query), 1)).astype(np.float32)
    for formulation in heads.HEADS:
      head = heads.DistanceHead(formulation, "nn", distance)
      np.testing.assert_allclose(probabilities(factors[:len(support)] * support, labels,
                                               factors[len(support):] * query, head),
                                 probabilities(support, labels, query, head), atol=2e-5)


@pytest.mark.parametrize("distance", heads.DISTANCES)
@pytest.mark.parametrize("classifier", heads.CLASSIFIERS)
def test_dr_is_certain_at_a_representative_with_a_finite_gradient(distance, classifier):
  support, labels, _ = random_episode(seed=5)
  head = heads.DistanceHead("dr", classifier, distance)
  unit = distances.l2_normalize(support) if distance in ("cosine", "angular") else support
  representative = heads.prototypes(unit, labels, WAY)[1] if classifier == "proto" else support[labels == 1][0]
  query = jnp.asarray(representative)[None]
  assert probabilities(support, labels, query, head, rho=2.0)[0, 1] > 1 - 1e-6

  def loss(support, query):
    logits = head.logits({"rho": jnp.float32(2.0)}, support, labels, query, WAY)
    return heads.loss_and_accuracy(logits, jnp.array([1]))[0]

  grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(jnp.asarray(support), query)
  assert all(np.all(np.isfinite(np.asarray(g))) for g in grads)


@pytest.mark.parametrize("distance", heads.DISTANCES)
def test_psi_uses_the_distance_the_dr_formulation_takes(distance):
  before_s, labels, before_q = random_episode(seed=6)
  after_s, _, after_q = random_episode(seed=7)
  head = heads.DistanceHead("dr", "proto", distance)
  got = np.asarray(diagnostics.distance_ratios(before_s, before_q, after_s, after_q, labels,
                                               np.zeros(len(before_q), np.int32), WAY, head))

  def deltas(support, query):  # exp of -logit / theta at theta = 1: the delta of the numpy reference
    return np.exp(-np_logits(support, labels, query, "dr", "proto", distance, 0.0))

  np.testing.assert_allclose(got, deltas(after_s, after_q) / deltas(before_s, before_q), rtol=2e-4)
  if distance == "squared_euclidean":  # the paper's psi, bit for bit
    paper = diagnostics.distance_ratios(before_s, before_q, after_s, after_q, labels,
                                        np.zeros(len(before_q), np.int32), WAY, "proto")
    assert np.array_equal(got, np.asarray(paper))


# ----------------------------------------------------------------------------- distances
def test_cosine_and_angular_by_difference_match_numpy_and_are_exact_at_coincident_points():
  x, _, y = random_episode(seed=8)
  cos = np.asarray(distances.cosine_by_difference(x, y))
  ang = np.asarray(distances.angular_by_difference(x, y))
  x64, y64 = x.astype(np.float64), y.astype(np.float64)
  ref_cos = (x64 / np.linalg.norm(x64, axis=1, keepdims=True)) @ (y64 / np.linalg.norm(y64, axis=1, keepdims=True)).T
  np.testing.assert_allclose(cos, 1.0 - ref_cos, atol=1e-6)
  np.testing.assert_allclose(ang, np.arccos(np.clip(ref_cos, -1, 1)), atol=1e-5)
  assert np.all(np.diag(np.asarray(distances.cosine_by_difference(x, 5.0 * x))) < 1e-12)
  both = np.asarray(distances.angular_by_difference(x, np.concatenate([2.0 * x, -x])))
  np.testing.assert_allclose(np.diag(both[:, : len(x)]), 1e-5, rtol=1e-3)  # sqrt(eps): finite at coincidence
  np.testing.assert_allclose(np.diag(both[:, len(x):]), np.pi, atol=1e-4)
  for f in (distances.cosine_by_difference, distances.angular_by_difference):
    grad = jax.jit(jax.grad(lambda x: f(x, jnp.concatenate([x, -x])).sum()))(jnp.asarray(x))
    assert np.all(np.isfinite(np.asarray(grad))), f.__name__


# ----------------------------------------------------------------------------- the option
def test_distance_option_names_runs_and_loads_old_configs():
  config = Config(distance="cosine", head="dr")
  assert config.model_name == "ProtoNet_DR_cosine" and "ProtoNet_DR_cosine" in config.run_name
  assert Config().model_name == "ProtoNet_S"  # the paper's distance keeps the paper's names
  saved = Config(head="dr").to_dict()
  assert saved["distance"] == "squared_euclidean"
  del saved["distance"]  # a run from before the option
  assert Config.from_dict(saved).distance == "squared_euclidean"
  with pytest.raises(ConfigError, match="unknown --distance 'manhattan'; choose one of squared_euclidean, euclidean"):
    Config(distance="manhattan")


def test_distance_flag_is_generated_from_the_option():
  from absl import flags

  from fewshot import options

  values = flags.FlagValues()
  options.define_flags(Config, values)
  values(["prog", "--distance", "angular", "--classifier", "nn"])
  config = options.from_flags(Config, values)
  assert (config.distance, config.model_name) == ("angular", "1-NN_S_angular")
