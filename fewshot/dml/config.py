"""A metric-learning run's configuration: the reality check's defaults (SPEC §7), validation, naming."""

from __future__ import annotations

import dataclasses
import os

from fewshot import backbones
from fewshot.config import ConfigError
from fewshot.data import DATASETS, IMAGE_DATASETS
from fewshot.data.class_splits import PROTOCOLS
from fewshot.dml.miners import MINERS
from fewshot.dml.losses import LOSSES
from fewshot.dml.samplers import CLASSIFICATION_LOSS_BATCH, EMBEDDING_LOSS_BATCH

SMALL_DATASETS = ("strokes", "omniglot")  # 28x28x1, fixed train/val/test class splits
# The model's input side for the image datasets: the few-shot papers' 84 for Conv4, ImageNet's 224 for ResNet-18.
IMAGE_SIZES = {"conv4": 84, "resnet18": 224}
DEFAULT_EPOCHS = {"strokes": 20, "omniglot": 20}
IMAGE_DATASET_EPOCHS = 100
FOLDS = (1, 4)
CLASS_ORDERS = ("default", "random")


@dataclasses.dataclass(frozen=True)
class DMLConfig:
  dataset: str = "cars196"
  data_dir: str | None = None
  tfds_dir: str | None = None
  backbone: str = "conv4"
  embedding_dim: int = 128
  loss: str = "triplet"
  miner: str = "none"
  classes: int | None = None  # None: 8 (embedding losses) or 32 (classification losses)
  per_class: int | None = None  # None: 4 or 1, likewise
  steps_per_epoch: int = 100
  epochs: int | None = None  # None: 20 on strokes/omniglot, 100 on the image datasets
  learning_rate: float = 1e-3
  loss_learning_rate: float | None = None  # None: learning_rate; the loss's own parameters (proxies, scales)
  image_size: int | None = None  # None: 28 on strokes/omniglot, else 84 (conv4) or 224 (resnet18)
  class_order: str = "default"
  split_seed: int = 0
  folds: int = 1
  seed: int = 0

  def __post_init__(self):
    for name, choices in (
        ("dataset", DATASETS),
        ("backbone", tuple(backbones.BACKBONES)),
        ("loss", tuple(LOSSES)),
        ("miner", ("none", *MINERS)),
        ("class_order", CLASS_ORDERS),
    ):
      if getattr(self, name) not in choices:
        raise ConfigError(f"unknown --{name} {getattr(self, name)!r}; choose one of {', '.join(choices)}.")
    if self.miner != "none" and not LOSSES[self.loss].takes_triplets:
      takes = ", ".join(name for name, spec in LOSSES.items() if spec.takes_triplets)
      raise ConfigError(f"the {self.loss} loss does not take mined triplets; use --miner none, or a miner only with "
                        f"--loss {takes}.")
    if self.folds not in FOLDS:
      raise ConfigError(f"--folds must be 1 (one validation fold) or 4 (the reality check's cross-validation), "
                        f"got {self.folds}.")
    if self.dataset in SMALL_DATASETS:
      if self.image_size not in (None, 28):
        raise ConfigError(f"{self.dataset} images are 28x28; --image_size {self.image_size} applies to "
                          f"{', '.join(IMAGE_DATASETS)}.")
      if self.class_order != "default":
        raise ConfigError(f"{self.dataset} has fixed class splits; --class_order random applies to "
                          f"{', '.join(IMAGE_DATASETS)}.")
    kind_batch = CLASSIFICATION_LOSS_BATCH if LOSSES[self.loss].per_class else EMBEDDING_LOSS_BATCH
    defaults = {
        "classes": kind_batch[0],
        "per_class": kind_batch[1],
        "epochs": DEFAULT_EPOCHS.get(self.dataset, IMAGE_DATASET_EPOCHS),
        "image_size": 28 if self.dataset in SMALL_DATASETS else IMAGE_SIZES[self.backbone],
    }
    for name, value in defaults.items():
      if getattr(self, name) is None:
        object.__setattr__(self, name, value)
    for name in ("embedding_dim", "classes", "per_class", "steps_per_epoch", "epochs", "image_size"):
      if getattr(self, name) < 1:
        raise ConfigError(f"--{name} must be a positive integer, got {getattr(self, name)}.")
    if self.loss_learning_rate is None:
      object.__setattr__(self, "loss_learning_rate", self.learning_rate)
    for name in ("learning_rate", "loss_learning_rate"):
      if getattr(self, name) <= 0:
        raise ConfigError(f"--{name} must be positive, got {getattr(self, name)}.")
    for name in ("data_dir", "tfds_dir"):
      if getattr(self, name) is not None:
        object.__setattr__(self, name, os.path.abspath(os.path.expanduser(getattr(self, name))))

  @property
  def run_name(self) -> str:
    return f"dml_{self.dataset}_{self.backbone}_{self.loss}_seed{self.seed}"

  @property
  def protocol(self) -> str | None:
    """The image datasets' 'dml' class split (train/test halves) where they have it; mini_imagenet has only 'fewshot'."""
    if self.dataset in SMALL_DATASETS:
      return None
    return "dml" if "dml" in PROTOCOLS[self.dataset] else "fewshot"

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, values: dict) -> "DMLConfig":
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in known})

  def differences(self, other: "DMLConfig") -> list[str]:
    return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) != getattr(other, f.name)]
