"""What a dataset can be asked for, validated in one place: names, image sizes, class splits.

Both run configurations and :func:`fewshot.data.load_splits` resolve a dataset's options
through :func:`resolve`, which fills in the defaults (so that a saved configuration names
its data exactly) and refuses, in one line, an option the dataset does not have. Nothing
here reads data, so configurations and analysis import it without tensorflow_datasets.
"""

from __future__ import annotations

import dataclasses

from fewshot.errors import ConfigError

SMALL_DATASETS = ("strokes", "omniglot")  # 28x28x1, ink 255 on 0
IMAGE_DATASETS = ("cub", "mini_imagenet", "cars196", "sop")  # RGB, stored at stored_size(image_size)
DATASETS = SMALL_DATASETS + IMAGE_DATASETS
SPLITS = ("train", "val", "test")
BBOX_DATASETS = ("cub", "cars196")
CLASS_ORDERS = ("default", "random")

# The class splits each dataset can be divided into (--class_splits), with the splits each defines. Omniglot: the stored
# 60/20/20 split, Vinyals et al.'s published lists (fewshot/data/lists/vinyals), a seeded permutation cut at Vinyals et
# al.'s sizes, Lake et al.'s background / evaluation alphabets, every background character found (a quarter held out
# for validation), Lake et al.'s minimal settings (one background-small zip's characters train, a quarter held out,
# the evaluation alphabets test: fewshot/data/lists/lake_small*), or a user's own lists (--split_lists); the image datasets: few-shot train/val/test or the DML halves
# (fewshot.data.class_splits).
CLASS_SPLITS = {"omniglot": ("default", "vinyals_published", "vinyals_sizes", "background_evaluation", "all_characters",
                             "lake_small1", "lake_small2", "lists"),
                "cub": ("fewshot", "dml"), "mini_imagenet": ("fewshot",), "cars196": ("dml",), "sop": ("dml",)}
DEFAULT_CLASS_SPLITS = {dataset: names[0] for dataset, names in CLASS_SPLITS.items()}
SPLITS_OF = {"default": SPLITS, "vinyals_published": SPLITS, "vinyals_sizes": SPLITS, "lists": SPLITS,
             "lake_small1": SPLITS, "lake_small2": SPLITS,
             "background_evaluation": ("train", "test"), "all_characters": SPLITS, "fewshot": SPLITS,
             "dml": ("train", "test")}
# Class splits read from lists of class names (fewshot.data.class_lists).
LISTED_CLASS_SPLITS = ("vinyals_published", "lake_small1", "lake_small2", "lists")
# Names a class split had before it got one that says what it is: a record naming the old one reads under the new
# (fewshot.options.current_names); on the command line the old name is refused, naming both.
RENAMED_CLASS_SPLITS = {"vinyals": "vinyals_sizes"}

SMALL_IMAGE_SIZE = 28  # strokes and omniglot are stored and used at 28x28 by default
# Omniglot's 105x105 originals can also be box-filtered to a larger side (strokes is drawn at 28 only); below 28
# Conv4's four 2x2 pools would leave less than one pixel.
RESIZABLE_SMALL_DATASETS = ("omniglot",)
# Images in every class, where a dataset fixes it (Omniglot: 20 drawers per character; strokes draws 20; mini-ImageNet
# 600): what default episode sizes are chosen from before any data is read. The loaded split is still checked.
IMAGES_PER_CLASS = {"strokes": 20, "omniglot": 20, "mini_imagenet": 600}
# The backbone's input side on the image datasets: the few-shot papers' 84 for Conv4, ImageNet's 224 for ResNet-18.
DEFAULT_IMAGE_SIZES = {"conv4": 84, "resnet18": 224}
MIN_IMAGE_SIZE = 8
# Images are stored at the evaluation transform's resize side, int(1.15 * size) (docs/protocol.md: resize, then
# centre crop).
STORED_SIZE_FACTOR = 1.15

DEVICE_BUDGET_BYTES = 4 << 30  # per split: one that fits stays on the device, a larger one streams from the host


def stored_size(image_size: int) -> int:
  """The side images are stored at for a model input of ``image_size``: 96 for 84, 257 for 224."""
  return int(STORED_SIZE_FACTOR * int(image_size))


def fits_on_device(nbytes: int, budget_bytes: int = DEVICE_BUDGET_BYTES) -> bool:
  """The placement rule: a split whose images take ``nbytes`` stays on the device if it fits the budget."""
  return nbytes <= budget_bytes


