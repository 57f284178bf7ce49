r"""Exact k nearest neighbours in blocks of queries, on one device or over a reference sharded across devices.

The full :math:`Q \times N` distance matrix is never held: each block of ``block_size``
queries computes its ``[block_size, N]`` distances and keeps the k smallest. With ``mesh``,
the reference is split over the mesh's devices: each computes ``[block_size, N / D]`` against
its own shard and its k smallest, and the ``D * k`` candidates are merged, so a gallery larger
than one device's memory is searched exactly, with the same neighbours and the same tie rule
(the lower reference index first) as on one device.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from fewshot import distances

Array = jax.Array
Distance = Callable[[Array, Array], Array]

# [64, N] float32 distance blocks: 26 MB at N = 100,000. The fastest of 32-2048 on a 2-core CPU
# (benchmarks/bench_retrieval.py --sweep-blocks: 0.37 ms/query at 64, 0.51 at 256, 1.0 at 512,
# where the block falls out of cache); k-means assignment is as fast at 64 as at 256.
DEFAULT_BLOCK_SIZE = 64
_SIMILARITIES = {distances.cosine_similarity: "cosine_distance", distances.inner_product: "a negated inner_product"}


def check_distance(distance: Distance) -> None:
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


def _drop_self(dist: Array, idx: Array, start: Array, k: int) -> tuple[Array, Array]:
  """From ``k + 1`` neighbours, drop query i's own index i (or, where it is not among them, the extra one): the
  same list as the full ranking with item i removed, ties included, never confused with a duplicate at distance 0.
  """
  is_self = idx == (start + jnp.arange(idx.shape[0]))[:, None]
  drop = is_self | (~is_self.any(axis=1, keepdims=True) & (jnp.arange(k + 1) == k))
  keep = jnp.argsort(drop, axis=1, stable=True)[:, :k]
  return jnp.take_along_axis(dist, keep, axis=1), jnp.take_along_axis(idx, keep, axis=1)


def _local_knn(qb: Array, reference: Array, offset, n: int, k: int, distance: Distance, chunk: int):
  """The ``k`` nearest of ``reference`` (rows ``offset ..`` of the padded gallery of ``n`` real items) to each query."""
  d = distance(qb, reference)
  if not isinstance(offset, int) or reference.shape[0] > n:  # a shard, or a padded gallery
    # padding rows are never neighbours: +inf sorts after every real item
    d = jnp.where(offset + jnp.arange(reference.shape[0]) < n, d, jnp.inf)
  dist, idx = _smallest_k(d, k, chunk)
  return dist, idx + offset


def block_neighbours(qb: Array, start: Array, reference: Array, n: int, k: int, distance: Distance,
                     exclude_self: bool, chunk: int, mesh: Mesh | None = None) -> tuple[Array, Array]:
  """Neighbours of one block of queries; ``reference`` is padded past ``n`` (to a multiple of ``chunk``, per shard).

  With ``mesh``, ``reference`` is sharded over its first axis: each device searches its shard,
  and the devices' candidates, gathered in device order (so in reference-index order), are
  merged by one ``top_k``, whose tie rule then is the lower reference index, as on one device.
  """
  wanted = k + int(exclude_self)
  if mesh is None:
    dist, idx = _local_knn(qb, reference, 0, n, wanted, distance, chunk)
  else:
    axis = mesh.axis_names[0]

    def search_shard(qb, shard):
      offset = jax.lax.axis_index(axis) * shard.shape[0]
      dist, idx = _local_knn(qb, shard, offset, n, wanted, distance, chunk)
      return jax.lax.all_gather(dist, axis, axis=1, tiled=True), jax.lax.all_gather(idx, axis, axis=1, tiled=True)

    candidates = jax.shard_map(search_shard, mesh=mesh, in_specs=(PartitionSpec(), PartitionSpec(axis)),
                               out_specs=(PartitionSpec(), PartitionSpec()), check_vma=False)(qb, reference)
    neg, pos = jax.lax.top_k(-candidates[0], wanted)
    dist, idx = -neg, jnp.take_along_axis(candidates[1], pos, axis=1)
  return _drop_self(dist, idx, start, k) if exclude_self else (dist, idx)


def map_blocks(fn, rows: tuple[Array, ...], block_size: int):
  """``fn(row_blocks, start)`` over blocks of the leading axis (padded with zeros), outputs unpadded."""
  q = rows[0].shape[0]
  nb = -(-q // block_size)
  padded = tuple(jnp.pad(r, [(0, nb * block_size - q)] + [(0, 0)] * (r.ndim - 1)).reshape(nb, block_size, *r.shape[1:])
                 for r in rows)
  starts = jnp.arange(nb, dtype=jnp.int32) * block_size
  out = jax.lax.map(lambda xs: fn(xs[:-1], xs[-1]), (*padded, starts))
  return jax.tree.map(lambda o: o.reshape(nb * block_size, *o.shape[2:])[:q], out)


def shard_reference(reference, k: int, mesh: Mesh | None) -> tuple[Array, int, int]:
  """The gallery padded for the search (on host or device), its real size and the chunk length of each search.

  On one device it is padded to a multiple of the chunk; over a mesh to ``D`` equal shards,
  each a multiple of the chunk, and placed sharded over the mesh's first axis.
  """
  n = reference.shape[0]
  shards = 1 if mesh is None else mesh.devices.size
  chunk = _chunk_size(-(-n // shards), k)
  per_shard = -(-n // shards)
  per_shard += -per_shard % chunk if chunk else 0
  padded = jnp.pad(jnp.asarray(reference), ((0, shards * per_shard - n), (0, 0)))
  if mesh is not None:
    padded = jax.device_put(padded, NamedSharding(mesh, PartitionSpec(mesh.axis_names[0])))
  return padded, n, chunk


@functools.partial(jax.jit, static_argnames=("n", "k", "chunk", "distance", "exclude_self", "block_size", "mesh"))
def _knn(query, reference, *, n, k, chunk, distance, exclude_self, block_size, mesh):
  search = lambda xs, s: block_neighbours(xs[0], s, reference, n, k, distance, exclude_self, chunk, mesh)  # noqa: E731
  return map_blocks(search, (query,), block_size)


def nearest_neighbours(query: Array, reference: Array, k: int, *, distance: Distance = distances.euclidean_matmul,
                       exclude_self: bool = False, block_size: int = DEFAULT_BLOCK_SIZE,
                       mesh: Mesh | None = None) -> tuple[Array, Array]:
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
  check_distance(distance)
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
  padded, n, chunk = shard_reference(reference, int(k) + bool(exclude_self), mesh)
  return _knn(query, padded, n=n, k=int(k), chunk=chunk, distance=distance, exclude_self=bool(exclude_self),
              block_size=int(block_size), mesh=mesh)
