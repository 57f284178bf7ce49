"""A few-shot run's configuration: every option of ``python -m fewshot.train``, its default, help and validation.

The flags are generated from these fields (:mod:`fewshot.options`); the dataset's options
are validated and resolved by the data package (:func:`fewshot.data.catalog.resolve`), so
that a saved configuration names its data exactly.
"""

from __future__ import annotations

import dataclasses
import os

from fewshot import choices, method_rows
from fewshot.data import catalog
from fewshot.errors import ConfigError
from fewshot.options import DATA, MODEL, RUNS, RunOptions, conv_option, option, precision_option

# Episode counts of the distance-ratio paper (arXiv 2201.08676, Sec. 4; docs/protocol.md#training-and-model-selection)
# for its datasets; the small datasets get counts that finish in minutes on a 2-core CPU.
PAPER_EPISODES = {1: 60_000, 5: 50_000}
# Queries per class of the paper's protocol (docs/protocol.md#episodes): 16 in training and validation episodes, 15 in
# test episodes.
PAPER_QUERY, PAPER_TEST_QUERY = 16, 15
SMALL_DATASET_EPISODES = 2_000
TRAIN_SPLITS = ("train", "train+val")
MAX_STEPS = 2 ** 31  # the train state's step is an int32
# The headings of --help the options are listed under, with options.DATA, options.MODEL and options.RUNS.
TRAINING, EVALUATION = "episodes and training", "evaluation"


@dataclasses.dataclass(frozen=True)
class _Where:
  """Which dataset, and where its files and prepared copy live."""

  dataset: str = option("strokes", "the dataset", choices=catalog.DATASETS, heading=DATA)
  data_dir: str | None = option(None, "folder with the dataset's files (omniglot: its zips or extracted folders); "
                                "not part of the run: --resume may name a new one, which the resumed run reads",
                                heading=DATA)
  tfds_dir: str | None = option(None, "where prepared datasets live (default $TFDS_DATA_DIR or ~/tensorflow_datasets); "
                                "--resume may name a new one, which the resumed run uses", heading=DATA)


@dataclasses.dataclass(frozen=True)
class _ModelAndMethod:
  """The backbone, the head and the method (each method's own options follow, from its row)."""

  # A backbone or head passed as a value from Python is recorded as custom:<name> (fewshot.train.train).
  backbone: str = option("conv4", "the backbone", choices=choices.OrCustom(choices.BACKBONES), heading=MODEL)
  head: str = option("softmax", "softmax (logits -d^2) or dr (distance ratio, logits -theta log d)",
                     choices=choices.OrCustom(choices.HEADS), heading=MODEL)
  classifier: str = option("proto", "proto (distance to the class mean) or nn (to the nearest support point)",
                           choices=choices.CLASSIFIERS, heading=MODEL)
  distance: str = option("squared_euclidean", "class distance D of the heads, softmax logit -D: squared_euclidean "
                         "(the paper's), euclidean (easyfsl's ProtoNet), cosine (1 - cos) or angular (the angle, "
                         "squared; the DR paper's Appendix E); dr takes the distance itself (docs/heads.md)",
                         choices=choices.DISTANCES, heading=MODEL)
  method: str = option("protonet", "; ".join(f"{name} ({m.summary})" for name, m in method_rows.METHODS.items()),
                       choices=tuple(method_rows.METHODS), heading=MODEL)


@dataclasses.dataclass(frozen=True)
class _EpisodesAndTraining:
  """The episodes, the schedule, the optimiser and the evaluation."""

  way: int = option(5, "classes per episode", positive=True, heading=TRAINING)
  shot: int = option(1, "support images per class", positive=True, heading=TRAINING)
  query: int | None = option(None, "query images per class in training and validation episodes (default 16, the "
                             "paper's, or as many as the smallest class holds beside --shot: strokes and omniglot "
                             "have 20 images per class, so --shot 5 gets 15)", positive=True,
                             heading=TRAINING)
  test_query: int | None = option(None, "query images per class in test episodes (default 15, the reference "
                                  "protocol's, or as many as the smallest class holds beside --shot)", positive=True,
                                  heading=EVALUATION)
  test_way: int | None = option(None, "classes per validation and test episode (default --way): e.g. train --way 20 "
                                "and validate and test 5-way", positive=True, heading=EVALUATION)
  episodes: int | None = option(None, "training episodes (default: the paper's 60,000/50,000, or 2,000 on small "
                                "datasets)", positive=True, heading=TRAINING)
  patience: int | None = option(None, "stop training once this many checkpoints in a row bring no better validation "
                                "accuracy (the best checkpoint is tested, as always; results.json records where it "
                                "stopped); default: train all --episodes", positive=True, heading=TRAINING)
  train_splits: str = option("train", "what training episodes are drawn from: train, or train+val (retraining on "
                             "both for a length chosen on val, as Snell et al. and Ravi & Larochelle did: nothing "
                             "validates then, and the last checkpoint is tested)", choices=TRAIN_SPLITS,
                             heading=TRAINING)
  eval_every: int = option(100, "episodes between checkpoints (validation, metrics row, checkpoint)", positive=True,
                           heading=TRAINING)
  val_episodes: int = option(100, "validation episodes per checkpoint", positive=True, heading=EVALUATION)
  test_episodes: int = option(600, "test episodes for the final accuracy", positive=True, heading=EVALUATION)
  learning_rate: float = option(1e-3, "Adam learning rate", positive=True, heading=TRAINING)
  lr_halve_every: int | None = option(None, "halve the learning rate every this many episodes (Snell et al.'s "
                                      "Omniglot schedule: 2000); default never, the paper's constant rate",
                                      positive=True, heading=TRAINING)
  centring: str = option("points", "centring of the diagnostics: points (the paper), features (the reference code), "
                         "or both (the paper's fields, and the reference code's as alpha_features, "
                         "norm_ratio_features, con_alpha_features, div_alpha_features)",
                         choices=choices.CENTRINGS, heading=EVALUATION)
  psi_classifier: str = option("model", "class distance of the diagnostics' psi: model (the paper) or proto (the "
                               "reference code)", choices=choices.PSI_CLASSIFIERS, heading=EVALUATION)


