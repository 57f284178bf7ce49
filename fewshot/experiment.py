"""A configuration built into what training and evaluation run on: data, learner, keys."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from fewshot import backbones, data, episodic, sources, stats
from fewshot.augment import Augmentation
from fewshot.config import Config
from fewshot.data import SPLITS, Split
from fewshot.episodes import EpisodeShape
from fewshot.episodic import EpisodicLearner
from fewshot.errors import DataError
from fewshot.data.options import fits_on_device
from fewshot.groups import RunPlacement, check_memory
from fewshot.train_state import KEY_STREAMS, TrainState, adam, run_keys


def train_shape(config: Config) -> EpisodeShape:
  return EpisodeShape(config.way, config.shot, config.query)


def test_shape(config: Config) -> EpisodeShape:
  return EpisodeShape(config.way, config.shot, config.test_query)


def build_augmentation(config: Config) -> Augmentation:
  """The transforms between the stored images and the backbone, a function of the config alone
  (so a saved run rebuilds them).
  """
  return Augmentation.for_dataset(config.image_size, config.channels, config.is_image_dataset, config.augment)


def build_learner(config: Config) -> EpisodicLearner:
  return EpisodicLearner(
      backbones.get_backbone(config.backbone),
      train_shape(config),
      head=config.head,
      classifier=config.classifier,
      optimizer=adam(config.learning_rate),
      centring=config.centring,
      psi_classifier=config.psi_classifier,
      augmentation=build_augmentation(config),
  )


def load_data(config: Config, splits: tuple[str, ...] = SPLITS) -> dict[str, Split]:
  """The requested splits of the config's dataset (a protocol without val holds out training classes)."""
  return data.load_splits(config.dataset, config.data_dir, config.tfds_dir, splits, image_size=config.image_size,
                          protocol=config.protocol, class_order=config.class_order, seed=config.split_seed,
                          bbox_crop=config.bbox_crop, rotations=config.rotations)


@dataclasses.dataclass
class Experiment:
  """Everything a configuration builds before training: data placed for the device, learner, keys.

  With ``group`` (a :class:`~fewshot.groups.RunPlacement`) it builds a seed group: the runs of
  ``seeds``, whose keys and states are stacked on a leading run axis sharded over the devices.
  """

  config: Config
  learner: EpisodicLearner
  sources: dict[str, sources.DeviceSource | sources.HostSource]
  image_shape: tuple[int, ...]  # the backbone's input (after the transforms), not the stored images'
  keys: dict[str, jax.Array]  # one run's keys, or a group's [R] keys per stream
  group: RunPlacement | None = None
  seeds: tuple[int, ...] = ()  # a group's seeds, padded to its run axis

  @classmethod
  def build(cls, config: Config, splits: tuple[str, ...] = SPLITS, placement: str = "auto",
            seeds: tuple[int, ...] | None = None) -> Experiment:
    """Load the splits, check they can supply the episodes, and build the learner (writes nothing).

    ``placement`` (see :func:`fewshot.sources.place`) changes where images live, never
    which episodes a run sees, so it is not part of the config. ``seeds`` builds a seed
    group of ``config`` (whose own seed is then unused).
    """
    loaded = load_data(config, splits)
    shapes = {"train": train_shape(config), "val": train_shape(config), "test": test_shape(config)}
    for name, split in loaded.items():
      shape = shapes[name]
      query_flag = "--test_query" if name == "test" else "--query"
      sources.check_fits(split, name, ("--way", shape.way), {"--shot": shape.shot, query_flag: shape.query})
    stored = next(iter(loaded.values())).image_shape
    if stored[-1] != config.channels:
      raise DataError(f"{config.dataset} images have {stored[-1]} channels where {config.channels} were expected.")
    learner = build_learner(config)
    if seeds is None:
      placed = {name: sources.place(split, placement) for name, split in loaded.items()}
      # The learner is initialised on what the backbone sees, after the transforms.
      return cls(config, learner, placed, config.input_shape, run_keys(config.seed))
    group = RunPlacement.over(len(seeds))
    stored_shape = next(iter(loaded.values())).image_shape
    shared = sum(split.images.nbytes for split in loaded.values() if fits_on_device(split.images.nbytes))
    check_memory(group, lambda: episodic.step_memory_bytes(learner, config.input_shape, stored_shape), shared)
    padded = tuple(group.pad(list(seeds)))
    placed = {name: sources.place(split, placement, device=group.replicated, run_sharding=group.runs)
              for name, split in loaded.items()}
    keys = {stream: group.stack([run_keys(seed)[stream] for seed in padded]) for stream in KEY_STREAMS}
    return cls(config, learner, placed, config.input_shape, keys, group, padded)

  def init_state(self) -> TrainState:
    if self.group is None:
      return episodic.init_state(self.learner, self.keys["init"], self.image_shape)
    # Each run initialised as it would be alone (its own compiled init), then stacked.
    return self.group.stack([episodic.init_state(self.learner, run_keys(seed)["init"], self.image_shape)
                             for seed in self.seeds])

  def accuracies(self, state: TrainState, split: str, num_episodes: int) -> np.ndarray:
    """Per-episode accuracy on a split, ``[num_episodes]`` (``[R, num_episodes]`` for a group); the same
    episodes every call (fixed key).
    """
    shape = test_shape(self.config) if split == "test" else train_shape(self.config)
    variables = episodic.model_variables(state)
    return np.asarray(episodic.evaluate(self.learner, variables, self.sources[split], self.keys[split], num_episodes,
                                        shape))

  def test(self, state: TrainState) -> dict | list[dict]:
    """Test results of a run (of each run of a group, padding included) from its per-episode accuracies."""
    accuracies = self.accuracies(state, "test", self.config.test_episodes)
    results = []
    for run_accuracies in (accuracies[None] if self.group is None else accuracies):
      mean, half_width = stats.mean_confidence_interval(100.0 * run_accuracies)
      results.append({"model": self.config.model_name, "test_accuracy": mean, "test_ci95": half_width,
                      "test_episodes": len(run_accuracies), "test_query": self.config.test_query})
    return results[0] if self.group is None else results
