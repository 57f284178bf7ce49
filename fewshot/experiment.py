"""A configuration built into what training and evaluation run on: data, learner, keys."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from fewshot import backbones, data, stats
from fewshot.config import Config
from fewshot.episodes import EpisodeShape, EpisodeSource, check_fits
from fewshot.learner import Learner, TrainState, adam

# One independent key stream per use, so that e.g. changing --val_episodes never
# changes the training episodes.
KEY_STREAMS = ("init", "train", "val", "test")


def train_shape(config: Config) -> EpisodeShape:
  return EpisodeShape(config.way, config.shot, config.query)


def test_shape(config: Config) -> EpisodeShape:
  return EpisodeShape(config.way, config.shot, config.test_query)


def build_learner(config: Config) -> Learner:
  return Learner(
      backbones.get_backbone(config.backbone),
      train_shape(config),
      head=config.head,
      classifier=config.classifier,
      optimizer=adam(config.learning_rate),
      centring=config.centring,
      psi_classifier=config.psi_classifier,
  )


def run_keys(seed: int) -> dict[str, jax.Array]:
  root = jax.random.key(seed)
  return {name: jax.random.fold_in(root, i) for i, name in enumerate(KEY_STREAMS)}


@dataclasses.dataclass
class Experiment:
  """Everything a configuration builds before training: data on the device, learner, keys."""

  config: Config
  learner: Learner
  sources: dict[str, EpisodeSource]
  image_shape: tuple[int, ...]
  keys: dict[str, jax.Array]

  @classmethod
  def build(cls, config: Config, splits: tuple[str, ...] = data.SPLITS) -> "Experiment":
    """Load the splits, check they can supply the episodes, and build the learner (writes nothing)."""
    loaded = data.load_splits(config.dataset, config.data_dir, config.tfds_dir, splits)
    shapes = {"train": train_shape(config), "val": train_shape(config), "test": test_shape(config)}
    for name, split in loaded.items():
      check_fits(split, shapes[name], name)
    sources = {name: EpisodeSource.from_split(split) for name, split in loaded.items()}
    return cls(config, build_learner(config), sources, next(iter(loaded.values())).image_shape, run_keys(config.seed))

  def init_state(self) -> TrainState:
    return self.learner.init(self.keys["init"], self.image_shape)

  def accuracies(self, state: TrainState, split: str, num_episodes: int) -> np.ndarray:
    """Per-episode accuracy on a split; the same episodes every call (fixed key)."""
    shape = test_shape(self.config) if split == "test" else train_shape(self.config)
    return np.asarray(self.learner.evaluate(state.variables, self.sources[split], self.keys[split], num_episodes, shape))

  def test(self, state: TrainState) -> dict:
    accuracies = self.accuracies(state, "test", self.config.test_episodes)
    mean, half_width = stats.mean_confidence_interval(100.0 * accuracies)
    return {"model": self.config.model_name, "test_accuracy": mean, "test_ci95": half_width,
            "test_episodes": len(accuracies), "test_query": self.config.test_query}