@dataclasses.dataclass(frozen=True)
class _ImagesAndSplits:
  """The seed, the images' side and the class splits."""

  seed: int = option(0, "seed of initialisation and of every episode", heading=RUNS)
  image_size: int | None = option(None, "the backbone's input side (default 28 on strokes/omniglot, 32 on "
                                  "cifar_fs/fc100, else 84 with conv4, 224 with resnet18); omniglot takes any side from 28 up, box-filtered from "
                                  "its 105 px originals (Conv4's embedding grows: 64-d at 28, 576-d at 56); image "
                                  "datasets are stored at int(1.15*size)", heading=DATA)
  class_splits: str | None = option(None, "class splits of cub, mini_imagenet, cifar_fs, fc100, cars196, sop: fewshot "
                                "(train/val/test) or "
                                "dml (train/test halves; val holds out every 4th training class); of omniglot: "
                                "default (60/20/20), vinyals_published (Vinyals et al.'s split as published: 1028/172/423 "
                                "characters, tested on 12 evaluation alphabets whole and 4 Gurmukhi characters), vinyals_sizes (a --split_seed order cut "
                                "at those sizes, which earlier runs record as vinyals), lake_small1 / lake_small2 (Lake et al.'s "
                                "minimal settings: one background-small zip trains, a quarter validates, the evaluation "
                                "alphabets test), lists (--split_lists), "
                                "background_evaluation (Lake's alphabets; val held out as under dml) or "
                                "all_characters (every background character found trains but every fourth, which "
                                "validates; test: the evaluation alphabets if found, else that validation quarter); "
                                "default the dataset's", heading=DATA)
  split_lists: str | None = option(None, "omniglot --class_splits lists: a folder of train.txt, val.txt and test.txt, "
                                   "one Alphabet/characterNN a line (a rotation suffix /rotDDD is read as its "
                                   "character); the run records the lists' SHA-256", heading=DATA)
  class_order: str = option("default", "default, or random: classes permuted by --split_seed before splitting",
                            choices=catalog.CLASS_ORDERS, heading=DATA)
  split_seed: int = option(0, "seed of --class_order random and of omniglot's --class_splits vinyals_sizes",
                           heading=DATA)
  bbox_crop: bool = option(False, "crop images to their bounding boxes before resizing (cub, cars196)", heading=DATA)
  rotations: bool = option(False, "omniglot: each character at 0/90/180/270 degrees, four classes (Vinyals et al.)",
                           heading=DATA)
  resize: str = option("box", "omniglot: how the 105 px PNGs become --image_size px: box (grey levels, the default) "
                       "or nearest (binary pixels, as the Prototypical Networks code's PIL resize gives them)",
                       heading=DATA)


@dataclasses.dataclass(frozen=True)
class _TransformsAndNumerics:
  """What training and testing do to the images, and the numerics."""

  within_alphabet: bool = option(False, "omniglot: every training episode draws its classes from one alphabet (its "
                                 "rotated characters included), as Lake's runs do; validation and test episodes are "
                                 "untouched", heading=TRAINING)
  distort: bool = option(False, "strokes/omniglot: each training image through its own small random affine map "
                         "(rotation 10 degrees, shear 0.3, scale 0.8-1.2, shift 2 px per 28 px, each at most; Koch "
                         "et al.), drawn per episode on the device; evaluation is untouched", heading=TRAINING)
  test_shifts: int = option(0, "strokes/omniglot: test episodes and Lake's runs embed each image as the mean over "
                            "its whole-pixel shifts by up to this many pixels each way ((2N+1)^2 views, zero fill; "
                            "validation one view, so training is unchanged); 0: the image alone", heading=EVALUATION)
  augment: bool | None = option(None, "the paper's training augmentation on the device (default: on for the image "
                                "datasets, off for strokes/omniglot)", heading=TRAINING)
  precision: str = precision_option()
  conv: str = conv_option()

_MethodOptions = method_rows.option_sets()  # every method's own options, from the rows (fewshot.method_rows)


