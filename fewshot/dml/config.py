"""A metric-learning run's configuration: every option of ``python -m fewshot.dml.train`` (the reality check's
defaults: Musgrave, Belongie & Lim 2020, arXiv 2003.08505; docs/protocol.md), its help and validation; the flags
are generated from these fields.
"""

from __future__ import annotations

import dataclasses

from fewshot import choices
from fewshot.data import catalog
from fewshot.dml import loss_specs
from fewshot.errors import ConfigError
from fewshot.options import DATA, RUNS, RunOptions, conv_option, option, precision_option

# The reality check's batches (Musgrave et al., 2020): C = 8 classes x M = 4 images for embedding losses, which
# need positive pairs in every batch; C = 32 x M = 1 for classification (proxy) losses.
EMBEDDING_LOSS_BATCH = (8, 4)
CLASSIFICATION_LOSS_BATCH = (32, 1)
SMALL_DATASET_EPOCHS = 20
IMAGE_DATASET_EPOCHS = 100
FOLDS = (1, 4)
# The headings of --help the options are listed under, with options.DATA and options.RUNS.
MODEL, TRAINING = "model and loss", "batches and training"


@dataclasses.dataclass(frozen=True)
class DMLConfig(RunOptions):
  dataset: str = option("strokes", "the dataset (strokes: embedded, built by the package)",
                        choices=catalog.DATASETS, heading=DATA)
  data_dir: str | None = option(None, "folder with the dataset's files (archives or extracted folders); not part of "
                                "the run: --resume may name a new one", heading=DATA)
  tfds_dir: str | None = option(None, "where prepared datasets live (default $TFDS_DATA_DIR or ~/tensorflow_datasets); "
                                "--resume may name a new one", heading=DATA)
  backbone: str = option("conv4", "the backbone", choices=choices.BACKBONES, heading=MODEL)
  embedding_dim: int = option(128, "dimension of the L2-normalised embedding", positive=True, heading=MODEL)
  loss: str = option("triplet", f"the loss, one of {', '.join(loss_specs.SPECS)} (a run of a user-written loss, "
                     f"trained from Python, records {choices.CUSTOM_PREFIX}<its name>)", heading=MODEL)
  miner: str = option("none", "triplet-taking losses only", choices=("none", *choices.MINERS), heading=MODEL)
  classes: int | None = option(None, "classes per batch (default 8 for embedding losses, 32 for classification "
                               "losses)", positive=True, heading=TRAINING)
  per_class: int | None = option(None, "images per class in a batch (default 4 for embedding losses, 1 for "
                                 "classification)", positive=True, heading=TRAINING)
  class_pool: int | None = option(None, "hard negative class mining (Sohn 2016, as N-pair trained): each step draws "
                                  "this many classes and trains on the --classes of them that the model confuses "
                                  "most (default: --classes drawn at random)", positive=True, heading=TRAINING)
  steps_per_epoch: int = option(100, "training steps between validations", positive=True, heading=TRAINING)
  epochs: int | None = option(None, "epochs (default 20 on strokes/omniglot, 100 on the image datasets)",
                              positive=True, heading=TRAINING)
  learning_rate: float = option(1e-3, "Adam learning rate of the model", positive=True, heading=TRAINING)
  loss_learning_rate: float | None = option(None, "Adam learning rate of the loss's own parameters (proxies, "
                                            "scales); default --learning_rate", positive=True, heading=TRAINING)
  image_size: int | None = option(None, "model input side (default 28 on strokes/omniglot, 84 conv4, 224 resnet18)",
                                  heading=DATA)
  class_order: str = option("default", "the class order the train/test halves are cut from: default or random",
                            choices=catalog.CLASS_ORDERS, heading=DATA)
  split_seed: int = option(0, "seed of --class_order random (and of the folds' order under it)", heading=DATA)
  folds: int = option(1, "1 (one validation fold) or 4 (4 fold models, separated and concatenated results)",
                      heading=TRAINING)
  seed: int = option(0, "seed of initialisation and of every batch", heading=RUNS)
  precision: str = precision_option()
  conv: str = conv_option()

  def __post_init__(self):
    self.check_fields()
    spec = loss_specs.SPECS.get(self.loss)  # None: a user's loss, which says its facts itself
    if spec is None and not self.custom_loss:
      raise ConfigError(f"unknown --loss {self.loss!r}; choose one of {', '.join(loss_specs.SPECS)}.")
    # A user's loss says itself whether it takes triplets: fewshot.dml.embedding.MetricLearner checks it.
    if self.miner != "none" and spec is not None and not spec.takes_triplets:
      takes = ", ".join(loss_specs.triplet_losses())
      raise ConfigError(f"the {self.loss} loss does not take mined triplets; use --miner none, or a miner only with "
                        f"--loss {takes}.")
    if self.folds not in FOLDS:
      raise ConfigError(f"--folds must be 1 (one validation fold) or 4 (the reality check's cross-validation), "
                        f"got {self.folds}.")
    data = catalog.resolve(self.dataset, image_size=self.image_size, backbone=self.backbone,
                                class_splits=self.class_splits, class_order=self.class_order)
    object.__setattr__(self, "image_size", data.image_size)
    classes, per_class = CLASSIFICATION_LOSS_BATCH if spec is not None and spec.per_class else EMBEDDING_LOSS_BATCH
    self.set_default("classes", classes)
    self.set_default("per_class", per_class)
    self.set_default("epochs", IMAGE_DATASET_EPOCHS if data.is_image_dataset else SMALL_DATASET_EPOCHS)
    self.set_default("loss_learning_rate", self.learning_rate)
    self.check_fields()  # the resolved defaults too
    choices.check_batch(self.loss, () if spec is None else spec.needs, self.classes, self.per_class)
    if self.class_pool is not None and self.class_pool <= self.classes:
      raise ConfigError(f"--class_pool {self.class_pool} must be larger than --classes {self.classes} to mine classes "
                        f"from it; raise it ({4 * self.classes}, say) or leave it out.")
    self.resolve_locations()

  @property
  def custom_loss(self) -> bool:
    """Whether the loss is a user-written one (trained from Python, which passes its function again)."""
    return self.loss.startswith(choices.CUSTOM_PREFIX) and len(self.loss) > len(choices.CUSTOM_PREFIX)

  @property
  def model_name(self) -> str:
    """The loss, and its miner where it has one (``triplet (semi_hard)``): what analysis names a run's arm and curves
    by, as it names a few-shot run's by its model (``Config.model_name``); mined classes named too
    (``npair (hard classes of 32)``).
    """
    mining = [] if self.miner == "none" else [self.miner]
    if self.class_pool is not None:
      mining.append(f"hard classes of {self.class_pool}")
    return self.loss + (f" ({', '.join(mining)})" if mining else "")

  @property
  def run_name(self) -> str:
    return f"dml_{self.dataset}_{self.backbone}_{self.loss.replace(':', '-')}_seed{self.seed}"

  @property
  def class_splits(self) -> str | None:
    """The image datasets' 'dml' class split (train/test halves) where they have it; mini_imagenet has only 'fewshot'."""
    spec = catalog.SPECS[self.dataset]
    if spec.kind == catalog.SMALL:
      return None
    return "dml" if "dml" in spec.class_splits else "fewshot"
