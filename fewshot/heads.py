r"""Few-shot heads: class distances (prototype or 1-NN) and logits (softmax or distance ratio).

Pure functions of embeddings. For a query embedding :math:`f(x')` and the support set
:math:`S_c` of class :math:`c`:

* prototype distance: :math:`d(x', c) = \|f(x') - p_c\|`, :math:`p_c = \frac{1}{|S_c|}\sum_{x \in S_c} f(x)`;
* 1-NN distance: :math:`d(x', c) = \min_{x \in S_c} \|f(x') - f(x)\|`;
* softmax formulation (ProtoNet_S, 1-NN_S): :math:`\text{logit}_c = -d(x', c)^2`;
* distance-ratio formulation (ProtoNet_DR, 1-NN_DR; Kim et al., arXiv 2201.08676):
  :math:`p(c \mid x') = d_c^{-\theta} / \sum_{c'} d_{c'}^{-\theta}`, i.e.
  :math:`\text{logit}_c = -\theta \log \sqrt{d(x', c)^2 + \epsilon}` with :math:`\theta = e^{\rho}`.

The DR probabilities are invariant to rescaling the embedding space and reach 1 exactly
at a class representative; the softmax ones are neither.
"""

from __future__ import annotations

from typing import Callable

import chex
import jax
import jax.numpy as jnp
import optax

from fewshot import distances
from fewshot.choices import CLASSIFIERS, HEADS, MODEL_NAMES  # noqa: F401  (the heads' names)

Array = chex.Array

RHO_INIT = 2.0
DR_EPS = 1e-10


def _check_choice(value: str, choices: tuple[str, ...], what: str) -> None:
  if value not in choices:
    raise ValueError(f"Unknown {what} {value!r}; choose one of {', '.join(choices)}.")


def check_names(head: str, classifier: str) -> None:
  """Raise ``ValueError`` listing the valid choices for an unknown head or classifier."""
  _check_choice(head, HEADS, "head")
  _check_choice(classifier, CLASSIFIERS, "classifier")


def prototypes(support: Array, support_labels: Array, way: int) -> Array:
  """Class means of the support embeddings: ``[n_support, d] -> [way, d]``."""
  chex.assert_rank([support, support_labels], [2, 1])
  one_hot = jax.nn.one_hot(support_labels, way, dtype=support.dtype)
  counts = jnp.maximum(one_hot.sum(axis=0), 1.0)
  return (one_hot.T @ support) / counts[:, None]


def class_squared_distances(
    support: Array, support_labels: Array, query: Array, way: int, classifier: str = "proto",
    squared_distance: Callable[[Array, Array], Array] = distances.squared_euclidean,
) -> Array:
  """Squared class distances ``d(x', c)^2`` of each query to each class: ``[n_query, way]``.

  Args:
    support: ``[n_support, d]`` support embeddings.
    support_labels: ``[n_support]`` episode labels in ``0..way-1``.
    query: ``[n_query, d]`` query embeddings.
    way: number of classes in the episode (static).
    classifier: ``"proto"`` (distance to the class mean) or ``"nn"`` (to the nearest support point).
    squared_distance: pairwise squared distances ``[n, d], [m, d] -> [n, m]``; by default
      :func:`fewshot.distances.squared_euclidean`, exact at the class representatives.
  """
  _check_choice(classifier, CLASSIFIERS, "classifier")
  chex.assert_rank([support, support_labels, query], [2, 1, 2])
  chex.assert_equal_shape_prefix([support, support_labels], 1)
  if classifier == "proto":
    return squared_distance(query, prototypes(support, support_labels, way))
  to_support = squared_distance(query, support)  # [n_query, n_support]
  in_class = support_labels[None, :] == jnp.arange(way)[:, None]  # [way, n_support]
  masked = jnp.where(in_class[None], to_support[:, None, :], jnp.inf)
  return masked.min(axis=-1)


def softmax_logits(sq_dist: Array) -> Array:
  """Softmax formulation: ``logits = -d^2``."""
  return -sq_dist


def dr_logits(sq_dist: Array, rho: Array, eps: float = DR_EPS) -> Array:
  r"""Distance-ratio formulation: ``logits = -exp(rho) * log(sqrt(d^2 + eps))``.

  Written as :math:`-\tfrac{\theta}{2}\log(d^2 + \epsilon)` to skip the square root; the
  :math:`\epsilon` keeps a query lying exactly on a class representative finite in value
  and gradient.
  """
  return -0.5 * jnp.exp(rho) * jnp.log(sq_dist + eps)


def logits_from_distances(sq_dist: Array, head: str, rho: Array | float = RHO_INIT) -> Array:
  """Logits of a head (``"softmax"`` or ``"dr"``) from squared class distances."""
  _check_choice(head, HEADS, "head")
  return softmax_logits(sq_dist) if head == "softmax" else dr_logits(sq_dist, jnp.asarray(rho))


def episode_logits(
    support: Array,
    support_labels: Array,
    query: Array,
    way: int,
    *,
    classifier: str = "proto",
    head: str = "softmax",
    rho: Array | float = RHO_INIT,
) -> Array:
  """Query logits ``[n_query, way]`` of one episode under any of the four heads."""
  sq_dist = class_squared_distances(support, support_labels, query, way, classifier)
  return logits_from_distances(sq_dist, head, rho)


def loss_and_accuracy(logits: Array, labels: Array) -> tuple[Array, Array]:
  """Mean cross-entropy over the queries and the fraction whose argmax is right."""
  loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
  accuracy = (jnp.argmax(logits, axis=-1) == labels).mean()
  return loss, accuracy
