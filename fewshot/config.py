"""A run's configuration: the defaults of the paper's protocol, validation, and naming."""

from __future__ import annotations

import dataclasses
import os

from fewshot import backbones, diagnostics, heads
from fewshot.data import DATASETS, IMAGE_DATASETS
from fewshot.learner import PSI_CLASSIFIERS

# Episode counts of the distance-ratio paper (SPEC.md §1) for its datasets; the small
# datasets get counts that finish in minutes on a 2-core CPU.
PAPER_EPISODES = {1: 60_000, 5: 50_000}
SMALL_DATASET_EPISODES = {"strokes": 2_000, "omniglot": 2_000}


class ConfigError(ValueError):
  """A bad option: the message is one line naming the problem and the fix."""


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
    if self.dataset in IMAGE_DATASETS:
      # Loading works (fewshot.data.load_splits); the episodic trainer does not yet resize or
      # augment their stored images to the backbone's size, so it refuses rather than train wrong.
      raise ConfigError(f"--dataset {self.dataset} is not wired into fewshot.train yet; "
                        f"use --dataset strokes or omniglot, or load it with fewshot.data.load_splits.")
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
