"""A run's configuration: the defaults of the paper's protocol, validation, and naming."""

from __future__ import annotations

import dataclasses
import os

from fewshot import backbones, diagnostics, heads
from fewshot.data import DATASETS, IMAGE_DATASETS, class_splits
from fewshot.data.images import BBOX_DATASETS
from fewshot.data.omniglot import PROTOCOLS as OMNIGLOT_PROTOCOLS
from fewshot.errors import ConfigError
from fewshot.episodic import PSI_CLASSIFIERS

# Episode counts of the distance-ratio paper (SPEC.md §1) for its datasets; the small
# datasets get counts that finish in minutes on a 2-core CPU.
PAPER_EPISODES = {1: 60_000, 5: 50_000}
SMALL_DATASET_EPISODES = {"strokes": 2_000, "omniglot": 2_000}
# strokes and omniglot are stored 28x28x1 and used as stored; the image datasets are RGB
# at the backbone's input size of the paper (SPEC §4).
SMALL_IMAGE_SIZE = 28
PAPER_IMAGE_SIZES = {"conv4": 84, "resnet18": 224}
MIN_IMAGE_SIZE = 8  # fewshot.data stores images of at least this side


@dataclasses.dataclass(frozen=True)
class Config:
  dataset: str = "strokes"
  data_dir: str | None = None
  tfds_dir: str | None = None
  backbone: str = "conv4"
  head: str = "softmax"
  classifier: str = "proto"
  way: int = 5
  shot: int = 1
  query: int = 16
  test_query: int = 15
  episodes: int | None = None  # None: the dataset's default
  eval_every: int = 100
  val_episodes: int = 100
  test_episodes: int = 600
  learning_rate: float = 1e-3
  centring: str = "points"  # of the training diagnostics; "features" reproduces the reference code
  psi_classifier: str = "model"  # class distance of the diagnostics' ψ; "proto" reproduces the reference code
  seed: int = 0
  image_size: int | None = None  # None: 28 on strokes/omniglot, else 84 (conv4) or 224 (resnet18)
  protocol: str | None = None  # class splits of omniglot and the image datasets; None: the dataset's default
  class_order: str = "default"  # "random": classes permuted by split_seed before splitting
  split_seed: int = 0
  bbox_crop: bool = False
  rotations: bool = False  # omniglot: each character at 0/90/180/270 degrees, four classes
  augment: bool | None = None  # None: on for the image datasets, off for strokes/omniglot

  def __post_init__(self):
    for name, choices in (
        ("dataset", DATASETS),
        ("backbone", tuple(backbones.BACKBONES)),
        ("head", heads.HEADS),
        ("classifier", heads.CLASSIFIERS),
        ("centring", diagnostics.CENTRINGS),
        ("psi_classifier", PSI_CLASSIFIERS),
    ):
      if getattr(self, name) not in choices:
        raise ConfigError(f"unknown --{name} {getattr(self, name)!r}; choose one of {', '.join(choices)}.")
    self._check_data_options()
    positive = ("way", "shot", "query", "test_query", "eval_every", "val_episodes", "test_episodes")
    for name in positive + (("episodes",) if self.episodes is not None else ()):
      if getattr(self, name) < 1:
        raise ConfigError(f"--{name} must be a positive integer, got {getattr(self, name)}.")
    if self.learning_rate <= 0:
      raise ConfigError(f"--learning_rate must be positive, got {self.learning_rate}.")
    if self.data_dir is not None:
      object.__setattr__(self, "data_dir", os.path.abspath(os.path.expanduser(self.data_dir)))
    if self.episodes is None:
      default = SMALL_DATASET_EPISODES.get(self.dataset, PAPER_EPISODES.get(self.shot, PAPER_EPISODES[1]))
      object.__setattr__(self, "episodes", default)

  @property
  def is_image_dataset(self) -> bool:
    return self.dataset in IMAGE_DATASETS

  @property
  def channels(self) -> int:
    return 3 if self.is_image_dataset else 1

  @property
  def input_shape(self) -> tuple[int, int, int]:
    """What the backbone sees: images after the training or evaluation transform."""
    return (self.image_size, self.image_size, self.channels)

  def _check_data_options(self) -> None:
    """Validate and resolve the data options, so that a saved config names its data exactly."""
    image = self.is_image_dataset
    if self.image_size is None:
      size = PAPER_IMAGE_SIZES.get(self.backbone, PAPER_IMAGE_SIZES["conv4"]) if image else SMALL_IMAGE_SIZE
      object.__setattr__(self, "image_size", size)
    if isinstance(self.image_size, bool) or not isinstance(self.image_size, int):
      raise ConfigError(f"--image_size must be an integer, got {self.image_size!r}.")
    if image and self.image_size < MIN_IMAGE_SIZE:
      raise ConfigError(f"--image_size must be at least {MIN_IMAGE_SIZE}, got {self.image_size}.")
    if not image and self.image_size != SMALL_IMAGE_SIZE:
      raise ConfigError(f"{self.dataset} images are {SMALL_IMAGE_SIZE}x{SMALL_IMAGE_SIZE}; --image_size "
                        f"{self.image_size} applies to {', '.join(IMAGE_DATASETS)} (use {SMALL_IMAGE_SIZE} or leave it out).")
    if self.class_order not in class_splits.CLASS_ORDERS:
      raise ConfigError(f"unknown --class_order {self.class_order!r}; choose one of {', '.join(class_splits.CLASS_ORDERS)}.")
    if image:
      protocol = class_splits.DEFAULT_PROTOCOL[self.dataset] if self.protocol is None else self.protocol
      if protocol not in class_splits.PROTOCOLS[self.dataset]:
        raise ConfigError(f"--protocol {protocol} is not defined for {self.dataset}; "
                          f"choose one of {', '.join(class_splits.PROTOCOLS[self.dataset])}.")
      object.__setattr__(self, "protocol", protocol)
      if self.bbox_crop and self.dataset not in BBOX_DATASETS:
        raise ConfigError(f"{self.dataset} has no bounding boxes; --bbox_crop needs one of {', '.join(BBOX_DATASETS)}.")
      if self.rotations:
        raise ConfigError(f"--rotations turns omniglot characters into new classes; {self.dataset} has none.")
    else:
      fixed = {"class_order": (self.class_order, "default"), "bbox_crop": (self.bbox_crop, False)}
      if self.dataset == "omniglot":
        protocol = "default" if self.protocol is None else self.protocol
        if protocol not in OMNIGLOT_PROTOCOLS:
          raise ConfigError(f"--protocol {protocol} is not defined for omniglot; choose one of "
                            f"{', '.join(OMNIGLOT_PROTOCOLS)}.")
        object.__setattr__(self, "protocol", protocol)
      else:
        fixed.update(protocol=(self.protocol, None), rotations=(self.rotations, False))
      for name, (value, default) in fixed.items():
        if value != default:
          raise ConfigError(f"{self.dataset} has fixed class splits and no boxes; --{name} applies to "
                            f"{', '.join(IMAGE_DATASETS)}" + (" and omniglot." if name in ("protocol", "rotations") else "."))
    if self.augment is None:
      object.__setattr__(self, "augment", image)

  @property
  def model_name(self) -> str:
    return heads.MODEL_NAMES[(self.classifier, self.head)]

  @property
  def run_name(self) -> str:
    return f"{self.dataset}_{self.backbone}_{self.model_name}_{self.way}w{self.shot}s_seed{self.seed}"

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, values: dict) -> "Config":
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in known})

  def differences(self, other: "Config") -> list[str]:
    """Names of the options in which two configurations differ."""
    return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) != getattr(other, f.name)]
