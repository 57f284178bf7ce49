"""Retrieval metrics and pair statistics against brute-force numpy loops over the full distance matrix."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from fewshot import distances
from fewshot.dml import knn, metrics, pair_similarities


def full_matrix(distance, x, y):
  """The whole [n, m] matrix in one call: the reference the blocked search must reproduce."""
  return np.array(distance(jnp.asarray(x), jnp.asarray(y)))


def brute_retrieval(query, query_labels, reference, reference_labels, ref_includes_query, recall_at,
                    distance=distances.euclidean):
  """Per-query loops over stably sorted rows of the full matrix; queries with R = 0 skipped and counted."""
  d = full_matrix(distance, query, reference)
  per_query, skipped = [], 0
  for i in range(len(query)):
    order = np.argsort(d[i], kind="stable")
    if ref_includes_query:
      order = order[order != i]
    rel = reference_labels[order] == query_labels[i]
    r = int(np.sum(reference_labels == query_labels[i])) - int(ref_includes_query)
    if r == 0:
      skipped += 1
      continue
    ap = sum(rel[:j + 1].sum() / (j + 1) for j in range(r) if rel[j]) / r
    per_query.append([float(rel[:kk].any()) for kk in recall_at] + [float(rel[0]), rel[:r].sum() / r, ap])
  means = np.mean(per_query, axis=0)
  return means, skipped


def unbalanced(seed, n, dim=6, classes=(1, 2, 3, 5, 8, 13)):
  """Random embeddings of unbalanced classes with arbitrary (negative, sparse) int labels; class sizes cycle."""
  rng = np.random.default_rng(seed)
  sizes = [classes[i % len(classes)] for i in range(n)]
  labels = np.repeat(rng.choice(np.arange(-500, 500), len(sizes), replace=False), sizes)[:n]
  centres = {c: rng.normal(size=dim) for c in np.unique(labels)}
  x = np.stack([centres[c] + 0.9 * rng.normal(size=dim) for c in labels]).astype(np.float32)
  perm = rng.permutation(n)
  return x[perm], labels[perm]


def check_against_brute(got, query, query_labels, reference, reference_labels, incl, recall_at, distance=distances.euclidean):
  means, skipped = brute_retrieval(query, query_labels, reference, reference_labels, incl, recall_at, distance)
  values = [got.recall_at_k[kk] for kk in recall_at] + [got.precision_at_1, got.r_precision, got.map_at_r]
  np.testing.assert_allclose(values, means, rtol=1e-6, atol=1e-7)
  assert got.num_queries == len(query) and got.num_queries_without_positive == skipped
  return skipped


@pytest.mark.parametrize("block_size", [7, 64])
def test_retrieval_against_brute_force_query_in_reference(block_size):
  x, y = unbalanced(0, 150)
  q = 90
  got = metrics.retrieval_metrics(x[:q], y[:q], x, y, True, recall_at=(1, 3, 5), block_size=block_size)
  skipped = check_against_brute(got, x[:q], y[:q], x, y, True, (1, 3, 5))
  assert skipped > 0  # singletons of the cycle (size 1, and classes cut at n): counted, not averaged as 0
  assert got.k == max(1, 5, int(max(np.sum(y == c) for c in y[:q])) - 1)


def test_retrieval_against_brute_force_separate_sets_and_cosine():
  x, y = unbalanced(1, 140)
  query, query_labels = x[:40], y[:40]
  reference, reference_labels = x[40:], y[40:]
  query_labels = query_labels.copy()
  query_labels[0] = 10_000  # a class absent from the reference set: R = 0
  for distance in (distances.euclidean, distances.cosine_distance):
    got = metrics.retrieval_metrics(query, query_labels, reference, reference_labels, False, recall_at=(1, 2, 4, 8),
                                    distance=distance, block_size=16)
    assert check_against_brute(got, query, query_labels, reference, reference_labels, False, (1, 2, 4, 8), distance) >= 1


def test_recall_at_k_is_any_hit_not_fraction():
  x = np.array([[0.0], [1.0], [2.0], [3.0]], np.float32)
  y = np.array([0, 1, 0, 0])  # query 0: nearest is class 1, then two of class 0
  got = metrics.retrieval_metrics(x[:1], y[:1], x, y, True, recall_at=(1, 2, 3))
  assert got.recall_at_k == {1: 0.0, 2: 1.0, 3: 1.0}
  assert got.precision_at_1 == 0.0 and got.r_precision == pytest.approx(0.5) and got.map_at_r == pytest.approx(0.25)


@pytest.mark.parametrize("correct,expected", [
    ((1,), (0.10, 0.10)),
    ((1, 10), (0.20, 0.12)),
    ((1, 2), (0.20, 0.20)),
    (tuple(range(1, 11)), (1.0, 1.0)),
])
def test_reality_check_worked_examples(correct, expected):
  """R = 10: the query at 0, the i-th nearest reference at position i on a line."""
  ranks = np.arange(1, 31)
  same = np.zeros(30, bool)
  same[np.asarray(correct) - 1] = True
  same[20:20 + 10 - len(correct)] = True  # the rest of the class beyond rank R: exactly 10 in all
  reference = ranks.astype(np.float32)[:, None]
  got = metrics.retrieval_metrics(np.zeros((1, 1), np.float32), np.array([7]), reference, np.where(same, 7, 3), False,
                                  recall_at=(1,))
  assert got.k == 10
  assert (got.precision_at_1, got.r_precision, got.map_at_r) == pytest.approx((1.0, *expected))


def tie_heavy(seed, n, high, dim):
  """Integer embeddings in {0, ..., high - 1}^dim: many equal distances, and duplicates when high**dim is small."""
  return np.random.default_rng(seed).integers(0, high, (n, dim)).astype(np.float32)


@pytest.mark.parametrize("exclude_self,block_size,n_ref,k,high,dim", [
    (True, 10, 131, 12, 3, 3),  # 27 distinct points for 131 items: every query has duplicates
    (False, 64, 131, 1, 3, 3),
    (False, 33, 3000, 9, 8, 4),  # 3000 references take the chunked top-k path; ties straddle the k-th
    (True, 33, 3000, 9, 8, 4),
])
def test_blocked_knn_matches_full_matrix_with_ties(exclude_self, block_size, n_ref, k, high, dim):
  """Exact equality with a stable argsort of the whole matrix."""
  reference = tie_heavy(1, n_ref, high, dim)
  query = reference[:101]
  d, idx = knn.nearest_neighbours(query, reference, k, exclude_self=exclude_self, block_size=block_size)
  full = full_matrix(distances.euclidean, query, reference)
  if exclude_self:
    full[np.arange(len(query)), np.arange(len(query))] = np.inf  # by index: duplicates stay
  order = np.argsort(full, axis=1, kind="stable")[:, :k]
  np.testing.assert_array_equal(np.asarray(idx), order)
  np.testing.assert_array_equal(np.asarray(d), np.take_along_axis(full, order, axis=1))
  kth = np.sort(full, axis=1)[:, k - 1:k]
  assert (np.sum(full == kth, axis=1) > np.sum(np.asarray(d) == kth, axis=1)).mean() > 0.5  # ties cut at the k-th
  if exclude_self:
    assert not (np.asarray(idx) == np.arange(len(query))[:, None]).any()
    if n_ref == 131:
      assert (np.asarray(d)[:, 0] < 1e-4).mean() > 0.5  # duplicates at distance 0 are still neighbours


def test_chunked_smallest_k_equals_top_k():
  rng = np.random.default_rng(2)
  for n, k in [(640, 1), (4096, 16)]:
    d = jnp.asarray(rng.integers(0, n // 8, (17, n)).astype(np.float32))  # each value ~8 times a row
    chunk = knn._chunk_size(n, k)
    assert chunk
    got = jax.jit(knn._smallest_k, static_argnums=(1, 2))(d, k, chunk)
    neg, idx = metrics.jax.lax.top_k(-d, k)
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(idx))
    np.testing.assert_array_equal(np.asarray(got[0]), -np.asarray(neg))


def test_blocked_knn_random_floats_matches_full_matrix():
  x = np.random.default_rng(3).normal(size=(300, 16)).astype(np.float32)
  d, idx = knn.nearest_neighbours(x, x, 5, block_size=64, distance=distances.squared_euclidean)
  full = full_matrix(distances.squared_euclidean, x, x)
  order = np.argsort(full, axis=1, kind="stable")[:, :5]
  np.testing.assert_array_equal(np.asarray(idx), order)
  np.testing.assert_allclose(np.asarray(d), np.take_along_axis(full, order, axis=1), atol=1e-4)


def test_pair_statistics_against_double_loop():
  x, y = unbalanced(4, 45, dim=5)
  x[3] = 0.0  # a zero row stays zero (as in cosine_similarity) rather than NaN
  x64 = x.astype(np.float64)
  unit = x64 / np.maximum(np.linalg.norm(x64, axis=1, keepdims=True), 1e-12)
  pos, neg = [], []
  for i in range(len(x)):
    for j in range(i + 1, len(x)):
      (pos if y[i] == y[j] else neg).append(unit[i] @ unit[j])
  got = pair_similarities.pair_statistics(x, y)
  assert (got.num_positive_pairs, got.num_negative_pairs) == (len(pos), len(neg))
  assert got.mean_positive == pytest.approx(np.mean(pos), abs=1e-12)
  assert got.mean_negative == pytest.approx(np.mean(neg), abs=1e-12)
  assert math.isnan(pair_similarities.pair_statistics(x[:3], np.arange(3)).mean_positive)


def brute_histograms(x, y, edges):
  s = full_matrix(distances.cosine_similarity, x, x).astype(np.float64)
  i, j = np.triu_indices(len(x), 1)
  same = y[i] == y[j]
  s = np.clip(s[i, j], -1.0, 1.0)
  return np.histogram(s[same], bins=edges)[0], np.histogram(s[~same], bins=edges)[0], s


@pytest.mark.parametrize("bins,block_size", [(7, 16), (20, 64)])
def test_pair_histograms_against_np_histogram(bins, block_size):
  x, y = unbalanced(5, 61, dim=4)
  pos, neg, edges = pair_similarities.pair_similarity_histograms(x, y, bins=bins, block_size=block_size)
  want_pos, want_neg, s = brute_histograms(x, y, edges)
  # The tiles and the full matrix may round a similarity differently in the last ulp: only a
  # pair within 1e-6 of an edge may then change bins (one such pair moves one count).
  near = int(np.sum(np.min(np.abs(s[:, None] - edges[None, 1:-1]), axis=1) < 1e-6))
  assert near <= 2
  assert np.abs(pos - want_pos).sum() + np.abs(neg - want_neg).sum() <= 2 * near
  assert pos.sum() + neg.sum() == 61 * 60 // 2
  assert pos.dtype == np.int64 and len(edges) == bins + 1 and edges[0] == -1.0 and edges[-1] == 1.0


def test_pair_histograms_exact_edges():
  """Similarities exactly -1, 0, 0.5 and 1 land in np.histogram's bins ([e_t, e_t+1), the last closed)."""
  x = np.array([[1, 0], [1, 0], [-1, 0], [0, 1], [0.5, 0.75**0.5]], np.float32)
  y = np.array([0, 0, 0, 1, 1])
  pos, neg, edges = pair_similarities.pair_similarity_histograms(x, y, bins=4, block_size=2)
  want_pos, want_neg, _ = brute_histograms(x, y, edges)
  np.testing.assert_array_equal(pos, want_pos)
  np.testing.assert_array_equal(neg, want_neg)
  assert pos.tolist() == [2, 0, 0, 2]  # (0,2), (1,2) at -1; (0,1) at 1; (3,4) at 0.866


