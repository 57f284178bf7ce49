"""A configuration built into its method's learner: the episode shapes of training, validation and test, the image
transforms, and the head and backbone values passed from Python (recorded by name, checked when a run is loaded).
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn

from fewshot import backbones, choices, heads
from fewshot.augment.affine import Distortion
from fewshot.augment.augmentation import Augmentation
from fewshot.config import Config
from fewshot.episodic import methods
from fewshot.episodic.episodes import EpisodeShape
from fewshot.episodic.learning import EpisodicLearner
from fewshot.episodic.maml import MetaLearner
from fewshot.errors import ConfigError
from fewshot.training.train_state import adam


def train_shape(config: Config) -> EpisodeShape:
  return EpisodeShape(config.way, config.shot, config.query)


def val_shape(config: Config) -> EpisodeShape:
  """Validation episodes: the test episodes' classes (checkpoints are chosen at the shape they are tested at),
  the training episodes' queries.
  """
  return EpisodeShape(config.test_way, config.shot, config.query)


def test_shape(config: Config) -> EpisodeShape:
  return EpisodeShape(config.test_way, config.shot, config.test_query)


def build_augmentation(config: Config) -> Augmentation:
  """The transforms between the stored images and the backbone, a function of the config alone
  (so a saved run rebuilds them).
  """
  # Koch et al.'s ranges, the shift scaled with the side (2 px at 28) so that it moves ink as far at every size.
  distortion = Distortion(shift_pixels=2.0 * config.image_size / 28) if config.distort else None
  return Augmentation.for_dataset(config.image_size, config.channels, config.is_image_dataset, config.augment,
                                  distortion)


def with_values(config: Config, head=None, backbone=None) -> Config:
  """The configuration that records a head and a backbone passed as values from Python: a :class:`DistanceHead
  <fewshot.heads.DistanceHead>` by its names (``--head``, ``--classifier``, ``--distance``), any other head as
  ``custom:<its name>``, a backbone module as ``custom:<its class name>``. The values are named here, and
  resolved and checked where they are used: by the learner (:class:`EpisodicLearner`).
  """
  changes = {}
  if head is not None:
    head = heads.resolve(head) if isinstance(head, str) else head  # a --head name where a value may stand
    if isinstance(head, heads.DistanceHead):
      changes.update(head=head.formulation, classifier=head.classifier, distance=head.distance)
    else:
      changes["head"] = choices.custom("head", getattr(head, "name", None))
  if backbone is not None:
    if not isinstance(backbone, nn.Module):
      raise ConfigError(f"backbone must be a flax.linen module mapping images [n, H, W, C] to embeddings [n, D], got "
                        f"a {type(backbone).__name__}.")
    changes["backbone"] = choices.custom("backbone", type(backbone).__name__)
  return dataclasses.replace(config, **changes) if changes else config


def check_values(config: Config, head=None, backbone=None) -> None:
  """One-line ``ConfigError`` where a run recorded a head or backbone value (``custom:<name>``, or a head by the
  paper's names) and the one passed to load it is missing or records otherwise.
  """
  choices.require_values(config, {"head": head, "backbone": backbone},
                         "pass the same object again, e.g. fewshot.load(workdir, {kind}=my_{kind}).")
  recorded = with_values(config, head, backbone)
  for kind in ("head", "classifier", "distance", "backbone"):
    if getattr(recorded, kind) != getattr(config, kind):
      raise ConfigError(f"the run's --{kind} is {getattr(config, kind)}, but the {kind.replace('classifier', 'head')} "
                        f"passed records as {getattr(recorded, kind)}; pass the one it was trained with.")


def build_learner(config: Config, head=None, backbone=None) -> EpisodicLearner | MetaLearner | object:
  """The learner of a configuration's method (its row's ``learner``, :mod:`fewshot.episodic.methods`) that records
  ``head`` and ``backbone`` (:func:`with_values`, or :func:`check_values` for a run's), the values in place of its
  named ones; the learner resolves and checks them.
  """
  if backbone is not None and config.conv != "auto":
    raise ConfigError(f"--conv {config.conv} chooses the built-in backbones' convolutions; a backbone passed from "
                      "Python computes its own (fewshot.backbones.Conv takes a form too): drop --conv.")
  backbone = backbones.get_backbone(config.backbone, config.conv) if backbone is None else backbone
  return methods.learner(config.method)(config, head, backbone)


def protonet_learner(config: Config, head, backbone: nn.Module) -> EpisodicLearner:
  """ProtoNet's learner: a distance head (``head``, a value, or the config's names) on the backbone's embedding."""
  return EpisodicLearner(
      backbone,
      train_shape(config),
      head=config.head if head is None else head,
      classifier=config.classifier,
      distance=config.distance,
      optimizer=adam(config.learning_rate, config.lr_halve_every),
      centring=config.centring,
      psi_classifier=config.psi_classifier,
      augmentation=build_augmentation(config),
      precision=config.precision,
  )


def maml_learner(config: Config, head, backbone: nn.Module) -> MetaLearner:
  """MAML's learner: every parameter adapted to each episode's support set."""
  return _meta_learner(config, backbone, adapt="all")


def anil_learner(config: Config, head, backbone: nn.Module) -> MetaLearner:
  """ANIL's learner: the head alone adapted."""
  return _meta_learner(config, backbone, adapt="head")


def _meta_learner(config: Config, backbone: nn.Module, adapt: str) -> MetaLearner:
  # Its adapted head is --meta_head's (a head value is protonet's: refused by the config's method check).
  return MetaLearner(backbone, train_shape(config), adapt=adapt,
                     head=config.meta_head, inner_steps=config.inner_steps, test_inner_steps=config.test_inner_steps,
                     inner_lr=config.inner_lr, first_order=config.first_order, tasks=config.meta_batch,
                     optimizer=adam(config.learning_rate, config.lr_halve_every),
                     augmentation=build_augmentation(config), precision=config.precision)
