"""A configuration built into what training and evaluation run on: data, learner, keys."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from fewshot import backbones, data, episodic, sources, stats
from fewshot.augment import NO_AUGMENTATION, Augmentation
from fewshot.config import Config
from fewshot.data import Split, omniglot
from fewshot.episodes import EpisodeShape
from fewshot.episodic import EpisodicLearner
from fewshot.errors import DataError
from fewshot.train_state import TrainState, adam

# One independent key stream per use, so that e.g. changing --val_episodes never
# changes the training episodes.
KEY_STREAMS = ("init", "train", "val", "test")


def train_shape(config: Config) -> EpisodeShape:
  return EpisodeShape(config.way, config.shot, config.query)


def test_shape(config: Config) -> EpisodeShape:
  return EpisodeShape(config.way, config.shot, config.test_query)


def build_augmentation(config: Config) -> Augmentation:
  """The transforms between the stored images and the backbone, a function of the config alone
  (so a saved run rebuilds them)."""
  if config.is_image_dataset:
    paper = Augmentation.paper(config.image_size, config.channels)
    return dataclasses.replace(paper, random=config.augment)
  if config.augment:
    # 28x28 data is stored at the input size: evaluation resizes nothing (resize = size) and,
    # one channel, normalises nothing, so evaluation stays exactly what it is without augmentation.
    return dataclasses.replace(Augmentation.paper(config.image_size, config.channels), resize=config.image_size)
  return NO_AUGMENTATION


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


def hold_out_val(train: Split) -> tuple[Split, Split]:
  """(train, val) from a train split: every fourth class (by split label) validates.

  The dml protocol (cars196, sop) splits classes into train and test only; episodic training
  selects its checkpoint on held-out classes, so a quarter of the training classes are held
  out for it, as in the reality check's class-disjoint folds inside the training half.
  """
  held = np.arange(train.num_classes) % 4 == 3
  if not held.any() or held.all():
    raise DataError(f"the train split has {train.num_classes} classes; holding out every fourth class for "
                    "validation needs at least 4.")

  def subset(keep: np.ndarray) -> Split:
    relabel = np.cumsum(keep) - 1  # old label -> new label among the kept classes
    mask = keep[train.labels]
    names = tuple(name for name, k in zip(train.class_names, keep) if k)
    return Split(train.images[mask], relabel[train.labels[mask]].astype(np.int32), names)

  return subset(~held), subset(held)


def load_data(config: Config, splits: tuple[str, ...] = data.SPLITS) -> dict[str, Split]:
  """The requested splits of the config's dataset; a protocol without val holds out training classes.

  Omniglot's rotations are applied after the hold-out, so a character and its rotations stay in one split.
  """
  options = dict(image_size=config.image_size, protocol=config.protocol, class_order=config.class_order,
                 seed=config.split_seed, bbox_crop=config.bbox_crop)
  available = data.split_names(config.dataset, config.protocol)
  wanted = tuple(s for s in splits if s in available)
  if "val" in splits and "val" not in available and "train" not in wanted:
    wanted = ("train", *wanted)
  loaded = data.load_splits(config.dataset, config.data_dir, config.tfds_dir, wanted, **options)
  if "val" in splits and "val" not in available:
    loaded["train"], loaded["val"] = hold_out_val(loaded["train"])
  return {name: omniglot.rotated(loaded[name]) if config.rotations else loaded[name] for name in splits}


def run_keys(seed: int) -> dict[str, jax.Array]:
  root = jax.random.key(seed)
  return {name: jax.random.fold_in(root, i) for i, name in enumerate(KEY_STREAMS)}


@dataclasses.dataclass
class Experiment:
  """Everything a configuration builds before training: data placed for the device, learner, keys."""

  config: Config
  learner: EpisodicLearner
  sources: dict[str, sources.DeviceSource | sources.HostSource]
  image_shape: tuple[int, ...]  # the backbone's input (after the transforms), not the stored images'
  keys: dict[str, jax.Array]

  @classmethod
  def build(cls, config: Config, splits: tuple[str, ...] = data.SPLITS, placement: str = "auto") -> "Experiment":
    """Load the splits, check they can supply the episodes, and build the learner (writes nothing).

    ``placement`` (see :func:`fewshot.sources.place`) changes where images live, never
    which episodes a run sees, so it is not part of the config.
    """
    loaded = load_data(config, splits)
    shapes = {"train": train_shape(config), "val": train_shape(config), "test": test_shape(config)}
    for name, split in loaded.items():
      shape = shapes[name]
      query_flag = "--test_query" if name == "test" else "--query"
      sources.check_fits(split, name, ("--way", shape.way), {"--shot": shape.shot, query_flag: shape.query})
    placed = {name: sources.place(split, placement) for name, split in loaded.items()}
    stored = next(iter(loaded.values())).image_shape
    if stored[-1] != config.channels:
      raise DataError(f"{config.dataset} images have {stored[-1]} channels where {config.channels} were expected.")
    # The learner is initialised on what the backbone sees, after the transforms.
    return cls(config, build_learner(config), placed, config.input_shape, run_keys(config.seed))

  def init_state(self) -> TrainState:
    return episodic.init_state(self.learner, self.keys["init"], self.image_shape)

  def accuracies(self, state: TrainState, split: str, num_episodes: int) -> np.ndarray:
    """Per-episode accuracy on a split; the same episodes every call (fixed key)."""
    shape = test_shape(self.config) if split == "test" else train_shape(self.config)
    variables = episodic.model_variables(state)
    return np.asarray(episodic.evaluate(self.learner, variables, self.sources[split], self.keys[split], num_episodes,
                                        shape))

  def test(self, state: TrainState) -> dict:
    accuracies = self.accuracies(state, "test", self.config.test_episodes)
    mean, half_width = stats.mean_confidence_interval(100.0 * accuracies)
    return {"model": self.config.model_name, "test_accuracy": mean, "test_ci95": half_width,
            "test_episodes": len(accuracies), "test_query": self.config.test_query}