def test_histogram_jsd_against_scipy():
  rng = np.random.default_rng(6)
  for _ in range(5):
    p, q = rng.integers(0, 50, 30), rng.integers(0, 5000, 30)
    p[:4] = 0  # 0 log 0 = 0
    assert pair_similarities.histogram_jsd(p, q) == pytest.approx(jensenshannon(p, q, base=2) ** 2, abs=1e-12)
  assert pair_similarities.histogram_jsd([3, 1, 0], [30, 10, 0]) == 0.0  # area normalisation: same shape
  assert pair_similarities.histogram_jsd([3, 1, 0, 0], [0, 0, 2, 9]) == 1.0


def test_histogram_jsd_of_real_histograms():
  x, y = unbalanced(7, 80, dim=4)
  pos, neg, _ = pair_similarities.pair_similarity_histograms(x, y, bins=50)
  jsd = pair_similarities.histogram_jsd(pos, neg)
  assert 0.0 < jsd < 1.0 and jsd == pytest.approx(jensenshannon(pos, neg, base=2) ** 2, abs=1e-12)


def assert_one_line(excinfo, *fragments):
  text = str(excinfo.value)
  assert "\n" not in text
  for fragment in fragments:
    assert fragment in text, text


def test_bad_inputs_raise_one_line_errors():
  x, y = unbalanced(8, 30, dim=3)
  call = metrics.retrieval_metrics
  cases = [
      (lambda: call(x, y[:-1], x, y, True), ("query has 30 rows", "one label per embedding")),
      (lambda: call(x, y, x[:, :2], y, False), ("dim 3", "dim 2")),
      (lambda: call(np.where(np.arange(30)[:, None] == 4, np.nan, x), y, x, y, False), ("query row 4", "not finite")),
      (lambda: call(x, y, np.where(np.arange(30)[:, None] == 2, np.inf, x), y, False), ("reference row 2",)),
      (lambda: call(x, y, x, y, True, recall_at=(1, 30)), ("K=30", "[1, 29]", "minus itself")),
      (lambda: call(x, y, x[:5], y[:5], False, recall_at=(8,)), ("K=8", "[1, 5]")),
      (lambda: call(x[:0], y[:0], x, y, False), ("query is empty",)),
      (lambda: call(x, y, x[:0], y[:0], False), ("reference is empty",)),
      (lambda: call(x, y, x[:10], y[:10], True), ("reference has 10 rows and query 30",)),
      (lambda: call(x[:5], y[:5], x[::-1], y[::-1], True), ("must be the first 5 references",)),
      (lambda: call(x, y.astype(float), x, y, False), ("query_labels must be integers",)),
      (lambda: call(x, y, x, y, False, distance=distances.cosine_similarity), ("similarity", "cosine_distance")),
      (lambda: call(x[:1], y[:1], x[:1], y[:1], True), ("nothing but the query itself",)),
      (lambda: knn.nearest_neighbours(x, x, 30, exclude_self=True), ("k=30", "[1, 29]")),
      (lambda: pair_similarities.pair_statistics(x, y[:3]), ("one label per embedding",)),
      (lambda: pair_similarities.histogram_jsd([1, 2], [1, 2, 3]), ("one length",)),
      (lambda: pair_similarities.histogram_jsd([0, 0], [1, 2]), ("positive total",)),
      (lambda: pair_similarities.pair_similarity_histograms(x, y, bins=0), ("bins=0",)),
  ]
  for fn, fragments in cases:
    with pytest.raises(ValueError) as excinfo:
      fn()
    assert_one_line(excinfo, *fragments)


def test_all_queries_without_positive_give_nan_and_counts():
  x = np.eye(4, dtype=np.float32)
  got = metrics.retrieval_metrics(x, np.arange(4), x, np.arange(4), True, recall_at=(1,))
  assert got.num_queries == got.num_queries_without_positive == 4
  assert math.isnan(got.map_at_r) and math.isnan(got.recall_at_k[1])
  assert set(got.as_dict()) >= {"recall_at_1", "precision_at_1", "r_precision", "map_at_r", "num_queries"}
