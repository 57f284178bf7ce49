"""The metric-learning losses, one row each: a loss's ``--loss`` name, where its function lives, and its facts.

A new loss is its function (in the module of its family, :mod:`fewshot.dml.losses`) plus its row in :data:`SPECS`.
The rows name the functions as ``"module:function"``, imported on first use by :mod:`fewshot.dml.losses` (which
makes each row the :class:`~fewshot.dml.losses.Loss` a training loop uses), so that :mod:`fewshot.dml.config`
validates ``--loss``, ``--miner`` and the batch shape from the facts without importing JAX.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

# What a batch must hold for a loss to learn from it (fewshot.choices.check_batch): the embedding losses compare a
# positive pair (two images of a class) with negatives (another class), so their batches need 2 or more classes of 2
# or more images each; a proxy loss compares each image with the class proxies and learns from any batch.
EMBEDDING_NEEDS = ("positives", "negatives")


@dataclasses.dataclass(frozen=True)
class LossSpec:
  """One loss as a row of :data:`SPECS`.

  Attributes:
    name: its ``--loss`` name, what its runs record.
    fn: the loss, ``fn(embeddings, labels, **params, **options) -> scalar``, or where it lives,
      ``"module:function"``.
    init: its learnable parameters' initialiser (or where it lives): ``(key, num_classes, dim) -> params`` for a
      ``per_class`` loss, ``() -> params`` for another; None where it has none.
    takes_triplets: whether it takes mined triplets (``--miner``).
    per_class: whether it learns a proxy (or several) per training class: a classification loss, trained on
      classification batches (``fewshot.dml.config.CLASSIFICATION_LOSS_BATCH``).
    needs: what every batch must hold for it to learn: ``"positives"`` and/or ``"negatives"``; None: an embedding
      loss's ``EMBEDDING_NEEDS``, nothing for a ``per_class`` one.
  """

  name: str
  fn: str | Callable
  init: str | Callable | None = None
  takes_triplets: bool = False
  per_class: bool = False
  needs: tuple[str, ...] | None = None

  def __post_init__(self):
    if self.needs is None:
      object.__setattr__(self, "needs", () if self.per_class else EMBEDDING_NEEDS)


_PAIR, _TUPLE, _PROXY, _MARGIN = (f"fewshot.dml.losses.{family}_losses" for family in ("pair", "tuple", "proxy",
                                                                                         "margin"))

SPECS: dict[str, LossSpec] = {spec.name: spec for spec in (
    # Embedding losses: they need positive pairs in the batch (C x M batches, M >= 2).
    LossSpec("contrastive", f"{_PAIR}:contrastive_loss"),
    LossSpec("two_margin_contrastive", f"{_PAIR}:two_margin_contrastive_loss"),
    LossSpec("triplet", f"{_TUPLE}:triplet_margin_loss", takes_triplets=True),
    LossSpec("npair", f"{_TUPLE}:npair_loss"),
    LossSpec("bce_pair", f"{_PAIR}:bce_pair_loss", f"{_PAIR}:init_bce_pair_params"),
    LossSpec("margin", f"{_PAIR}:margin_loss", f"{_PAIR}:init_margin_params"),
    LossSpec("lifted_structure", f"{_PAIR}:lifted_structure_loss"),
    LossSpec("multi_similarity", f"{_TUPLE}:multi_similarity_loss"),
    LossSpec("ntxent", f"{_TUPLE}:ntxent_loss"),
    LossSpec("circle", f"{_TUPLE}:circle_loss"),
    LossSpec("fastap", f"{_TUPLE}:fastap_loss"),
    # Classification losses: one learnable proxy (or several) per training class.
    LossSpec("nsl", f"{_PROXY}:normalized_softmax_loss", f"{_PROXY}:init_normalized_softmax_params", per_class=True),
    LossSpec("cosface", f"{_MARGIN}:cosface_loss", f"{_PROXY}:init_proxies", per_class=True),
    LossSpec("arcface", f"{_MARGIN}:arcface_loss", f"{_PROXY}:init_proxies", per_class=True),
    LossSpec("sphereface", f"{_MARGIN}:sphereface_loss", f"{_PROXY}:init_proxies", per_class=True),
    LossSpec("proxy_nca", f"{_PROXY}:proxy_nca_loss", f"{_PROXY}:init_proxies", per_class=True),
    LossSpec("soft_triple", f"{_PROXY}:soft_triple_loss", f"{_PROXY}:init_soft_triple_params", per_class=True),
    LossSpec("dr_proxy", f"{_PROXY}:dr_proxy_loss", f"{_PROXY}:init_dr_proxy_params", per_class=True),
)}


def triplet_losses() -> tuple[str, ...]:
  """The losses that take mined triplets, as the rows say now."""
  return tuple(name for name, spec in SPECS.items() if spec.takes_triplets)
