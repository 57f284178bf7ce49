"""Metric-learning losses: pure jittable functions ``(embeddings, labels, ...) -> scalar``.

Each loss lives in the module of its family; :data:`LOSSES` names them for training
loops and command lines, with how to initialise the loss's own learnable parameters
(proxies, scales, thresholds) and whether it accepts mined triplets. A user-written
loss is a :class:`Loss` value too and trains the same way (``fewshot.dml.train.train(...,
loss=)``); its run records it as ``custom:<name>``. The losses import only :mod:`fewshot.distances`,
:mod:`fewshot.heads` (the DR proxy loss) and the masked reductions and tuples of :mod:`fewshot.dml`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable

from fewshot.choices import BATCH_NEEDS, CUSTOM_PREFIX
from fewshot.dml.losses import margin_losses, pair_losses, proxy_losses, tuple_losses
from fewshot.dml.losses.margin_losses import arcface_loss, cosface_loss, sphereface_loss
from fewshot.dml.losses.pair_losses import (
  bce_pair_loss,
  contrastive_loss,
  init_bce_pair_params,
  init_margin_params,
  lifted_structure_loss,
  margin_loss,
  two_margin_contrastive_loss,
)
from fewshot.dml.losses.proxy_losses import (
  dr_proxy_loss,
  init_dr_proxy_params,
  init_normalized_softmax_params,
  init_proxies,
  init_soft_triple_params,
  normalized_softmax_loss,
  proxy_nca_loss,
  soft_triple_loss,
)
from fewshot.dml.losses.tuple_losses import (
  circle_loss,
  fastap_loss,
  multi_similarity_loss,
  npair_loss,
  ntxent_loss,
  triplet_margin_loss,
)
from fewshot.errors import ConfigError

__all__ = [
    "LOSSES",
    "Loss",
    "check_loss_name",
    "get_loss",
    "arcface_loss",
    "bce_pair_loss",
    "circle_loss",
    "contrastive_loss",
    "cosface_loss",
    "dr_proxy_loss",
    "fastap_loss",
    "init_bce_pair_params",
    "init_dr_proxy_params",
    "init_margin_params",
    "init_normalized_softmax_params",
    "init_proxies",
    "init_soft_triple_params",
    "lifted_structure_loss",
    "margin_loss",
    "multi_similarity_loss",
    "normalized_softmax_loss",
    "npair_loss",
    "ntxent_loss",
    "proxy_nca_loss",
    "soft_triple_loss",
    "sphereface_loss",
    "triplet_margin_loss",
    "two_margin_contrastive_loss",
]


@dataclasses.dataclass(frozen=True)
class Loss:
  """A loss as a training loop uses it: a registered one of :data:`LOSSES`, or a user's.

  Attributes:
    fn: the loss, called as ``fn(embeddings, labels, **params, **options)`` on L2-normalised
      ``embeddings [B, D]`` and ``labels int [B]``; it returns a scalar.
    init: ``(key, num_classes, dim) -> params``, the loss's learnable parameters keyed
      by ``fn``'s argument names (Adam trains them at ``--loss_learning_rate``); None when
      it has none.
    per_class: whether ``init`` learns something per training class (proxies), so the
      number of training classes must be known.
    takes_triplets: whether ``fn`` accepts ``triplets=`` from a miner.
    name: how runs record it (default ``fn``'s name); a user's loss is ``custom:<name>``.
    needs: what every batch must hold for the loss to learn from it: ``"positives"`` (a pair of images of one
      class, so 2 or more per class) and ``"negatives"`` (another class, so 2 or more classes); a batch shape
      that cannot give it is refused before training (:func:`fewshot.choices.check_batch`).
  """

  fn: Callable
  init: Callable | None = None
  per_class: bool = False
  takes_triplets: bool = False
  name: str | None = None
  needs: tuple[str, ...] = ()

  def __post_init__(self):
    if not callable(self.fn) or (self.init is not None and not callable(self.init)):
      raise ConfigError(f"Loss(fn, init) takes functions, got fn={self.fn!r}, init={self.init!r}.")
    name = getattr(self.fn, "__name__", "") if self.name is None else self.name
    if not set(self.needs) <= {"positives", "negatives"}:
      raise ConfigError(f"Loss(needs=...) names what a batch must hold, 'positives' and/or 'negatives', got "
                        f"{self.needs!r}.")
    object.__setattr__(self, "needs", tuple(self.needs))
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):  # it becomes part of a record and of a run's name
      raise ConfigError(f"name the loss with letters, digits, '_', '.' or '-': Loss(fn, name=...), got {name!r}.")
    object.__setattr__(self, "name", name)

  @property
  def label(self) -> str:
    """What a run's config.json records: the registered name, or ``custom:<name>`` for any other loss."""
    return self.name if LOSSES.get(self.name) == self else CUSTOM_PREFIX + self.name


def _unit_proxies(fn, init) -> Loss:
  return Loss(fn, init, per_class=True)


def _named(losses: dict[str, Loss]) -> dict[str, Loss]:
  """Each registered loss carrying its command-line name and what its batches need (:data:`BATCH_NEEDS
  <fewshot.choices.BATCH_NEEDS>`).
  """
  return {name: dataclasses.replace(loss, name=name, needs=BATCH_NEEDS.get(name, ())) for name, loss in losses.items()}


def _no_classes(init):
  """An ``init`` of parameters that do not depend on the classes or the dimension."""
  return lambda key, num_classes, dim: init()


LOSSES: dict[str, Loss] = _named({
    # Embedding losses: they need positive pairs in the batch (C x M batches, M >= 2).
    "contrastive": Loss(pair_losses.contrastive_loss),
    "two_margin_contrastive": Loss(pair_losses.two_margin_contrastive_loss),
    "triplet": Loss(tuple_losses.triplet_margin_loss, takes_triplets=True),
    "npair": Loss(tuple_losses.npair_loss),
    "bce_pair": Loss(pair_losses.bce_pair_loss, _no_classes(pair_losses.init_bce_pair_params)),
    "margin": Loss(pair_losses.margin_loss, _no_classes(pair_losses.init_margin_params)),
    "lifted_structure": Loss(pair_losses.lifted_structure_loss),
    "multi_similarity": Loss(tuple_losses.multi_similarity_loss),
    "ntxent": Loss(tuple_losses.ntxent_loss),
    "circle": Loss(tuple_losses.circle_loss),
    "fastap": Loss(tuple_losses.fastap_loss),
    # Classification losses: one learnable proxy (or several) per training class.
    "nsl": _unit_proxies(proxy_losses.normalized_softmax_loss, proxy_losses.init_normalized_softmax_params),
    "cosface": _unit_proxies(margin_losses.cosface_loss, proxy_losses.init_proxies),
    "arcface": _unit_proxies(margin_losses.arcface_loss, proxy_losses.init_proxies),
    "sphereface": _unit_proxies(margin_losses.sphereface_loss, proxy_losses.init_proxies),
    "proxy_nca": _unit_proxies(proxy_losses.proxy_nca_loss, proxy_losses.init_proxies),
    "soft_triple": _unit_proxies(proxy_losses.soft_triple_loss, proxy_losses.init_soft_triple_params),
    "dr_proxy": _unit_proxies(proxy_losses.dr_proxy_loss, proxy_losses.init_dr_proxy_params),
})


def check_loss_name(name: str) -> None:
  if name.startswith(CUSTOM_PREFIX):  # only its record is a string: the function is the user's
    raise ConfigError(f"{name} is a user-written loss: pass the Loss value itself (loss=Loss(fn, init, "
                      f"name={name[len(CUSTOM_PREFIX):]!r})).")
  if name not in LOSSES:
    raise ValueError(f"Unknown loss {name!r}; choose one of {', '.join(LOSSES)}.")


def get_loss(loss: str | Loss) -> Loss:
  """A registered loss by name, or a :class:`Loss` value as it is."""
  if isinstance(loss, Loss):
    return loss
  check_loss_name(loss)
  return LOSSES[loss]