# Config derives from the option sets last first: a dataclass lists its bases' fields from the last base on, so
# the flags, --help, config.json and analyze's listings keep the one order they had.
@dataclasses.dataclass(frozen=True)
class Config(_TransformsAndNumerics, _ImagesAndSplits, _EpisodesAndTraining, _MethodOptions, _ModelAndMethod, _Where,
             RunOptions):
  """Every option of a few-shot run (the option sets above), its checks and what it derives."""

  def __post_init__(self):
    self.check_fields()
    data = catalog.resolve(self.dataset, image_size=self.image_size, backbone=self.backbone,
                                class_splits=self.class_splits, class_order=self.class_order, bbox_crop=self.bbox_crop,
                                rotations=self.rotations, resize=self.resize)
    object.__setattr__(self, "image_size", data.image_size)
    object.__setattr__(self, "class_splits", data.class_splits)
    self._check_lists_and_lengths(data)
    self.set_default("augment", data.is_image_dataset)
    self.set_default("test_way", self.way)
    for name in ("way", "test_way"):
      if getattr(self, name) == 1:
        raise ConfigError(f"--{name} 1 draws one-class episodes, which have nothing to classify (loss 0, accuracy "
                          "100% whatever the model); use 2 or more classes.")
    if self.within_alphabet and not catalog.SPECS[self.dataset].superclasses:
      raise ConfigError(f"--within_alphabet draws episodes from one Omniglot alphabet; {self.dataset} has none.")
    if self.distort and data.is_image_dataset:
      raise ConfigError(f"--distort moves ink on a blank background: strokes and omniglot only, not {self.dataset}.")
    if not 0 <= self.test_shifts < data.image_size / 2:
      raise ConfigError(f"--test_shifts must be 0 or more and below half the {data.image_size} px side, got "
                        f"{self.test_shifts}.")
    if self.test_shifts and data.is_image_dataset:
      raise ConfigError(f"--test_shifts moves ink on a blank background: strokes and omniglot only, not {self.dataset}.")
    # Where the dataset's classes are too small for shot + the paper's queries, as many queries as they hold.
    room = max(1, (catalog.SPECS[self.dataset].images_per_class or PAPER_QUERY + self.shot) - self.shot)
    self.set_default("query", min(PAPER_QUERY, room))
    self.set_default("test_query", min(PAPER_TEST_QUERY, room))
    paper = PAPER_EPISODES.get(self.shot, PAPER_EPISODES[1])
    self.set_default("episodes", paper if data.is_image_dataset else SMALL_DATASET_EPISODES)
    self._check_method()
    self.check_fields()  # the resolved defaults too
    if self.episodes >= MAX_STEPS:
      raise ConfigError(f"--episodes must be below {MAX_STEPS:,} (the step counter is a 32-bit integer), got "
                        f"{self.episodes:,}.")
    self.resolve_locations()

  def _check_lists_and_lengths(self, data: catalog.DataOptions) -> None:
    """One-line ``ConfigError`` for --split_lists without --class_splits lists (or the reverse), --train_splits
    train+val without a validation split of the class splits' own, and --patience with nothing to validate on.
    """
    if (self.class_splits == "lists") != (self.split_lists is not None):
      raise ConfigError("--split_lists names the lists of --class_splits lists (omniglot); pass both or neither.")
    if self.split_lists is not None:
      object.__setattr__(self, "split_lists", os.path.abspath(os.path.expanduser(self.split_lists)))
    if self.train_splits == "train+val":
      if "val" not in data.split_names:
        raise ConfigError(f"--train_splits train+val needs class splits with a validation split of their own; "
                          f"--class_splits {data.class_splits} of {self.dataset} has {'/'.join(data.split_names)}.")
      if self.patience is not None:
        raise ConfigError("--patience stops on the validation split, which --train_splits train+val trains on; "
                          "choose the length with a --train_splits train run and pass it as --episodes.")

  def _check_method(self) -> None:
    """A method's options belong to it (:data:`fewshot.method_rows.METHODS`): a one-line ``ConfigError`` for an
    option the run's method would not use (nothing is silently ignored), then the method's own checks and defaults.
    """
    defaults = {field.name: field.default for field in dataclasses.fields(self)}
    method_rows.check_options(self, lambda name: getattr(self, name) != defaults[name])

  @property
  def validates(self) -> bool:
    """Whether checkpoints are chosen on a validation split (not when it is trained on: the last is tested)."""
    return self.train_splits == "train"

  @property
  def is_image_dataset(self) -> bool:
    return catalog.SPECS[self.dataset].kind == catalog.IMAGE

  @property
  def channels(self) -> int:
    return 3 if self.is_image_dataset else 1

  @property
  def input_shape(self) -> tuple[int, int, int]:
    """What the backbone sees: images after the training or evaluation transform."""
    return (self.image_size, self.image_size, self.channels)

  @property
  def model_name(self) -> str:
    return method_rows.METHODS[self.method].model_name(vars(self))

  @property
  def run_name(self) -> str:
    backbone = choices.display_name(self.backbone)
    return f"{self.dataset}_{backbone}_{self.model_name}_{self.way}w{self.shot}s_seed{self.seed}"

