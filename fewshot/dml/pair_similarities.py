r"""Statistics of an embedding's positive and negative pairs: mean similarities, similarity histograms, their JSD.

Positive pairs share a label, negative pairs do not; each unordered pair :math:`i < j` counts
once. The similarity is the inner product of the L2-normalised embeddings (the cosine
similarity). :func:`pair_statistics` gives the two means in closed form on the host;
:func:`pair_similarity_histograms` bins every pair in tiles on the device, never holding the
:math:`n \times n` matrix; :func:`histogram_jsd` compares the two area-normalised histograms,
the JSD of Oi, Kawakami & Naemura between positive-pair and negative-pair inner products
(docs/protocol.md#other-measures-of-an-embedding).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from fewshot import distances
from fewshot.dml.metrics import check_embeddings

HISTOGRAM_BLOCK_SIZE = 1024


@dataclasses.dataclass(frozen=True)
class PairStatistics:
  """Mean cosine similarity of the unordered positive and negative pairs (NaN where there are none)."""

  mean_positive: float
  mean_negative: float
  num_positive_pairs: int
  num_negative_pairs: int


def pair_statistics(embeddings, labels) -> PairStatistics:
  r"""Mean inner product of the positive and of the negative pairs of the L2-normalised embeddings.

  Over unordered pairs :math:`i < j` of one set (positive: same label), in closed form from
  per-class sums :math:`S_c = \sum_{i \in c} \bar x_i`, in float64 on the host, without a
  pairwise matrix:

  .. math::
    \sum_{i<j,\ y_i = y_j} \bar x_i^\top \bar x_j = \tfrac12 \Big(\sum_c \|S_c\|^2 - \sum_i \|\bar x_i\|^2\Big), \qquad
    \sum_{i<j} \bar x_i^\top \bar x_j = \tfrac12 \Big(\big\|\textstyle\sum_i \bar x_i\big\|^2 - \sum_i \|\bar x_i\|^2\Big),

  the negative sum being their difference, divided by :math:`\sum_c \binom{n_c}{2}` and
  :math:`\binom{n}{2} - \sum_c \binom{n_c}{2}` pairs.
  """
  x, labels = check_embeddings("embeddings", embeddings, "labels", labels)
  x = distances.l2_normalize(x.astype(np.float64))
  _, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
  order = np.argsort(inverse, kind="stable")
  class_sums = np.add.reduceat(x[order], np.concatenate([[0], np.cumsum(counts)[:-1]]), axis=0)
  squared_norms = float(np.sum(x * x))
  total = x.sum(axis=0)
  positive_sum = 0.5 * (float(np.sum(class_sums * class_sums)) - squared_norms)
  all_sum = 0.5 * (float(total @ total) - squared_norms)
  n = len(x)
  num_positive = int(np.sum(counts.astype(np.int64) * (counts - 1) // 2))
  num_negative = n * (n - 1) // 2 - num_positive
  return PairStatistics(mean_positive=positive_sum / num_positive if num_positive else math.nan,
                        mean_negative=(all_sum - positive_sum) / num_negative if num_negative else math.nan,
                        num_positive_pairs=num_positive, num_negative_pairs=num_negative)


def histogram_edges(bins: int) -> np.ndarray:
  """``bins + 1`` equal-width edges over [-1, 1]: float32 values (held as float64), those the device compares against."""
  return np.linspace(-1.0, 1.0, bins + 1).astype(np.float32).astype(np.float64)


@functools.partial(jax.jit, static_argnames=("n", "bins", "block_size"))
def _pair_histograms(x, labels, edges, *, n, bins, block_size):
  nb = x.shape[0] // block_size
  xb = x.reshape(nb, block_size, -1)
  lb = labels.reshape(nb, block_size)
  rows = jnp.arange(block_size)

  def row_block(i):
    def tile(j, counts):  # tiles (i, j >= i): each unordered pair once, half the products of full rows
      s = jnp.clip(distances.cosine_similarity(xb[i], xb[j]), -1.0, 1.0)
      # np.histogram's bins, [e_t, e_t+1) and the last closed: an arithmetic guess, then one
      # correction against the float32 edges themselves so that rounding never moves a pair.
      t = jnp.clip(jnp.floor((s + 1.0) * (bins / 2)).astype(jnp.int32), 0, bins - 1)
      t = t - (s < edges[t]) + ((s >= edges[t + 1]) & (t < bins - 1))
      gi, gj = i * block_size + rows, j * block_size + rows
      valid = (gi[:, None] < gj[None, :]) & (gj[None, :] < n)
      code = jnp.where(valid, t + bins * (lb[i][:, None] == lb[j][None, :]), 2 * bins)
      return counts + jax.ops.segment_sum(jnp.ones(code.size, jnp.int32), code.ravel(), 2 * bins + 1)

    return jax.lax.fori_loop(i, nb, tile, jnp.zeros(2 * bins + 1, jnp.int32))

  # int32 per row block (fewer than 2**31 pairs each), summed in int64 on the host
  return jax.lax.map(row_block, jnp.arange(nb))


def pair_similarity_histograms(embeddings, labels, *, bins: int = 100,
                               block_size: int = HISTOGRAM_BLOCK_SIZE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  r"""Histograms of the cosine similarities of all unordered positive and negative pairs: ``(pos, neg, edges)``.

  ``pos`` and ``neg`` are int64 ``[bins]`` counts over ``bins`` equal-width bins of
  :math:`[-1, 1]` (``edges``, ``[bins + 1]``; bins are half-open except the last, as
  ``np.histogram``; similarities that rounding puts just past :math:`\pm 1` are clipped
  into the end bins). Pairs :math:`i < j` are visited in ``[block_size, block_size]`` tiles
  on the device, each pair once, never holding the :math:`n \times n` matrix. The
  inner products of L2-normalised embeddings are the cosine similarities (Oi, Kawakami & Naemura);
  compare the two area-normalised histograms with :func:`histogram_jsd`.
  """
  x, labels = check_embeddings("embeddings", embeddings, "labels", labels)
  if not 1 <= bins <= 10_000:
    raise ValueError(f"bins={bins} must be in [1, 10000]")
  n = len(x)
  if block_size < 1 or block_size * (n + block_size) >= 2**31:
    raise ValueError(f"block_size={block_size} must be positive and block_size * num_items below 2**31 (int32 counts)")
  pad = -n % block_size
  _, inverse = np.unique(labels, return_inverse=True)
  edges = histogram_edges(bins)
  counts = _pair_histograms(jnp.asarray(np.pad(x, ((0, pad), (0, 0)))), jnp.asarray(np.pad(inverse, (0, pad)).astype(np.int32)),
                            jnp.asarray(edges, jnp.float32), n=n, bins=int(bins), block_size=int(block_size))
  counts = np.asarray(counts).astype(np.int64).sum(axis=0)
  return counts[bins:2 * bins], counts[:bins], edges


def histogram_jsd(p_counts, q_counts) -> float:
  r"""Jensen-Shannon divergence in bits of two histograms, each normalised to area 1: in [0, 1].

  .. math::
    D_{JS}(P \| Q) = \tfrac12 \mathrm{KL}(P \| M) + \tfrac12 \mathrm{KL}(Q \| M), \qquad M = \tfrac12 (P + Q),
    \qquad \mathrm{KL}(P \| M) = \sum_i P_i \log_2 \frac{P_i}{M_i},

  with :math:`0 \log 0 = 0`: 0 for identical shapes, 1 for disjoint supports. Normalising each
  histogram to area 1 removes the effect of the number of classes (Oi, Kawakami & Naemura). This is
  the divergence; ``scipy.spatial.distance.jensenshannon(p, q, base=2)`` is its square root.

  >>> histogram_jsd([1, 1, 0, 0], [0, 0, 5, 5]), histogram_jsd([1, 2, 3], [2, 4, 6])
  (1.0, 0.0)
  """
  p, q = np.asarray(p_counts, np.float64), np.asarray(q_counts, np.float64)
  if p.ndim != 1 or p.shape != q.shape:
    raise ValueError(f"the histograms must be 1-D of one length, got shapes {p.shape} and {q.shape}")
  for name, h in (("p_counts", p), ("q_counts", q)):
    if not np.isfinite(h).all() or (h < 0).any() or h.sum() <= 0:
      raise ValueError(f"{name} must be finite, non-negative counts with a positive total")
  p, q = p / p.sum(), q / q.sum()
  m = 0.5 * (p + q)

  def kl(a):
    nz = a > 0
    return float(np.sum(a[nz] * np.log2(a[nz] / m[nz])))

  return float(np.clip(0.5 * kl(p) + 0.5 * kl(q), 0.0, 1.0))
