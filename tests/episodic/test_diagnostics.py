"""Training diagnostics against float64 numpy loops, and the closed forms that follow from their definitions."""

import itertools

import jax
import numpy as np
import pytest

from fewshot.episodic import diagnostics

WAY = 5
SETTINGS = list(itertools.product(("proto", "nn"), diagnostics.CENTRE_MODES))


# ----------------------------------------------------------------------------- float64 reference


def np_centre(points, mode):
  points = np.asarray(points, np.float64)
  n, d = points.shape
  out = np.empty_like(points)
  for i in range(n):
    for k in range(d):
      mean = sum(points[j, k] for j in range(n)) / n if mode == "points" else sum(points[i, l] for l in range(d)) / d
      out[i, k] = points[i, k] - mean
  return out


def np_frobenius_dot(a, b):
  return sum(a[i, k] * b[i, k] for i in range(a.shape[0]) for k in range(a.shape[1]))


def np_class_distances(support, labels, query, way, classifier):
  support, query = np.asarray(support, np.float64), np.asarray(query, np.float64)
  out = np.empty((len(query), way))
  for i, q in enumerate(query):
    for c in range(way):
      members = [s for s, label in zip(support, labels) if label == c]
      if classifier == "proto":
        out[i, c] = np.sqrt(np.sum((q - sum(members) / len(members)) ** 2))
      else:
        out[i, c] = min(np.sqrt(np.sum((q - s) ** 2)) for s in members)
  return out


def np_diagnostics(bs, bq, as_, aq, s_labels, q_labels, way, classifier, centring):
  x = np_centre(np.concatenate([bs, bq]), centring)
  y = np_centre(np.concatenate([as_, aq]), centring)
  alpha = np_frobenius_dot(x, y) / np_frobenius_dot(x, x)
  residual, change = y - alpha * x, y - x
  phi = np.sqrt(np_frobenius_dot(residual, residual)) / np.sqrt(np_frobenius_dot(change, change))
  psi = np_class_distances(as_, s_labels, aq, way, classifier) / np_class_distances(bs, s_labels, bq, way, classifier)
  con = [np.log(psi[i, c]) for i in range(len(q_labels)) for c in range(way) if c == q_labels[i]]
  div = [np.log(psi[i, c]) for i in range(len(q_labels)) for c in range(way) if c != q_labels[i]]
  assert len(con) == len(q_labels) and len(div) == (way - 1) * len(q_labels)
  psi_con, psi_div = np.exp(np.mean(con)), np.exp(np.mean(div))
  return psi, {
      "alpha": alpha, "norm_ratio": phi, "psi_con": psi_con, "psi_div": psi_div,
      "con_alpha": psi_con / alpha, "div_alpha": psi_div / alpha, "con_div": psi_con / psi_div,
  }


# ----------------------------------------------------------------------------- episodes


def random_episode(seed=0, way=WAY, dim=16, counts=(1, 2, 3, 1, 2), n_query=10):
  """Before-update embeddings: unbalanced shuffled support, random queries of every class."""
  rng = np.random.default_rng(seed)
  s_labels = rng.permutation(np.repeat(np.arange(way), counts)).astype(np.int32)
  q_labels = rng.permutation(np.arange(n_query) % way).astype(np.int32)
  centres = 2.0 * rng.normal(size=(way, dim))
  support = (centres[s_labels] + rng.normal(size=(len(s_labels), dim)) + 0.5).astype(np.float32)
  query = (centres[q_labels] + rng.normal(size=(n_query, dim)) + 0.5).astype(np.float32)
  return support, query, s_labels, q_labels


def random_update(support, query, seed=1):
  """After-update embeddings: a rescaling, a shift and a random non-linear-looking change."""
  rng = np.random.default_rng(seed)
  move = lambda p: (1.1 * p + 0.3 * rng.normal(size=p.shape) + rng.normal(size=p.shape[1])).astype(np.float32)
  return move(support), move(query)


def diag(bs, bq, as_, aq, s_labels, q_labels, classifier="proto", centring="points"):
  out = diagnostics.episode_diagnostics(bs, bq, as_, aq, s_labels, q_labels, WAY, classifier, centring)
  return {k: float(v) for k, v in out.items()}


# ----------------------------------------------------------------------------- against numpy


@pytest.mark.parametrize("classifier,centring", SETTINGS)
@pytest.mark.parametrize("seed", [0, 1])
def test_episode_diagnostics_match_numpy(classifier, centring, seed):
  bs, bq, s_labels, q_labels = random_episode(seed)
  as_, aq = random_update(bs, bq, seed + 10)
  psi_ref, ref = np_diagnostics(bs, bq, as_, aq, s_labels, q_labels, WAY, classifier, centring)
  out = diagnostics.episode_diagnostics(bs, bq, as_, aq, s_labels, q_labels, WAY, classifier, centring)
  assert set(out) == set(diagnostics.FIELDS)
  for key in diagnostics.FIELDS:
    assert out[key].shape == () and out[key].dtype == np.float32, key
    np.testing.assert_allclose(float(out[key]), ref[key], rtol=1e-4, err_msg=key)
  psi = diagnostics.distance_ratios(bs, bq, as_, aq, s_labels, q_labels, WAY, classifier)
  assert psi.shape == (len(bq), WAY)
  np.testing.assert_allclose(np.asarray(psi), psi_ref, rtol=1e-4)


