"""Metric-learning losses: pure jittable functions ``(embeddings, labels, ...) -> scalar``.

Each loss lives in the module of its family; :data:`LOSSES` names them for training
loops and command lines, with how to initialise the loss's own learnable parameters
(proxies, scales, thresholds) and whether it accepts mined triplets.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from fewshot.dml.losses import margin_losses, pair_losses, proxy_losses, tuple_losses
from fewshot.dml.losses.margin_losses import arcface_loss, cosface_loss, sphereface_loss
from fewshot.dml.losses.pair_losses import (
    bce_pair_loss, contrastive_loss, init_bce_pair_params, init_margin_params, lifted_structure_loss, margin_loss,
    two_margin_contrastive_loss)
from fewshot.dml.losses.proxy_losses import (
    dr_proxy_loss, init_dr_proxy_params, init_normalized_softmax_params, init_proxies, init_soft_triple_params,
    normalized_softmax_loss, proxy_nca_loss, soft_triple_loss)
from fewshot.dml.losses.tuple_losses import (
    circle_loss, fastap_loss, multi_similarity_loss, npair_loss, ntxent_loss, triplet_margin_loss)


__all__ = [
    "LOSSES",
    "Loss",
    "check_loss_name",
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
  """A loss as a training loop uses it.

  Attributes:
    fn: the loss, called as ``fn(embeddings, labels, **params, **options)``.
    init: ``(key, num_classes, dim) -> params``, the loss's learnable parameters keyed
      by ``fn``'s argument names; None when it has none.
    per_class: whether ``init`` learns something per training class (proxies), so the
      number of training classes must be known.
    takes_triplets: whether ``fn`` accepts ``triplets=`` from a miner.
  """

  fn: Callable
  init: Callable | None = None
  per_class: bool = False
  takes_triplets: bool = False


def _unit_proxies(fn, init) -> Loss:
  return Loss(fn, init, per_class=True)


def _no_classes(init):
  """An ``init`` of parameters that do not depend on the classes or the dimension."""
  return lambda key, num_classes, dim: init()


LOSSES: dict[str, Loss] = {
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
}


def check_loss_name(name: str) -> None:
  if name not in LOSSES:
    raise ValueError(f"Unknown loss {name!r}; choose one of {', '.join(LOSSES)}.")
