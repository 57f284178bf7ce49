"""Metric-learning losses: pure jittable functions ``(embeddings, labels, ...) -> scalar``.

Each loss lives in the module of its family: :mod:`~fewshot.dml.losses.pair_losses` (one term per pair),
:mod:`~fewshot.dml.losses.tuple_losses` (an anchor against a positive and negatives),
:mod:`~fewshot.dml.losses.proxy_losses` (learnable proxies per class) and :mod:`~fewshot.dml.losses.margin_losses`
(CosFace, ArcFace, SphereFace). :data:`LOSSES` is each row of
:data:`fewshot.dml.loss_specs.SPECS` (its name, function and facts) as the :class:`Loss` training loops use, with how
to initialise the loss's own learnable parameters (proxies, scales, thresholds) and whether it accepts mined
triplets: a new loss is its function and its row there. A user-written
loss is a :class:`Loss` value too and trains the same way (``fewshot.dml.train.train(...,
loss=)``); its run records it as ``custom:<name>``. The losses import only :mod:`fewshot.distances`,
:mod:`fewshot.heads` (the DR proxy loss) and the masked reductions and tuples of :mod:`fewshot.dml`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import re
from collections.abc import Iterator, Mapping
from typing import Callable

from fewshot.choices import CUSTOM_PREFIX
from fewshot.dml.loss_specs import SPECS, LossSpec
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


def _no_classes(init):
  """An ``init`` of parameters that do not depend on the classes or the dimension."""
  return lambda key, num_classes, dim: init()


def _load(where):
  """A function of a row: itself, or the one ``"module:function"`` names, imported now."""
  if where is None or callable(where):
    return where
  module, _, name = where.partition(":")
  return getattr(importlib.import_module(module), name)


@functools.lru_cache(maxsize=None)
def _registered(spec: LossSpec) -> Loss:
  """The loss of a row, made once (a learner holds it as a static, hashed value: one row, one ``Loss``)."""
  init = _load(spec.init)
  init = _no_classes(init) if init is not None and not spec.per_class else init
  return Loss(_load(spec.fn), init, per_class=spec.per_class, takes_triplets=spec.takes_triplets, name=spec.name,
              needs=spec.needs)


class _Registered(Mapping):
  """The rows of :data:`fewshot.dml.loss_specs.SPECS` as losses, read at each use: a row added later is here."""

  def __getitem__(self, name: str) -> Loss:
    return _registered(SPECS[name])

  def __iter__(self) -> Iterator[str]:
    return iter(SPECS)

  def __len__(self) -> int:
    return len(SPECS)


LOSSES: Mapping[str, Loss] = _Registered()


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
