r"""Few-shot heads: class distances (prototype or 1-NN, under a distance) and logits (softmax or distance ratio).

A head is a value (:class:`Head`): its parameters' initialiser, its logits, and optionally its class distance (what
the training diagnostics' :math:`\psi` compares). The paper's four heads are :class:`DistanceHead` values; any other
object with the same methods trains, is diagnosed and is analysed like them.

For a query embedding :math:`f(x')`, the support set :math:`S_c` of class :math:`c` and a distance :math:`D`
(``--distance``, below):

* prototype distance: :math:`D(x', c) = D(f(x'), p_c)`, :math:`p_c = \frac{1}{|S_c|}\sum_{x \in S_c} f(x)`
  (under ``cosine`` and ``angular`` the mean of the L2-normalised :math:`\bar f(x)`: the normalised embedding space
  of the DR paper's Appendix E);
* 1-NN distance: :math:`D(x', c) = \min_{x \in S_c} D(f(x'), f(x))`;
* softmax formulation (ProtoNet_S, 1-NN_S): :math:`\text{logit}_c = -D(x', c)`;
* distance-ratio formulation (ProtoNet_DR, 1-NN_DR; Kim et al., arXiv 2201.08676):
  :math:`p(c \mid x') = \delta_c^{-\theta} / \sum_{c'} \delta_{c'}^{-\theta}` with :math:`\theta = e^{\rho}` and
  :math:`\delta` the distance itself, :math:`\sqrt D` where :math:`D` is a square; i.e.
  :math:`\text{logit}_c = -\theta k \log(D(x', c) + \epsilon)`, :math:`k = \tfrac12` for a square, else 1.

* ``squared_euclidean`` (the paper's, default): :math:`D = \|f - r_c\|^2`; DR :math:`p_c \propto d^{-\theta}`;
* ``euclidean`` (easyfsl's ProtoNet): :math:`D = d = \sqrt{\|f - r_c\|^2 + \epsilon}`; DR
  :math:`p_c \propto d^{-\theta}` (the same DR head as ``squared_euclidean``: :math:`\theta` absorbs the power);
* ``cosine`` (NormFace with scale 1): :math:`D = 1 - \cos(f, r_c)`; DR :math:`p_c \propto (1 - \cos)^{-\theta}`;
* ``angular`` (the DR paper's Appendix E, its Eqs. 4 and 5 on the angle): :math:`D = \angle(f, r_c)^2`; DR
  :math:`p_c \propto \angle^{-\theta}`.

:math:`r_c` is the class representative (prototype or nearest support point). Scaling every embedding by
:math:`\alpha > 0` multiplies every Euclidean :math:`d` by :math:`\alpha`, which the distance ratio cancels and the
softmax does not; cosine and angle ignore the scale of each point, under both formulations (and bound the softmax's
logits, to :math:`[-2, 0]` and :math:`[-\pi^2, 0]`: a fixed temperature, which a custom head can learn). The
:math:`\epsilon = 10^{-10}` keeps a query on its representative finite, so the DR head's invariance holds for
:math:`D \gg \epsilon`; its certainty at a representative (:math:`p \to 1`) holds under every distance.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple

import chex
import jax
import jax.numpy as jnp
import optax

from fewshot import distances
from fewshot.choices import CLASSIFIERS, DISTANCES, HEADS, MODEL_NAMES, model_name  # noqa: F401  (the heads' names)
from fewshot.errors import ConfigError

Array = chex.Array

RHO_INIT = 2.0
DR_EPS = 1e-10


class DistanceForm(NamedTuple):
  pairwise: Callable[[chex.Array, chex.Array], chex.Array]  # [n, d], [m, d] -> [n, m] values of D
  squared: bool  # D is the square of the distance the DR formulation takes
  normalised: bool  # embeddings are L2-normalised before prototypes are taken


# Every pairwise form is by difference: exact at coincident points, where the DR logit's slope is largest.
DISTANCE_FORMS = {
    "squared_euclidean": DistanceForm(distances.squared_euclidean, squared=True, normalised=False),
    "euclidean": DistanceForm(distances.euclidean, squared=False, normalised=False),
    "cosine": DistanceForm(distances.cosine_by_difference, squared=False, normalised=True),
    "angular": DistanceForm(lambda x, y: jnp.square(distances.angular_by_difference(x, y)), True, normalised=True),
}
assert tuple(DISTANCE_FORMS) == DISTANCES


def _check_choice(value: str, choices: tuple[str, ...], what: str) -> None:
  if value not in choices:
    raise ValueError(f"Unknown {what} {value!r}; choose one of {', '.join(choices)}.")


def prototypes(support: Array, support_labels: Array, way: int) -> Array:
  """Class means of the support embeddings: ``[n_support, d] -> [way, d]``.

  Summed by segment, not as ``one_hot.T @ support`` (the same bits), whose gradient jaxlib 0.10.2's XLA:CPU hands
  to a YNNPACK kernel that crashes the process from ~512 dimensions (jax-ml/jax#39257; BUILD_NOTES, "A crash").
  """
  chex.assert_rank([support, support_labels], [2, 1])
  sums = jax.ops.segment_sum(support, support_labels, num_segments=way)
  counts = jax.ops.segment_sum(jnp.ones_like(support_labels, support.dtype), support_labels, num_segments=way)
  return sums / jnp.maximum(counts, 1.0)[:, None]


def class_distances(
    support: Array, support_labels: Array, query: Array, way: int, classifier: str = "proto",
    distance: str | Callable[[Array, Array], Array] = "squared_euclidean",
) -> Array:
  """Class distances ``D(x', c)`` of each query to each class under a distance: ``[n_query, way]``.

  Args:
    support: ``[n_support, d]`` support embeddings.
    support_labels: ``[n_support]`` episode labels in ``0..way-1``.
    query: ``[n_query, d]`` query embeddings.
    way: number of classes in the episode (static).
    classifier: ``"proto"`` (distance to the class mean) or ``"nn"`` (to the nearest support point).
    distance: a name of :data:`DISTANCE_FORMS` (the module docstring's :math:`D`), or a pairwise function
      ``[n, d], [m, d] -> [n, m]`` applied to the raw embeddings.

  >>> class_distances(jnp.array([[0.0], [2.0], [5.0]]), jnp.array([0, 0, 1]), jnp.array([[4.0]]), 2).tolist()
  [[9.0, 1.0]]
  """
  _check_choice(classifier, CLASSIFIERS, "classifier")
  chex.assert_rank([support, support_labels, query], [2, 1, 2])
  chex.assert_equal_shape_prefix([support, support_labels], 1)
  if isinstance(distance, str):
    _check_choice(distance, DISTANCES, "distance")
    form = DISTANCE_FORMS[distance]
    pairwise = form.pairwise
    if form.normalised:
      support, query = distances.l2_normalize(support), distances.l2_normalize(query)
  else:
    pairwise = distance
  if classifier == "proto":
    return pairwise(query, prototypes(support, support_labels, way))
  to_support = pairwise(query, support)  # [n_query, n_support]
  in_class = support_labels[None, :] == jnp.arange(way)[:, None]  # [way, n_support]
  masked = jnp.where(in_class[None], to_support[:, None, :], jnp.inf)
  # The nearest by index, not masked.min(): min's gradient finds its argument again by equality with the result,
  # which a GPU's recomputation can miss by a rounding (0/0: NaN, seen at a query on its support point on an H100).
  nearest = jnp.argmin(masked, axis=-1)
  return jnp.take_along_axis(masked, nearest[..., None], axis=-1)[..., 0]


def class_squared_distances(
    support: Array, support_labels: Array, query: Array, way: int, classifier: str = "proto",
    squared_distance: Callable[[Array, Array], Array] = distances.squared_euclidean,
) -> Array:
  """Squared Euclidean class distances ``d(x', c)^2`` (the paper's), ``[n_query, way]``; see :func:`class_distances`."""
  return class_distances(support, support_labels, query, way, classifier, squared_distance)


def softmax_logits(distance: Array) -> Array:
  """Softmax formulation: ``logits = -D`` (``-d^2`` under the paper's squared Euclidean distance)."""
  return -distance


def dr_logits(distance: Array, rho: Array, eps: float = DR_EPS, squared: bool = True) -> Array:
  r"""Distance-ratio formulation: ``-exp(rho) * log(sqrt(D + eps))`` for a squared ``D``, else ``log(D + eps)``.

  For the paper's :math:`D = d^2`, :math:`-\tfrac{\theta}{2}\log(d^2 + \epsilon)`: the square root skipped;
  the :math:`\epsilon` keeps a query lying exactly on a class representative finite in value and gradient.
  """
  return -(0.5 if squared else 1.0) * jnp.exp(rho) * jnp.log(distance + eps)


def logits_from_distances(distance: Array, head: str, rho: Array | float = RHO_INIT,
                          distance_name: str = "squared_euclidean") -> Array:
  """Logits of a head (``"softmax"`` or ``"dr"``) from class distances ``D`` under ``distance_name``."""
  _check_choice(head, HEADS, "head")
  if head == "softmax":
    return softmax_logits(distance)
  return dr_logits(distance, jnp.asarray(rho), squared=DISTANCE_FORMS[distance_name].squared)


def episode_logits(
    support: Array,
    support_labels: Array,
    query: Array,
    way: int,
    *,
    classifier: str = "proto",
    head: str = "softmax",
    rho: Array | float = RHO_INIT,
    distance: str = "squared_euclidean",
) -> Array:
  """Query logits ``[n_query, way]`` of one episode under any of the four heads and any distance."""
  _check_choice(head, HEADS, "head")
  return logits_from_distances(class_distances(support, support_labels, query, way, classifier, distance), head, rho,
                               distance)


def loss_and_accuracy(logits: Array, labels: Array) -> tuple[Array, Array]:
  """Mean cross-entropy over the queries and the fraction whose argmax is right."""
  loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
  accuracy = (jnp.argmax(logits, axis=-1) == labels).mean()
  return loss, accuracy


# ---- heads as values ------------------------------------------------------------------------------------------------
class Head:
  r"""A few-shot head as a value: subclass it as a frozen dataclass (hashable: the learner, head included, is a
  static argument under ``jax.jit``) and pass it to ``fewshot.train.train(config, workdir, head=...)``.

  * ``name``: letters, digits and ``_-.+``; a run records a head passed from Python as ``custom:<name>``.
  * ``init(key) -> dict``: the head's parameters, trained beside the backbone's by the same optimiser (the
    paper heads': ``{"rho": 2.0}``). The train state holds ``{"backbone": ..., **init(key)}``.
  * ``logits(params, support, support_labels, query, way) -> [n_query, way]``: ``params`` is ``init``'s dict
    (trained), the embeddings ``[n, D]``, the labels ``0..way-1``; a pure, traceable function.
  * ``class_distances(support, support_labels, query, way) -> [n_query, way]``, optional: each query's positive
    distance to each class, which the diagnostics' :math:`\psi` compares before and after an update. A head
    without it trains with :math:`\psi` and the alpha ratios recorded as null.

  >>> @dataclasses.dataclass(frozen=True)
  ... class Cosine(Head):
  ...   name = "cosine_scaled"
  ...   def init(self, key):
  ...     return {"log_scale": jnp.log(10.0)}
  ...   def logits(self, params, support, support_labels, query, way):
  ...     distance = class_distances(support, support_labels, query, way, "proto", "cosine")
  ...     return -jnp.exp(params["log_scale"]) * distance
  >>> Cosine().logits(Cosine().init(None), jnp.eye(2), jnp.arange(2), jnp.ones((3, 2)), 2).shape
  (3, 2)
  """

  name = "head"

  def init(self, key: jax.Array) -> dict:
    del key
    return {}

  def logits(self, params: dict, support: Array, support_labels: Array, query: Array, way: int) -> Array:
    raise NotImplementedError(f"{type(self).__name__} must define logits(params, support, support_labels, query, way)")


@dataclasses.dataclass(frozen=True)
class DistanceHead(Head):
  """The paper's heads and their distances: ``--head`` (the formulation), ``--classifier``, ``--distance``."""

  formulation: str = "softmax"
  classifier: str = "proto"
  distance: str = "squared_euclidean"

  def __post_init__(self):
    _check_choice(self.formulation, HEADS, "head")
    _check_choice(self.classifier, CLASSIFIERS, "classifier")
    _check_choice(self.distance, DISTANCES, "distance")

  @property
  def name(self) -> str:
    return model_name(self.classifier, self.formulation, self.distance)

  def init(self, key: jax.Array) -> dict:
    del key
    # Every paper head has rho (checkpoints hold it); under softmax its gradient is zero, so Adam leaves it be.
    return {"rho": jnp.asarray(RHO_INIT, jnp.float32)}

  def logits(self, params: dict, support: Array, support_labels: Array, query: Array, way: int) -> Array:
    return episode_logits(support, support_labels, query, way, classifier=self.classifier, head=self.formulation,
                          rho=params["rho"], distance=self.distance)

  def class_distances(self, support: Array, support_labels: Array, query: Array, way: int) -> Array:
    r"""The distance the DR formulation takes (:math:`\sqrt D` where :math:`D` is a square)."""
    return jnp.exp(self.log_class_distances(support, support_labels, query, way))

  def log_class_distances(self, support: Array, support_labels: Array, query: Array, way: int) -> Array:
    # Halving the log of a square rather than taking a square root: no root to clamp, and a zero D has a finite log.
    d = class_distances(support, support_labels, query, way, self.classifier, self.distance)
    log_d = jnp.log(jnp.maximum(d, jnp.finfo(d.dtype).tiny))
    return 0.5 * log_d if DISTANCE_FORMS[self.distance].squared else log_d


def resolve(head, classifier: str = "proto", distance: str = "squared_euclidean") -> Head:
  """A head value: a ``--head`` name with its classifier and distance, or a head object (checked) as it is."""
  if isinstance(head, str):
    return DistanceHead(head, classifier, distance)
  for method in ("init", "logits"):
    if not callable(getattr(head, method, None)):
      raise ConfigError(f"head {_describe(head)} has no {method} method; a head defines init(key) and logits(params, "
                        "support, support_labels, query, way) (see fewshot.heads.Head).")
  try:
    hash(head)
  except TypeError:
    raise ConfigError(f"head {_describe(head)} is not hashable; define it as a frozen dataclass "
                      "(@dataclasses.dataclass(frozen=True)): it is a static argument of the compiled steps.") from None
  return head


def has_class_distance(head: Head) -> bool:
  return callable(getattr(head, "class_distances", None))


def log_class_distances(head: Head, support: Array, support_labels: Array, query: Array, way: int) -> Array:
  """Log of the head's class distances (clamped at the smallest normal number: a zero has a finite log)."""
  if hasattr(head, "log_class_distances"):
    return head.log_class_distances(support, support_labels, query, way)
  d = head.class_distances(support, support_labels, query, way)
  return jnp.log(jnp.maximum(d, jnp.finfo(d.dtype).tiny))


def check_outputs(head: Head, way: int, n_support: int, n_query: int, dim: int) -> None:
  """One-line ``ConfigError`` naming a head whose ``init`` is not a dict of parameters or whose logits (or class
  distances) are not ``[n_query, way]`` on embeddings ``[n, dim]``: traced with ``jax.eval_shape``, nothing runs.
  """
  params = jax.eval_shape(head.init, jax.random.key(0))
  if not isinstance(params, dict) or "backbone" in params:
    raise ConfigError(f"head {_describe(head)}'s init returned {_describe(params)}; it must return a dict of "
                      "parameters (none named 'backbone'), {} for none.")
  support = jax.ShapeDtypeStruct((n_support, dim), jnp.float32)
  query = jax.ShapeDtypeStruct((n_query, dim), jnp.float32)
  labels = jax.ShapeDtypeStruct((n_support,), jnp.int32)
  methods = {"logits": lambda p, *a: head.logits(p, *a, way)}
  if has_class_distance(head):
    methods["class_distances"] = lambda p, *a: head.class_distances(*a, way)
  for what, method in methods.items():
    got = jax.eval_shape(method, params, support, labels, query)
    if getattr(got, "shape", None) != (n_query, way):
      returned = f"shape {tuple(got.shape)}" if hasattr(got, "shape") else f"a {type(got).__name__}"
      raise ConfigError(f"head {_describe(head)}'s {what} returned {returned} for {n_query} queries of a {way}-way "
                        f"episode; it must return [n_query, way] = ({n_query}, {way}).")


def _describe(value) -> str:
  return " ".join(repr(value).split())[:200]