@dataclasses.dataclass(frozen=True)
class DataOptions:
  """A dataset's options, resolved: ``image_size`` and ``class_splits`` hold the defaults they stood for."""

  dataset: str
  image_size: int
  class_splits: str | None  # None: strokes, which has one fixed split
  class_order: str = "default"
  bbox_crop: bool = False
  rotations: bool = False

  @property
  def split_names(self) -> tuple[str, ...]:
    return SPLITS if self.class_splits is None else SPLITS_OF[self.class_splits]

  @property
  def is_image_dataset(self) -> bool:
    return self.dataset in IMAGE_DATASETS

  @property
  def channels(self) -> int:
    return 3 if self.is_image_dataset else 1


def check_choice(name: str, value, choices) -> None:
  """A one-line ``ConfigError`` naming the choices unless ``value`` is one of them."""
  if value not in choices:
    raise ConfigError(f"unknown --{name} {value!r}; choose one of {', '.join(choices)}.")


def resolve(dataset: str, *, image_size: int | None = None, backbone: str = "conv4", class_splits: str | None = None,
            class_order: str = "default", bbox_crop: bool = False, rotations: bool = False) -> DataOptions:
  """The options with their defaults filled in; a one-line ``ConfigError`` for one the dataset does not have."""
  check_choice("dataset", dataset, DATASETS)
  check_choice("class_order", class_order, CLASS_ORDERS)
  if dataset in IMAGE_DATASETS:
    size = DEFAULT_IMAGE_SIZES.get(backbone, DEFAULT_IMAGE_SIZES["conv4"]) if image_size is None else image_size
    if isinstance(size, bool) or not isinstance(size, int):
      raise ConfigError(f"--image_size must be an integer, got {size!r}.")
    if size < MIN_IMAGE_SIZE:
      raise ConfigError(f"--image_size must be at least {MIN_IMAGE_SIZE}, got {size}.")
    class_splits = DEFAULT_CLASS_SPLITS[dataset] if class_splits is None else class_splits
    if class_splits not in CLASS_SPLITS[dataset]:
      raise ConfigError(f"--class_splits {class_splits} is not defined for {dataset}; "
                        f"choose one of {', '.join(CLASS_SPLITS[dataset])}.")
    if bbox_crop and dataset not in BBOX_DATASETS:
      raise ConfigError(f"{dataset} has no bounding boxes; --bbox_crop needs one of {', '.join(BBOX_DATASETS)}.")
    if rotations:
      raise ConfigError(f"--rotations turns omniglot characters into new classes; {dataset} has none.")
    return DataOptions(dataset, size, class_splits, class_order, bbox_crop, rotations)
  size = SMALL_IMAGE_SIZE if image_size is None else image_size
  if dataset in RESIZABLE_SMALL_DATASETS and image_size is not None:
    if isinstance(size, bool) or not isinstance(size, int) or size < SMALL_IMAGE_SIZE:
      raise ConfigError(f"--image_size of {dataset} must be an integer of at least {SMALL_IMAGE_SIZE}, got {size!r}.")
  elif image_size not in (None, SMALL_IMAGE_SIZE):
    raise ConfigError(f"{dataset} images are {SMALL_IMAGE_SIZE}x{SMALL_IMAGE_SIZE}; --image_size {image_size} applies "
                      f"to omniglot and {', '.join(IMAGE_DATASETS)} (use {SMALL_IMAGE_SIZE} or leave it out).")
  fixed = {"class_order": (class_order, "default"), "bbox_crop": (bbox_crop, False)}
  if dataset == "omniglot":
    class_splits = DEFAULT_CLASS_SPLITS[dataset] if class_splits is None else class_splits
    if class_splits in RENAMED_CLASS_SPLITS:
      raise ConfigError(f"--class_splits {class_splits} is now named {RENAMED_CLASS_SPLITS[class_splits]} (a seeded "
                        "permutation cut at Vinyals et al.'s sizes, not their split; runs that recorded it read as "
                        "that); Vinyals et al.'s published split is vinyals_published.")
    if class_splits not in CLASS_SPLITS[dataset]:
      raise ConfigError(f"--class_splits {class_splits} is not defined for omniglot; choose one of "
                        f"{', '.join(CLASS_SPLITS[dataset])}.")
  else:
    fixed.update(class_splits=(class_splits, None), rotations=(rotations, False))
  for name, (value, default) in fixed.items():
    if value != default:
      also = " and omniglot." if name in ("class_splits", "rotations") else "."
      raise ConfigError(f"{dataset} has fixed class splits and no boxes; --{name} applies to "
                        f"{', '.join(IMAGE_DATASETS)}{also}")
  return DataOptions(dataset, size, class_splits, class_order, bbox_crop, rotations)