def test_centring_both_records_the_papers_fields_and_the_reference_codes_beside_them():
  """--centring both (issue 38, item 3): one run gives the diagnostics under both conventions, each as numpy's."""
  bs, bq, s_labels, q_labels = random_episode(3)
  as_, aq = random_update(bs, bq, 13)
  out = diagnostics.update_diagnostics(bs, bq, as_, aq, s_labels, q_labels, WAY, "proto", "both")
  assert tuple(out) == diagnostics.fields("both") == diagnostics.FIELDS + (
      "alpha_features", "norm_ratio_features", "con_alpha_features", "div_alpha_features")
  _, points = np_diagnostics(bs, bq, as_, aq, s_labels, q_labels, WAY, "proto", "points")
  _, features = np_diagnostics(bs, bq, as_, aq, s_labels, q_labels, WAY, "proto", "features")
  for key in diagnostics.FIELDS:
    np.testing.assert_allclose(float(out[key]), points[key], rtol=1e-4, err_msg=key)
  for key in diagnostics.CENTRED:
    np.testing.assert_allclose(float(out[f"{key}_features"]), features[key], rtol=1e-4, err_msg=key)
  assert features["alpha"] != pytest.approx(points["alpha"], rel=1e-3)  # the two conventions differ here
  assert diagnostics.update_diagnostics(bs, bq, as_, aq, s_labels, q_labels, WAY, "proto", "points").keys() == set(
      diagnostics.FIELDS)
  with pytest.raises(ValueError, match="Unknown centring 'both'; choose one of points, features"):
    diagnostics.centre(bs, "both")


@pytest.mark.parametrize("centring", diagnostics.CENTRE_MODES)
def test_building_blocks_match_numpy(centring):
  bs, bq, _, _ = random_episode(3)
  as_, aq = random_update(bs, bq, 4)
  raw_x, raw_y = np.concatenate([bs, bq]), np.concatenate([as_, aq])
  x, y = diagnostics.centre(raw_x, centring), diagnostics.centre(raw_y, centring)
  np.testing.assert_allclose(np.asarray(x), np_centre(raw_x, centring), atol=1e-5)
  np_x, np_y = np_centre(raw_x, centring), np_centre(raw_y, centring)
  alpha_ref = np_frobenius_dot(np_x, np_y) / np_frobenius_dot(np_x, np_x)
  alpha = diagnostics.procrustes_scale(x, y)
  np.testing.assert_allclose(float(alpha), alpha_ref, rtol=1e-5)
  ratio_ref = np.linalg.norm(np_y - alpha_ref * np_x) / np.linalg.norm(np_y - np_x)
  np.testing.assert_allclose(float(diagnostics.norm_ratio(x, y, alpha)), ratio_ref, rtol=1e-4)
  assert 0.0 <= ratio_ref <= 1.0


# ----------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize("classifier,centring", SETTINGS)
@pytest.mark.parametrize("c", [0.5, 2.0])
def test_pure_rescaling(classifier, centring, c):
  """Y = cX: alpha = c, norm ratio 0, psi = c everywhere, so every alpha ratio is exactly 1."""
  bs, bq, s_labels, q_labels = random_episode(5)
  as_, aq = c * bs, c * bq
  out = diag(bs, bq, as_, aq, s_labels, q_labels, classifier, centring)
  np.testing.assert_allclose(out["alpha"], c, rtol=1e-5)
  assert abs(out["norm_ratio"]) < 1e-5
  psi = diagnostics.distance_ratios(bs, bq, as_, aq, s_labels, q_labels, WAY, classifier)
  np.testing.assert_allclose(np.asarray(psi), c, rtol=1e-4)
  for key in ("psi_con", "psi_div"):
    np.testing.assert_allclose(out[key], c, rtol=1e-4)
  for key in ("con_alpha", "div_alpha", "con_div"):
    np.testing.assert_allclose(out[key], 1.0, rtol=1e-4)


@pytest.mark.parametrize("centring", diagnostics.CENTRE_MODES)
def test_change_orthogonal_to_x_keeps_alpha_one(centring):
  bs, bq, s_labels, q_labels = random_episode(6)
  raw_x = np.concatenate([bs, bq]).astype(np.float64)
  x = np_centre(raw_x, centring)
  change = np_centre(np.random.default_rng(7).normal(size=raw_x.shape), centring)
  change -= np_frobenius_dot(change, x) / np_frobenius_dot(x, x) * x  # stays centred: a sum of centred sets
  change *= 0.05 * np.linalg.norm(x) / np.linalg.norm(change)
  raw_y = (raw_x + change).astype(np.float32)
  out = diag(bs, bq, raw_y[: len(bs)], raw_y[len(bs):], s_labels, q_labels, "proto", centring)
  np.testing.assert_allclose(out["alpha"], 1.0, atol=1e-5)
  # With alpha = 1 the residual is the whole change.
  np.testing.assert_allclose(out["norm_ratio"], 1.0, atol=1e-3)


