r"""Exact retrieval metrics of an embedding, computed in blocks on the device.

Neighbours come from an exact k-nearest-neighbour search run over blocks of queries
(:func:`nearest_neighbours`), so the full :math:`Q \times N` distance matrix is never held:
a 100,000-item gallery queried against itself needs one ``[block_size, N]`` block at a time.
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

from fewshot import distances

Array = jax.Array
Distance = Callable[[Array, Array], Array]

# [64, N] float32 distance blocks: 26 MB at N = 100,000. The fastest of 32-2048 on a 2-core CPU
# (experiments/bench_retrieval.py --sweep-blocks: 0.37 ms/query at 64, 0.51 at 256, 1.0 at 512,
# where the block falls out of cache); k-means assignment is as fast at 64 as at 256.
DEFAULT_BLOCK_SIZE = 64
_SIMILARITIES = {distances.cosine_similarity: "cosine_distance", distances.inner_product: "a negated inner_product"}


def _check_distance(distance: Distance) -> None:
  if distance in _SIMILARITIES:
    raise ValueError(f"distance={distance.__name__} is a similarity (larger is closer) but neighbours are the smallest "
                     f"values; pass distances.{_SIMILARITIES[distance]} instead")


def _chunk_size(n: int, k: int) -> int:
  """Chunk length of :func:`_smallest_k`, or 0 where a plain ``top_k`` over the row is cheaper."""
  for c in (64, 16):  # 32-100 measured fastest for the chunk minima; 16 for large k
    if n >= 4 * c * k:
      return c
  return 0


def _smallest_k(d: Array, k: int, chunk: int) -> tuple[Array, Array]:
  r"""The ``k`` smallest entries of each row of ``d`` ``[B, n]`` and their indices, lower index first on ties.

  Same output as ``lax.top_k(-d, k)``, a few times faster for :math:`k \ll n`: XLA's CPU
  TopK costs several ns per element, a min-reduction a fraction of one. Rows are cut into
  contiguous chunks of ``chunk`` (``n`` a multiple of it); the ``k`` chunks with the smallest
  minima (lower chunk first on ties) hold the answer, because the k-th smallest chunk minimum
  :math:`\tau` bounds the k-th smallest entry from above, every entry below :math:`\tau` lies in a
  selected chunk, and the selected chunks whose minimum is :math:`\tau` supply at least the
  missing ties with lower indices than any unselected chunk. Candidates are gathered in
  increasing chunk order so that ``top_k``'s own tie rule is the original index order.
  """
  if not chunk:
    neg, idx = jax.lax.top_k(-d, k)
    return -neg, idx
  b, n = d.shape
  chunks = d.reshape(b, n // chunk, chunk)
  _, sel = jax.lax.top_k(-chunks.min(axis=2), k)
  sel = jnp.sort(sel, axis=1)
  candidates = jnp.take_along_axis(chunks, sel[:, :, None], axis=1).reshape(b, k * chunk)
  neg, pos = jax.lax.top_k(-candidates, k)
  return -neg, jnp.take_along_axis(sel, pos // chunk, axis=1) * chunk + pos % chunk


def _block_knn(qb: Array, start: Array, reference: Array, n: int, k: int, distance: Distance,
               exclude_self: bool, chunk: int) -> tuple[Array, Array]:
  """Neighbours of one block of queries; ``reference`` is padded to a multiple of ``chunk`` past ``n``."""
  d = distance(qb, reference)
  if reference.shape[0] > n:  # padding rows are never neighbours: +inf sorts after every real item
    d = jnp.where(jnp.arange(reference.shape[0]) < n, d, jnp.inf)
  if not exclude_self:
    return _smallest_k(d, k, chunk)
  # One extra neighbour, then drop query i's own index i (or, where it is not among them, the
  # extra one): the same list as the full ranking with item i removed, ties included, and
  # never confused with a duplicate at distance 0.
  dist, idx = _smallest_k(d, k + 1, chunk)
  is_self = idx == (start + jnp.arange(qb.shape[0]))[:, None]
  drop = is_self | (~is_self.any(axis=1, keepdims=True) & (jnp.arange(k + 1) == k))
  keep = jnp.argsort(drop, axis=1, stable=True)[:, :k]
  return jnp.take_along_axis(dist, keep, axis=1), jnp.take_along_axis(idx, keep, axis=1)


def _map_blocks(fn, rows: tuple[Array, ...], block_size: int):
  """``fn(row_blocks, start)`` over blocks of the leading axis (padded with zeros), outputs unpadded."""
  q = rows[0].shape[0]
  nb = -(-q // block_size)
  padded = tuple(jnp.pad(r, [(0, nb * block_size - q)] + [(0, 0)] * (r.ndim - 1)).reshape(nb, block_size, *r.shape[1:])
                 for r in rows)
  starts = jnp.arange(nb, dtype=jnp.int32) * block_size
  out = jax.lax.map(lambda xs: fn(xs[:-1], xs[-1]), (*padded, starts))
  return jax.tree.map(lambda o: o.reshape(nb * block_size, *o.shape[2:])[:q], out)


def _pad_reference(reference: Array, chunk: int) -> Array:
  n = reference.shape[0]
  return jnp.pad(reference, ((0, -n % chunk), (0, 0))) if chunk else reference


@functools.partial(jax.jit, static_argnames=("k", "distance", "exclude_self", "block_size"))
def _knn(query, reference, *, k, distance, exclude_self, block_size):
  n = reference.shape[0]
  chunk = _chunk_size(n, k + exclude_self)
  ref = _pad_reference(reference, chunk)
  return _map_blocks(lambda xs, s: _block_knn(xs[0], s, ref, n, k, distance, exclude_self, chunk), (query,), block_size)


def nearest_neighbours(query: Array, reference: Array, k: int, *, distance: Distance = distances.euclidean_matmul,
                       exclude_self: bool = False, block_size: int = DEFAULT_BLOCK_SIZE) -> tuple[Array, Array]:
  r"""Exact k nearest references of each query: ``(distances [Q, k], indices int32 [Q, k])``, nearest first.

  Queries are processed ``block_size`` at a time (padded to a multiple of it) under
  ``lax.map``; each block computes ``distance(block, reference)`` ``[block_size, N]`` and keeps
  its ``k`` smallest, so peak memory is :math:`O(\text{block\_size} \cdot N)`, never :math:`Q \times N`.
  Ties go to the lower reference index, exactly as ``lax.top_k`` on the full matrix.

  ``distance`` is any function of :mod:`fewshot.distances` where smaller is closer
  (``euclidean_matmul``, ``squared_euclidean_matmul``, ``angular``, ``cosine_distance``); rank
  by a similarity through its distance form. The difference forms (``euclidean``) are exact
  but hold ``[block_size, N, dim]``: keep them for small references. ``exclude_self=True`` means query ``i`` *is*
  reference ``i`` (the queries are the first ``Q`` references) and removes index ``i`` from
  its list, by index: a duplicate at distance 0 is still a neighbour. Traceable under ``jit``.

  >>> x = jnp.array([[0.0], [1.0], [3.0], [1.0]])
  >>> d, i = nearest_neighbours(x, x, 2, exclude_self=True)
  >>> i.tolist()  # 1 and 3 coincide: each is the other's nearest, self removed by index
  [[1, 3], [3, 0], [1, 3], [1, 0]]
  """
  _check_distance(distance)
  query, reference = jnp.asarray(query), jnp.asarray(reference)
  if query.ndim != 2 or reference.ndim != 2:
    raise ValueError(f"query and reference must be [num_items, dim] matrices, got shapes {query.shape} and {reference.shape}")
  if query.shape[1] != reference.shape[1]:
    raise ValueError(f"query has dim {query.shape[1]} but reference has dim {reference.shape[1]}; embed both with the same model")
  available = reference.shape[0] - int(exclude_self)
  if exclude_self and reference.shape[0] < query.shape[0]:
    raise ValueError(f"exclude_self=True needs query i to be reference i, but reference has {reference.shape[0]} rows "
                     f"and query {query.shape[0]}")
  if not 1 <= k <= available:
    raise ValueError(f"k={k} must be in [1, {available}], the reference items a query can retrieve")
  if block_size < 1:
    raise ValueError(f"block_size={block_size} must be a positive int")
  return _knn(query, reference, k=int(k), distance=distance, exclude_self=bool(exclude_self), block_size=int(block_size))


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


@functools.partial(jax.jit, static_argnames=("k", "recall_at", "distance", "exclude_self", "block_size"))
def _retrieval(query, query_labels, r, reference, reference_labels, *, k, recall_at, distance, exclude_self, block_size):
  n = reference.shape[0]
  chunk = _chunk_size(n, k + exclude_self)
  ref = _pad_reference(reference, chunk)
  position = jnp.arange(1, k + 1)

  def block(xs, start):
    qb, lb, rb = xs
    _, idx = _block_knn(qb, start, ref, n, k, distance, exclude_self, chunk)
    relevant = reference_labels[idx] == lb[:, None]  # rows of padding queries are sliced off after the map
    within_r = relevant & (position <= rb[:, None])
    r_safe = jnp.maximum(rb, 1).astype(jnp.float32)
    hits_within_r = within_r.sum(axis=1)  # an int: R-Precision divided in float64 on the host
    precision_at_i = jnp.cumsum(within_r, axis=1) / position
    map_at_r = jnp.where(within_r, precision_at_i, 0.0).sum(axis=1) / r_safe
    hits = jnp.stack([relevant[:, :kk].any(axis=1) for kk in recall_at], axis=1) if recall_at else relevant[:, :0]
    return hits, relevant[:, 0], hits_within_r, map_at_r

  return _map_blocks(block, (query, query_labels, r), block_size)


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
                      block_size: int = DEFAULT_BLOCK_SIZE) -> RetrievalMetrics:
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
  blocks (:func:`nearest_neighbours`), so memory is :math:`O(\text{block\_size} \cdot (N + k))`.
  Ties in distance go to the lower reference index. Per-query AP is summed in float32 on the
  device (relative error ~1e-7), R-Precision counted exactly; the means are float64.
  """
  _check_distance(distance)
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

  classes, inverse = np.unique(np.concatenate([query_labels, reference_labels]), return_inverse=True)
  q_lab, r_lab = inverse[:q].astype(np.int32), inverse[q:].astype(np.int32)
  r = (np.bincount(r_lab, minlength=len(classes))[q_lab] - self_count).astype(np.int32)
  k = max(1, int(r.max()), *recall_at)
  hits, p1, hits_within_r, ap = _retrieval(jnp.asarray(query), jnp.asarray(q_lab), jnp.asarray(r), jnp.asarray(reference),
                                jnp.asarray(r_lab), k=k, recall_at=recall_at, distance=distance,
                                exclude_self=bool(ref_includes_query), block_size=int(block_size))
  scored = r > 0
  rp = np.asarray(hits_within_r) / np.maximum(r, 1)

  def mean(v) -> float:
    v = np.asarray(v, np.float64)[scored]
    return float(v.mean()) if len(v) else math.nan

  return RetrievalMetrics(recall_at_k={kk: mean(np.asarray(hits)[:, i]) for i, kk in enumerate(recall_at)},
                          precision_at_1=mean(p1), r_precision=mean(rp), map_at_r=mean(ap), num_queries=q,
                          num_queries_without_positive=int(q - scored.sum()), k=k)
