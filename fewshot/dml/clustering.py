r"""k-means on the device, and the NMI and pairwise F1 of a clustering against class labels.

The clustering metrics of deep metric learning (docs/protocol.md#other-measures-of-an-embedding): cluster the
embeddings with k-means, ``k`` = the number of classes, and score the clusters against the labels.
The assignment step is the blocked exact search of :func:`fewshot.dml.knn.nearest_neighbours`,
so 100,000 points and 10,000 centroids never need a ``100,000 x 10,000`` matrix.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from fewshot import distances
from fewshot.dml import knn, metrics

Array = jax.Array


def _assign(x: Array, centroids: Array, block_size: int) -> Array:
  # squared distances rank like Euclidean ones and skip a square root per pair
  return knn.nearest_neighbours(x, centroids, 1, distance=distances.squared_euclidean_matmul, block_size=block_size)[1][:, 0]


@functools.partial(jax.jit, static_argnames=("num_clusters", "block_size"))
def _kmeans(key, x, iterations, *, num_clusters, block_size):  # iterations traced: no recompile per value
  n = x.shape[0]
  centroids = x[jax.random.choice(key, n, (num_clusters,), replace=False)]
  ones = jnp.ones((n,), x.dtype)

  def step(state):
    i, old_centroids, assignments, _ = state
    sums = jax.ops.segment_sum(x, assignments, num_clusters)
    counts = jax.ops.segment_sum(ones, assignments, num_clusters)[:, None]
    centroids = jnp.where(counts > 0, sums / jnp.maximum(counts, 1), old_centroids)
    new = _assign(x, centroids, block_size)
    return i + 1, centroids, new, jnp.any(new != assignments)

  state = (jnp.int32(0), centroids, _assign(x, centroids, block_size), jnp.array(True))
  _, centroids, assignments, _ = jax.lax.while_loop(lambda s: (s[0] < iterations) & s[3], step, state)
  return centroids, assignments


def kmeans(key: chex.PRNGKey, x: Array, num_clusters: int, *, iterations: int = 20,
           block_size: int = knn.DEFAULT_BLOCK_SIZE) -> tuple[Array, Array]:
  r"""Lloyd's k-means, seeded: ``(centroids [num_clusters, d], assignments int32 [n])``.

  Initial centroids are ``num_clusters`` points at distinct random indices (``key``), as
  faiss initialises; not k-means++, which would add ``num_clusters`` sequential passes over
  the data (10,000 small serial steps at the benchmark's size). Each iteration moves every centroid to the mean of its points
  (``jax.ops.segment_sum``) and reassigns each point to its nearest centroid in squared
  Euclidean distance, ties to the lower centroid index, in blocks of ``block_size`` points
  (:func:`~fewshot.dml.knn.nearest_neighbours`). A centroid left without points keeps its
  previous position. Stops after ``iterations`` updates, or earlier once no assignment
  changes; the assignments returned are those to the centroids returned.
  """
  x = jnp.asarray(x)
  if x.ndim != 2 or x.shape[0] == 0:
    raise ValueError(f"x must be a non-empty [num_points, dim] matrix, got shape {x.shape}")
  if not 1 <= num_clusters <= x.shape[0]:
    raise ValueError(f"num_clusters={num_clusters} must be in [1, {x.shape[0]}] (the number of points)")
  if iterations < 0:
    raise ValueError(f"iterations={iterations} must be >= 0")
  return _kmeans(key, x, jnp.int32(iterations), num_clusters=int(num_clusters), block_size=int(block_size))


class _Contingency(NamedTuple):
  counts: np.ndarray  # n_ij of the non-empty cells
  class_sizes: np.ndarray  # a_i
  cluster_sizes: np.ndarray  # b_j


def _contingency(labels, assignments) -> _Contingency:
  labels, assignments = np.asarray(labels), np.asarray(assignments)
  if labels.ndim != 1 or labels.shape != assignments.shape:
    raise ValueError(f"labels and assignments must be 1-D of one length, got shapes {labels.shape} and {assignments.shape}")
  if len(labels) == 0:
    raise ValueError("labels and assignments are empty; pass at least one item")
  _, label_index, class_sizes = np.unique(labels, return_inverse=True, return_counts=True)
  _, cluster_index, cluster_sizes = np.unique(assignments, return_inverse=True, return_counts=True)
  # the sparse table: one count per (class, cluster) cell that occurs
  _, counts = np.unique(label_index.astype(np.int64) * len(cluster_sizes) + cluster_index, return_counts=True)
  return _Contingency(counts, class_sizes, cluster_sizes)


def _entropy(sizes: np.ndarray, n: int) -> float:
  p = sizes / n
  return float(-np.sum(p * np.log(p)))


def normalized_mutual_information(labels, assignments) -> float:
  r"""NMI of a clustering against class labels, arithmetic-mean normalisation (sklearn's default).

  .. math::
    \mathrm{NMI}(U, V) = \frac{I(U; V)}{\tfrac12 (H(U) + H(V))}, \qquad
    I(U; V) = \sum_{ij} \frac{n_{ij}}{n} \log \frac{n\, n_{ij}}{a_i b_j}, \qquad
    H(U) = -\sum_i \frac{a_i}{n} \log \frac{a_i}{n},

  from the sparse contingency table :math:`n_{ij}` (class :math:`i`, cluster :math:`j`,
  margins :math:`a_i, b_j`), in float64 on the host. In [0, 1], invariant to renaming
  classes or clusters; 1 when both are a single group (as sklearn), 0 when exactly one is.
  """
  table = _contingency(labels, assignments)
  n = int(table.class_sizes.sum())
  h_u, h_v = _entropy(table.class_sizes, n), _entropy(table.cluster_sizes, n)
  if h_u == 0.0 and h_v == 0.0:
    return 1.0
  # I = sum n_ij/n log(n n_ij) - sum a_i/n log a_i - sum b_j/n log b_j: only the occupied cells
  c = table.counts
  mi = (float(np.sum(c * np.log(c))) / n + np.log(n)
        - float(np.sum(table.class_sizes * np.log(table.class_sizes))) / n
        - float(np.sum(table.cluster_sizes * np.log(table.cluster_sizes))) / n)
  return float(np.clip(max(mi, 0.0) / (0.5 * (h_u + h_v)), 0.0, 1.0))


class PairwiseF1(NamedTuple):
  precision: float
  recall: float
  f1: float


def _pairs(sizes: np.ndarray) -> int:
  sizes = sizes.astype(np.int64)
  return int(np.sum(sizes * (sizes - 1) // 2))


def pairwise_f1(labels, assignments) -> PairwiseF1:
  r"""Pair-counting precision, recall and F1 of a clustering against class labels.

  Over unordered pairs of items: precision = (pairs in one cluster and one class) / (pairs in
  one cluster), recall = that count / (pairs in one class), F1 their harmonic mean, all from
  the contingency table: :math:`\sum_{ij} \binom{n_{ij}}{2}`, :math:`\sum_j \binom{b_j}{2}`,
  :math:`\sum_i \binom{a_i}{2}`. A ratio over zero pairs is vacuous and counts as 1 (so two
  all-singleton partitions agree perfectly); F1 is 0 when precision and recall are both 0.
  """
  table = _contingency(labels, assignments)
  together, same_cluster, same_class = _pairs(table.counts), _pairs(table.cluster_sizes), _pairs(table.class_sizes)
  precision = together / same_cluster if same_cluster else 1.0
  recall = together / same_class if same_class else 1.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
  return PairwiseF1(float(precision), float(recall), float(f1))


@dataclasses.dataclass(frozen=True)
class ClusteringMetrics:
  nmi: float
  f1: float
  precision: float
  recall: float
  num_clusters: int


def clustering_metrics(key: chex.PRNGKey, embeddings, labels, *, iterations: int = 20,
                       block_size: int = knn.DEFAULT_BLOCK_SIZE) -> ClusteringMetrics:
  """NMI and pairwise F1 of :func:`kmeans` with ``k`` = the number of classes (embeddings used as given).

  Normalise the embeddings first where the protocol does (the reality check evaluates
  L2-normalised embeddings). Labels are arbitrary ints.
  """
  x, labels = metrics.check_embeddings("embeddings", embeddings, "labels", labels)
  num_clusters = len(np.unique(labels))
  _, assignments = kmeans(key, jnp.asarray(x), num_clusters, iterations=iterations, block_size=block_size)
  assignments = np.asarray(assignments)
  f1 = pairwise_f1(labels, assignments)
  return ClusteringMetrics(nmi=normalized_mutual_information(labels, assignments), f1=f1.f1, precision=f1.precision,
                           recall=f1.recall, num_clusters=num_clusters)