@pytest.mark.parametrize("classifier", ["proto", "nn"])
@pytest.mark.parametrize("moved", ["before", "after"])
def test_translation_changes_nothing_under_points_centring(classifier, moved):
  bs, bq, s_labels, q_labels = random_episode(8)
  as_, aq = random_update(bs, bq, 9)
  shift = (3.0 * np.random.default_rng(10).normal(size=bs.shape[1])).astype(np.float32)
  reference = diag(bs, bq, as_, aq, s_labels, q_labels, classifier, "points")
  if moved == "before":
    shifted = diag(bs + shift, bq + shift, as_, aq, s_labels, q_labels, classifier, "points")
  else:
    shifted = diag(bs, bq, as_ + shift, aq + shift, s_labels, q_labels, classifier, "points")
  for key in diagnostics.FIELDS:  # psi too: class distances within one set ignore a common shift
    np.testing.assert_allclose(shifted[key], reference[key], rtol=2e-4, err_msg=key)
  # The reference code's per-point centring is not translation invariant (the documented deviation).
  features = diag(bs, bq, as_, aq, s_labels, q_labels, classifier, "features")
  features_shifted = diag(bs, bq, as_ + shift, aq + shift, s_labels, q_labels, classifier, "features")
  assert abs(features_shifted["alpha"] - features["alpha"]) > 1e-2


@pytest.mark.parametrize("centring", diagnostics.CENTRE_MODES)
def test_queries_onto_their_prototypes_gives_psi_con_near_zero(centring):
  bs, bq, s_labels, q_labels = random_episode(11)
  as_, _ = random_update(bs, bq, 12)
  prototypes = np.stack([as_[s_labels == c].mean(axis=0) for c in range(WAY)])
  aq = prototypes[q_labels]
  out = diag(bs, bq, as_, aq, s_labels, q_labels, "proto", centring)
  assert all(np.isfinite(v) for v in out.values()), out
  assert 0.0 <= out["psi_con"] < 1e-3
  assert 0.0 <= out["con_alpha"] < 1e-3 and out["con_div"] < 1e-3
  assert out["psi_div"] > 0.1  # the other classes stay at a distance


@pytest.mark.parametrize("classifier,centring", SETTINGS)
def test_no_update_is_undefined_norm_ratio(classifier, centring):
  bs, bq, s_labels, q_labels = random_episode(13)
  out = diag(bs, bq, bs.copy(), bq.copy(), s_labels, q_labels, classifier, centring)
  assert np.isnan(out["norm_ratio"])
  assert out["alpha"] == pytest.approx(1.0, abs=1e-6)
  psi = diagnostics.distance_ratios(bs, bq, bs, bq, s_labels, q_labels, WAY, classifier)
  np.testing.assert_array_equal(np.asarray(psi), 1.0)
  for key in ("psi_con", "psi_div", "con_alpha", "div_alpha", "con_div"):
    assert out[key] == pytest.approx(1.0, abs=1e-6), key


def test_collapsed_before_embedding_gives_nan_alpha_but_finite_psi():
  """All points equal before: alpha (so the norm ratio) undefined; zero before-distances clamped, not inf."""
  bs, bq, s_labels, q_labels = random_episode(14)
  out = diag(np.ones_like(bs), np.ones_like(bq), bs, bq, s_labels, q_labels)
  for key in ("alpha", "norm_ratio", "con_alpha", "div_alpha"):
    assert np.isnan(out[key]), key
  for key in ("psi_con", "psi_div", "con_div"):
    assert np.isfinite(out[key]) and out[key] > 0, key


# ----------------------------------------------------------------------------- compiled and bad input


@pytest.mark.parametrize("classifier,centring", [("proto", "points"), ("nn", "features")])
def test_jit_matches_eager(classifier, centring):
  bs, bq, s_labels, q_labels = random_episode(15)
  as_, aq = random_update(bs, bq, 16)
  args = (bs, bq, as_, aq, s_labels, q_labels)
  jitted = jax.jit(diagnostics.episode_diagnostics, static_argnames=("way", "classifier", "centring"))
  compiled = jitted(*args, way=WAY, classifier=classifier, centring=centring)
  eager = diagnostics.episode_diagnostics(*args, way=WAY, classifier=classifier, centring=centring)
  for key in diagnostics.FIELDS:
    np.testing.assert_allclose(float(compiled[key]), float(eager[key]), rtol=1e-5, err_msg=key)


def test_unknown_options_raise():
  bs, bq, s_labels, q_labels = random_episode(17)
  with pytest.raises(ValueError, match="centring"):
    diagnostics.episode_diagnostics(bs, bq, bs, bq, s_labels, q_labels, WAY, "proto", "rows")
  with pytest.raises(ValueError, match="classifier"):
    diagnostics.episode_diagnostics(bs, bq, bs, bq, s_labels, q_labels, WAY, "knn", "points")
