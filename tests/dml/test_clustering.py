"""k-means on blobs, NMI and pairwise F1 against loops over the definitions."""

from __future__ import annotations

import itertools
import math

import jax
import numpy as np
import pytest

from fewshot.dml import clustering


def brute_nmi(labels, assignments):
  """Entropies and mutual information by loops over classes and clusters (arithmetic-mean normalisation)."""
  n = len(labels)
  classes, clusters = sorted(set(labels.tolist())), sorted(set(assignments.tolist()))
  def h(values):
    return -sum((np.sum(values == v) / n) * math.log(np.sum(values == v) / n) for v in set(values.tolist()))
  mi = 0.0
  for c in classes:
    for k in clusters:
      nij = np.sum((labels == c) & (assignments == k))
      if nij:
        mi += nij / n * math.log(n * nij / (np.sum(labels == c) * np.sum(assignments == k)))
  hu, hv = h(labels), h(assignments)
  return 1.0 if hu == hv == 0 else mi / (0.5 * (hu + hv))


def brute_f1(labels, assignments):
  """Every unordered pair, one at a time."""
  tp = same_cluster = same_class = 0
  for i, j in itertools.combinations(range(len(labels)), 2):
    a, b = assignments[i] == assignments[j], labels[i] == labels[j]
    tp += a and b
    same_cluster += a
    same_class += b
  p = tp / same_cluster if same_cluster else 1.0
  r = tp / same_class if same_class else 1.0
  return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def random_partitions(seed, n=70):
  rng = np.random.default_rng(seed)
  labels = rng.choice([-7, 3, 11, 1000, 42], size=n, p=[0.5, 0.2, 0.15, 0.1, 0.05])
  assignments = np.where(rng.random(n) < 0.6, labels % 4, rng.integers(0, 6, n))
  return labels, assignments


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nmi_and_f1_against_definitions(seed):
  labels, assignments = random_partitions(seed)
  assert clustering.normalized_mutual_information(labels, assignments) == pytest.approx(brute_nmi(labels, assignments), abs=1e-12)
  assert tuple(clustering.pairwise_f1(labels, assignments)) == pytest.approx(brute_f1(labels, assignments), abs=1e-12)


def test_nmi_invariant_to_relabelling_and_symmetric():
  labels, assignments = random_partitions(3)
  nmi = clustering.normalized_mutual_information(labels, assignments)
  renamed = np.array([-1, 500, 9, 2, 77, 13])[assignments]  # a bijection of cluster ids
  assert clustering.normalized_mutual_information(labels * 3 + 1, renamed) == pytest.approx(nmi, abs=1e-12)
  assert clustering.normalized_mutual_information(assignments, labels) == pytest.approx(nmi, abs=1e-12)
  assert tuple(clustering.pairwise_f1(labels, renamed)) == pytest.approx(tuple(clustering.pairwise_f1(labels, assignments)))


def test_edge_cases():
  same = np.zeros(5, int)
  assert clustering.normalized_mutual_information(same, same) == 1.0
  assert clustering.normalized_mutual_information(same, np.arange(5)) == 0.0
  assert clustering.normalized_mutual_information(np.arange(5), np.arange(5) + 3) == pytest.approx(1.0)
  assert tuple(clustering.pairwise_f1(np.arange(5), np.arange(5))) == (1.0, 1.0, 1.0)
  assert clustering.pairwise_f1(same, np.arange(5)).f1 == 0.0
  sklearn = pytest.importorskip("sklearn.metrics")  # an independent implementation, where installed
  labels, assignments = random_partitions(4)
  assert clustering.normalized_mutual_information(labels, assignments) == pytest.approx(
      sklearn.normalized_mutual_info_score(labels, assignments), abs=1e-12)


def blobs(seed, classes=6, per_class=(5, 9, 14), dim=3):
  rng = np.random.default_rng(seed)
  sizes = [per_class[i % len(per_class)] for i in range(classes)]
  centres = 20.0 * np.eye(classes, dim * 2)[:, :dim] + 20.0 * np.arange(classes)[:, None]
  labels = np.repeat(np.arange(classes) * 5 - 3, sizes)
  x = np.concatenate([c + 0.3 * rng.normal(size=(s, dim)) for c, s in zip(centres, sizes)]).astype(np.float32)
  return x, labels


def test_kmeans_recovers_well_separated_blobs():
  x, labels = blobs(0)
  got = clustering.clustering_metrics(jax.random.key(0), x, labels, block_size=16)
  assert got.num_clusters == 6 and got.nmi == pytest.approx(1.0) and got.f1 == pytest.approx(1.0)


def test_kmeans_is_lloyd_and_seeded():
  x, _ = blobs(1, classes=4)
  key = jax.random.key(3)
  centroids, assignments = clustering.kmeans(key, x, 5, iterations=3, block_size=8)
  centroids, assignments = np.asarray(centroids), np.asarray(assignments)
  d = ((x[:, None, :] - centroids[None]) ** 2).sum(-1)
  np.testing.assert_array_equal(assignments, np.argmin(d, axis=1))  # the assignments belong to the centroids returned
  again = clustering.kmeans(key, x, 5, iterations=3, block_size=8)
  np.testing.assert_array_equal(np.asarray(again[1]), assignments)
  # iterations=0: the initial centroids are data points at distinct indices
  init = np.asarray(clustering.kmeans(key, x, 5, iterations=0, block_size=8)[0])
  rows = [np.flatnonzero((x == c).all(axis=1)) for c in init]
  assert all(len(r) for r in rows) and len({int(r[0]) for r in rows}) == 5


def test_empty_cluster_keeps_its_centroid():
  """Two starts on the duplicate points at 5: ties go to the lower centroid, the other is left empty and stays."""
  x = np.array([[5.0], [5.0], [10.0], [10.0]], np.float32)
  empty_seen = 0
  for seed in range(12):
    centroids, assignments = clustering.kmeans(jax.random.key(seed), x, 3, iterations=5)
    centroids, assignments = np.asarray(centroids), np.asarray(assignments)
    assert np.isin(centroids.ravel(), [5.0, 10.0]).all()  # not NaN (0/0), not 0: the previous position
    empty_seen += len(set(assignments.tolist())) < 3
  assert empty_seen > 0


def test_bad_inputs_raise_one_line_errors():
  x, labels = blobs(2)
  cases = [
      (lambda: clustering.kmeans(jax.random.key(0), x, 0), "num_clusters=0"),
      (lambda: clustering.kmeans(jax.random.key(0), x, len(x) + 1), "must be in [1,"),
      (lambda: clustering.clustering_metrics(jax.random.key(0), x, labels[:-1]), "one label per embedding"),
      (lambda: clustering.clustering_metrics(jax.random.key(0), np.where(np.arange(len(x))[:, None] == 5, np.nan, x), labels),
       "row 5"),
      (lambda: clustering.normalized_mutual_information(labels, labels[:-1]), "one length"),
      (lambda: clustering.pairwise_f1([], []), "empty"),
  ]
  for fn, fragment in cases:
    with pytest.raises(ValueError) as excinfo:
      fn()
    assert "\n" not in str(excinfo.value) and fragment in str(excinfo.value), str(excinfo.value)
