r"""Exact retrieval metrics of an embedding, computed in blocks on the device.

Neighbours come from an exact k-nearest-neighbour search run over blocks of queries
(:mod:`fewshot.dml.knn`), so the full :math:`Q \times N` distance matrix is never held:
a 100,000-item gallery queried against itself needs one ``[block_size, N]`` block at a time,
and a gallery sharded over several devices ``[block_size, N / D]`` on each.
Every distance comes from :mod:`fewshot.distances`.

Definitions follow Musgrave et al., "A Metric Learning Reality Check" (ECCV 2020). The statistics
of positive and negative pair similarities (means, histograms, their JSD) are in
:mod:`fewshot.dml.pair_similarities`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from fewshot import distances
from fewshot.dml import knn

Array = jax.Array
Distance = Callable[[Array, Array], Array]

@dataclasses.dataclass(frozen=True)
class RetrievalMetrics:
  """Means over the ``num_queries - num_queries_without_positive`` queries with R >= 1."""

  recall_at_k: Mapping[int, float]
  precision_at_1: float
  r_precision: float
  map_at_r: float
  num_queries: int
  num_queries_without_positive: int
  k: int  # neighbours retrieved per query: max(max R, max K)

  def as_dict(self) -> dict[str, float | int]:
    out = {f"recall_at_{k}": v for k, v in self.recall_at_k.items()}
    out.update({f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "recall_at_k"})
    return out


@functools.partial(jax.jit, static_argnames=("n", "k", "chunk", "recall_at", "distance", "exclude_self", "block_size",
                                             "mesh"))
def _retrieval(query, query_labels, r, reference, reference_labels, *, n, k, chunk, recall_at, distance, exclude_self,
               block_size, mesh):
  position = jnp.arange(1, k + 1)

  def block(xs, start):
    qb, lb, rb = xs
    _, idx = knn.block_neighbours(qb, start, reference, n, k, distance, exclude_self, chunk, mesh)
    relevant = reference_labels[idx] == lb[:, None]  # rows of padding queries are sliced off after the map
    within_r = relevant & (position <= rb[:, None])
    r_safe = jnp.maximum(rb, 1).astype(jnp.float32)
    hits_within_r = within_r.sum(axis=1)  # an int: R-Precision divided in float64 on the host
    precision_at_i = jnp.cumsum(within_r, axis=1) / position
    map_at_r = jnp.where(within_r, precision_at_i, 0.0).sum(axis=1) / r_safe
    hits = jnp.stack([relevant[:, :kk].any(axis=1) for kk in recall_at], axis=1) if recall_at else relevant[:, :0]
    return hits, relevant[:, 0], hits_within_r, map_at_r

  return knn.map_blocks(block, (query, query_labels, r), block_size)


def check_embeddings(name: str, x, labels_name: str, labels) -> tuple[np.ndarray, np.ndarray]:
  """Host arrays of a non-empty ``[n, d]`` finite embedding and ``n`` int labels, or a one-line ``ValueError``."""
  x, labels = np.asarray(x), np.asarray(labels)
  if x.ndim != 2:
    raise ValueError(f"{name} must be a [num_items, dim] matrix, got shape {x.shape}")
  if labels.ndim != 1 or len(labels) != len(x):
    raise ValueError(f"{name} has {len(x)} rows but {labels_name} has shape {labels.shape}; pass one label per embedding")
  if len(x) == 0:
    raise ValueError(f"{name} is empty (0 rows); pass at least one embedding")
  if not (np.issubdtype(labels.dtype, np.integer) or labels.dtype == bool):
    raise ValueError(f"{labels_name} must be integers, got dtype {labels.dtype}; map them with np.unique(..., return_inverse=True)")
  bad = ~np.isfinite(x).all(axis=1)
  if bad.any():
    raise ValueError(f"{name} row {int(np.argmax(bad))} is not finite (NaN or inf), {int(bad.sum())} such rows in all; "
                     "fix or drop them before evaluating")
  return x, labels


def retrieval_metrics(query, query_labels, reference, reference_labels, ref_includes_query: bool, *,
                      recall_at: Sequence[int] = (1, 2, 4, 8), distance: Distance = distances.euclidean_matmul,
                      block_size: int = knn.DEFAULT_BLOCK_SIZE, mesh: Mesh | None = None) -> RetrievalMetrics:
  r"""Recall@K, Precision@1, R-Precision and MAP@R of exact retrieval (Musgrave et al., 2020).

  For a query of class :math:`y` let :math:`R` be the number of reference items of class
  :math:`y` (minus the query itself when ``ref_includes_query``: the queries are then the
  first ``Q`` references, each excluded from its own list by index), and
  :math:`\mathrm{rel}(i) \in \{0, 1\}` whether the :math:`i`-th nearest reference has class :math:`y`:

  .. math::
    \mathrm{Recall@K} = \max_{i \le K} \mathrm{rel}(i), \qquad
    \mathrm{P@1} = \mathrm{rel}(1), \qquad
    \mathrm{R\text{-}Precision} = \frac{1}{R} \sum_{i=1}^{R} \mathrm{rel}(i),

    \mathrm{MAP@R} = \frac{1}{R} \sum_{i=1}^{R} P(i)\, \mathrm{rel}(i), \qquad
    P(i) = \frac{1}{i} \sum_{j=1}^{i} \mathrm{rel}(j),

  each averaged over queries. Recall@K is the metric-learning sense (any hit in the K
  nearest), not the information-retrieval fraction of positives found. Worked examples with
  :math:`R = 10`: only the 1st correct gives R-Precision 0.10, MAP@R 0.10; the 1st and 10th,
  0.20 and 0.12; the 1st and 2nd, 0.20 and 0.20; all ten, 1.0 and 1.0.

  Queries with :math:`R = 0` (no other item of their class in the reference set) are excluded
  from every average and counted in ``num_queries_without_positive``, not scored 0; with no
  query left the averages are NaN. Labels are arbitrary ints (remapped on the host). The kNN
  retrieves :math:`k = \max(\max R, \max K)` neighbours per query, in ``[block_size, N]``
  blocks (:func:`fewshot.dml.knn.nearest_neighbours`), so memory is :math:`O(\text{block\_size} \cdot (N + k))`;
  with ``mesh`` the reference set is sharded over its devices, each holding :math:`N / D` items
  and searching them, with the same neighbours (exact) as on one device.
  Ties in distance go to the lower reference index. Per-query AP is summed in float32 on the
  device (relative error ~1e-7), R-Precision counted exactly; the means are float64.
  """
  knn.check_distance(distance)
  query, query_labels, reference, reference_labels, recall_at = _checked(
      query, query_labels, reference, reference_labels, ref_includes_query, recall_at, block_size)
  q, n, self_count = len(query), len(reference), int(bool(ref_includes_query))

  classes, inverse = np.unique(np.concatenate([query_labels, reference_labels]), return_inverse=True)
  q_lab, r_lab = inverse[:q].astype(np.int32), inverse[q:].astype(np.int32)
  r = (np.bincount(r_lab, minlength=len(classes))[q_lab] - self_count).astype(np.int32)
  k = max(1, int(r.max()), *recall_at)
  padded, _, chunk = knn.shard_reference(reference, k + self_count, mesh)
  padded_labels = np.pad(r_lab, (0, padded.shape[0] - n))  # padding is never a neighbour
  hits, p1, hits_within_r, ap = _retrieval(jnp.asarray(query), jnp.asarray(q_lab), jnp.asarray(r), padded,
                                           jnp.asarray(padded_labels), n=n, k=k, chunk=chunk, recall_at=recall_at,
                                           distance=distance, exclude_self=bool(ref_includes_query),
                                           block_size=int(block_size), mesh=mesh)
  scored = r > 0
  rp = np.asarray(hits_within_r) / np.maximum(r, 1)

  def mean(v) -> float:
    v = np.asarray(v, np.float64)[scored]
    return float(v.mean()) if len(v) else math.nan

  return RetrievalMetrics(recall_at_k={kk: mean(np.asarray(hits)[:, i]) for i, kk in enumerate(recall_at)},
                          precision_at_1=mean(p1), r_precision=mean(rp), map_at_r=mean(ap), num_queries=q,
                          num_queries_without_positive=int(q - scored.sum()), k=k)


def _checked(query, query_labels, reference, reference_labels, ref_includes_query: bool, recall_at, block_size: int):
  """:func:`retrieval_metrics`' inputs as arrays, or a ``ValueError`` naming what is wrong with them and the fix."""
  query, query_labels = check_embeddings("query", query, "query_labels", query_labels)
  reference, reference_labels = check_embeddings("reference", reference, "reference_labels", reference_labels)
  q, n = len(query), len(reference)
  if query.shape[1] != reference.shape[1]:
    raise ValueError(f"query has dim {query.shape[1]} but reference has dim {reference.shape[1]}; embed both with the same model")
  self_count = int(bool(ref_includes_query))
  if ref_includes_query:
    if n < q:
      raise ValueError(f"ref_includes_query=True needs query i to be reference i, but reference has {n} rows and query {q}; "
                       "put the queries first in the reference set or pass ref_includes_query=False")
    differs = (query != reference[:q]).any(axis=1) | (query_labels != reference_labels[:q])
    if differs.any():
      raise ValueError(f"ref_includes_query=True but query {int(np.argmax(differs))} differs from reference "
                       f"{int(np.argmax(differs))} (embedding or label); the queries must be the first {q} references")
  available = n - self_count
  if available < 1:
    raise ValueError("the reference set holds nothing but the query itself; pass a larger reference set")
  recall_at = tuple(int(kk) for kk in recall_at)
  for kk in recall_at:
    if not 1 <= kk <= available:
      raise ValueError(f"recall_at K={kk} must be in [1, {available}], the reference items a query can retrieve "
                       f"({n} reference items{' minus itself' if self_count else ''}); drop it from recall_at")
  if block_size < 1:
    raise ValueError(f"block_size={block_size} must be a positive int")
  return query, query_labels, reference, reference_labels, recall_at

