r"""Training diagnostics of one update: how it moved the episode's embeddings (DR paper, Sec. 3.1).

Pure, jittable functions of the embeddings of one episode's images before an update
(:math:`X`) and after it (:math:`Y`, the same images, same augmentation):

* Procrustes scale :math:`\hat\alpha = \langle X, Y\rangle_F / \|X\|_F^2`, the least-squares
  :math:`\alpha` in :math:`\min_\alpha \|Y - \alpha X\|_F` (on centred point sets);
* norm ratio :math:`\varphi = \|Y - \hat\alpha X\|_F / \|Y - X\|_F \in [0, 1]`: the part of the
  change that is not a rescaling, :math:`\approx 0` when the update only rescaled the space;
* distance ratios :math:`\psi_{i,c} = d_{\text{after}}(x'_i, c) / d_{\text{before}}(x'_i, c)` of
  each query to each class (raw, uncentred embeddings; class representatives recomputed under
  each parameter set), and their geometric means :math:`\psi_{\text{con}}` over same-class
  pairs (:math:`N Q` of them) and :math:`\psi_{\text{div}}` over different-class pairs
  (:math:`N (N-1) Q`);
* con-alpha :math:`= \psi_{\text{con}} / \hat\alpha`, div-alpha
  :math:`= \psi_{\text{div}} / \hat\alpha`, con-div :math:`=` con-alpha / div-alpha
  :math:`= \psi_{\text{con}} / \psi_{\text{div}}`. "Properly learned": con-alpha < 1,
  div-alpha > 1, con-div < 1 (queries move to their own class faster than the space grows).

Undefined values are NaN, never an error, so that a training loop can log them and the
analysis can count and exclude them (:mod:`fewshot.analysis.stats`):

* :math:`\|Y - X\|_F = 0` (the update did not move the embedding) makes :math:`\varphi` NaN;
* :math:`\|X\|_F = 0` (a collapsed embedding) makes :math:`\hat\alpha`, the norm ratio and the
  alpha ratios NaN (con-div, a ratio of distance ratios only, stays defined).

A negative :math:`\hat\alpha` (an update that turned the point set inside out; not seen from
small steps) is returned as is and makes con-alpha and div-alpha negative: their geometric
mean across checkpoints is then undefined, which :func:`fewshot.analysis.stats.geometric_mean` reports.

Zero distances are not NaN: squared class distances are clamped at the dtype's smallest
normal number before the log (:math:`\log \psi = \tfrac12(\log d^2_{\text{after}} -
\log d^2_{\text{before}})`). A zero after-distance (a query landing exactly on its class
representative) then gives a tiny but finite :math:`\psi` (:math:`\approx 10^{-19} /
d_{\text{before}}` in float32) that drives the geometric mean towards 0 as it should, instead of
a :math:`-\infty` log; a zero before-distance gives a huge finite :math:`\psi`; both zero gives
:math:`\psi = 1`.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from fewshot import heads
from fewshot.analysis.measures import FIELDS

Array = chex.Array
CENTRE_MODES = ("points", "features")  # what centre() does; --centring both records under each
CENTRED = ("alpha", "norm_ratio", "con_alpha", "div_alpha")  # the diagnostics the centring changes (psi is uncentred)



def _as_float(x: Array) -> Array:
  # At least float32: bfloat16 embeddings would lose the small differences Y - X in the sums.
  x = jnp.asarray(x)
  return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def centre(points: Array, mode: str = "points") -> Array:
  r"""Centres an ``[n, d]`` point set.

  * ``"points"`` (the paper, default): subtract the mean point,
    :math:`x_i - \tfrac1n \sum_j x_j`. This removes a translation of the whole set, so
    :math:`\hat\alpha` and :math:`\varphi` measure only how the update scaled and reshaped it.
  * ``"features"`` (the authors' reference code): subtract each point's mean over its features,
    :math:`x_{ik} - \tfrac1d \sum_l x_{il}`. This removes the component of every point along
    :math:`(1, \dots, 1)`, which is not a translation of the set: a shift of all points by the
    same vector still changes :math:`\hat\alpha` and :math:`\varphi` unless that vector is
    constant across features. Offered only to reproduce the reference.
  """
  if mode not in CENTRE_MODES:
    raise ValueError(f"Unknown centring {mode!r}; choose one of {', '.join(CENTRE_MODES)}.")
  chex.assert_rank(points, 2)
  axis = 0 if mode == "points" else 1
  return points - points.mean(axis=axis, keepdims=True)


def procrustes_scale(x: Array, y: Array) -> Array:
  r"""Least-squares scale :math:`\hat\alpha = \langle X, Y\rangle_F / \|X\|_F^2` of centred sets.

  NaN when :math:`\|X\|_F = 0`, where every :math:`\alpha` fits equally well.
  """
  chex.assert_rank([x, y], 2)
  chex.assert_equal_shape([x, y])
  x_sq = jnp.sum(x * x)
  return jnp.where(x_sq > 0, jnp.sum(x * y) / jnp.where(x_sq > 0, x_sq, 1.0), jnp.nan)


def norm_ratio(x: Array, y: Array, alpha: Array) -> Array:
  r"""Norm ratio :math:`\varphi = \|Y - \hat\alpha X\|_F / \|Y - X\|_F` of centred sets.

  In :math:`[0, 1]` for the least-squares :math:`\hat\alpha` (it is the best :math:`\alpha`,
  so it does at least as well as :math:`\alpha = 1`). NaN when :math:`\|Y - X\|_F = 0`: an
  update that did not move the embedding has no direction to judge. The analysis records such
  checkpoints as undefined, counts them and excludes them from its statistics.
  """
  chex.assert_rank([x, y], 2)
  chex.assert_equal_shape([x, y])
  change = jnp.sqrt(jnp.sum(jnp.square(y - x)))
  residual = jnp.sqrt(jnp.sum(jnp.square(y - alpha * x)))
  return jnp.where(change > 0, residual / jnp.where(change > 0, change, 1.0), jnp.nan)


def _log_class_distances(support, support_labels, query, way, classifier):
  # A classifier name is the paper's class distance (Euclidean); a head value brings its own.
  head = heads.DistanceHead(classifier=classifier) if isinstance(classifier, str) else classifier
  return heads.log_class_distances(head, support, support_labels, query, way)


def log_distance_ratios(
    before_support: Array,
    before_query: Array,
    after_support: Array,
    after_query: Array,
    support_labels: Array,
    way: int,
    classifier: str | heads.Head = "proto",
) -> Array:
  r""":math:`\log \psi_{i,c}`, ``[n_query, way]``; see :func:`distance_ratios`."""
  chex.assert_equal_shape([before_support, after_support])
  chex.assert_equal_shape([before_query, after_query])
  before = _log_class_distances(_as_float(before_support), support_labels, _as_float(before_query), way, classifier)
  after = _log_class_distances(_as_float(after_support), support_labels, _as_float(after_query), way, classifier)
  return after - before


def distance_ratios(
    before_support: Array,
    before_query: Array,
    after_support: Array,
    after_query: Array,
    support_labels: Array,
    query_labels: Array,
    way: int,
    classifier: str | heads.Head = "proto",
) -> Array:
  r"""Distance ratios :math:`\psi_{i,c} = d_{\text{after}}(x'_i, c) / d_{\text{before}}(x'_i, c)`.

  Args:
    before_support, after_support: ``[n_support, d]`` raw (uncentred) support embeddings
      before and after the update.
    before_query, after_query: ``[n_query, d]`` raw query embeddings before and after.
    support_labels: ``[n_support]`` episode labels; class representatives are recomputed
      from each support set, so :math:`d_{\text{after}}` uses the after-update prototypes
      or nearest support points.
    query_labels: ``[n_query]``, only checked for shape here (:math:`\psi` is defined for
      every (query, class) pair); :func:`episode_diagnostics` splits by it.
    way: number of classes (static).
    classifier: the model's class distance (static): ``"proto"`` or ``"nn"`` (Euclidean), or a head value
      with a class distance (:mod:`fewshot.heads`). The paper uses the model's own; the reference code always
      uses Euclidean prototypes.

  Returns:
    ``[n_query, way]`` ratios; zero distances are handled as in the module docstring.
  """
  chex.assert_rank(query_labels, 1)
  chex.assert_equal_shape_prefix([before_query, query_labels], 1)
  return jnp.exp(log_distance_ratios(
      before_support, before_query, after_support, after_query, support_labels, way, classifier))


def episode_diagnostics(
    before_support: Array,
    before_query: Array,
    after_support: Array,
    after_query: Array,
    support_labels: Array,
    query_labels: Array,
    way: int,
    classifier: str | heads.Head | None = "proto",
    centring: str = "points",
) -> dict[str, Array]:
  r"""All diagnostics of one update, as float32 scalars keyed by :data:`FIELDS`.

  :math:`X` and :math:`Y` for :math:`\hat\alpha` and :math:`\varphi` are all the episode's
  points (support then query), each set centred by ``centring`` (:func:`centre`);
  :math:`\psi` uses the raw embeddings (:func:`distance_ratios`). ``way``, ``classifier``
  and ``centring`` are static under ``jax.jit``; ``classifier=None`` (a head without a class
  distance) leaves :math:`\psi` and the ratios built on it NaN.

  >>> import numpy as np
  >>> s, q = np.eye(4, dtype=np.float32)[:2], np.eye(4, dtype=np.float32)[2:]
  >>> d = episode_diagnostics(s, q, 2 * s, 2 * q, np.array([0, 1]), np.array([0, 1]), way=2)
  >>> [round(float(d[k]), 4) for k in ("alpha", "norm_ratio", "con_alpha", "con_div")]
  [2.0, 0.0, 1.0, 1.0]
  """
  chex.assert_rank([support_labels, query_labels], 1)
  chex.assert_equal_shape([before_support, after_support])
  chex.assert_equal_shape([before_query, after_query])
  x = centre(jnp.concatenate([_as_float(before_support), _as_float(before_query)]), centring)
  y = centre(jnp.concatenate([_as_float(after_support), _as_float(after_query)]), centring)
  alpha = procrustes_scale(x, y)
  phi = norm_ratio(x, y, alpha)

  if classifier is None:
    psi_con = psi_div = jnp.float32(jnp.nan)
  else:
    log_psi = log_distance_ratios(
        before_support, before_query, after_support, after_query, support_labels, way, classifier)
    own = jax.nn.one_hot(query_labels, way, dtype=log_psi.dtype)
    # Geometric means as exp of mean logs over the own-class / other-class masks.
    psi_con = jnp.exp(jnp.sum(own * log_psi) / jnp.sum(own))
    psi_div = jnp.exp(jnp.sum((1.0 - own) * log_psi) / jnp.sum(1.0 - own))
  con_alpha, div_alpha = psi_con / alpha, psi_div / alpha
  # con-div as psi_con / psi_div (equal to con-alpha / div-alpha), so it stays defined when
  # alpha is not (a collapsed X).
  values = (alpha, phi, psi_con, psi_div, con_alpha, div_alpha, psi_con / psi_div)
  return {k: v.astype(jnp.float32) for k, v in zip(FIELDS, values)}


def fields(centring: str) -> tuple[str, ...]:
  """The diagnostics an update records under ``centring``: :data:`FIELDS`, and under ``"both"`` the reference code's
  centred ones after them as ``<name>_features``.

  >>> fields("both")[-2:]
  ('con_alpha_features', 'div_alpha_features')
  """
  return FIELDS + (tuple(f"{name}_features" for name in CENTRED) if centring == "both" else ())


def update_diagnostics(before_support: Array, before_query: Array, after_support: Array, after_query: Array,
                       support_labels: Array, query_labels: Array, way: int,
                       classifier: str | heads.Head | None = "proto", centring: str = "points") -> dict[str, Array]:
  """:func:`episode_diagnostics` keyed by :func:`fields`: under ``centring="both"`` the paper's (points) and, for the
  diagnostics the centring changes, the reference code's (features) from the same embeddings.
  """
  args = (before_support, before_query, after_support, after_query, support_labels, query_labels, way, classifier)
  if centring != "both":
    return episode_diagnostics(*args, centring=centring)
  features = episode_diagnostics(*args, centring="features")
  return {**episode_diagnostics(*args, centring="points"), **{f"{k}_features": features[k] for k in CENTRED}}
