"""What a dataset can be asked for, validated in one place: names, image sizes, class splits.

Both run configurations and :func:`fewshot.data.load_splits` resolve a dataset's options
through :func:`resolve`, which fills in the defaults (so that a saved configuration names
its data exactly) and refuses, in one line, an option the dataset does not have. Nothing
here reads data, so configurations and analysis import it without tensorflow_datasets.

Each dataset is one row of :data:`SPECS` (a :class:`DatasetSpec`: its kind, class splits and the rule of each,
boxes, images per class, memory figures and where its reader lives); every name list here (``DATASETS``,
``IMAGE_DATASETS``, ...) is read from the rows when it is used, so a row added at run time is a dataset everywhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from fewshot.errors import ConfigError

SPLITS = ("train", "val", "test")
CLASS_ORDERS = ("default", "random")
RESIZES = ("box", "nearest")  # --resize: how source images reach the stored size (DatasetSpec.resizes)
SMALL, IMAGE = "small", "image"  # the kinds: 28x28x1, ink 255 on 0; or RGB, stored at stored_size(image_size)
# The rules that make a class split: the splits as prepared (strokes, omniglot's 60/20/20); omniglot's characters
# pooled and split again (fewshot.data.omniglot.character_splits); and on positions of a class order
# (fewshot.data.class_splits): even -> train, % 4 == 1 -> val, % 4 == 3 -> test (Chen et al.); the first half ->
# train, the rest -> test; the partition the dataset's files give.
STORED, CHARACTERS, PARITY, HALVES, FILES = "stored", "characters", "parity", "halves", "files"
RULES = {SMALL: (STORED, CHARACTERS), IMAGE: (PARITY, HALVES, FILES)}
_RULE_SPLITS = {PARITY: ("train", "val", "test"), HALVES: ("train", "test")}  # the others make those of their name
SPLITS_OF = {"default": SPLITS, "vinyals_published": SPLITS, "vinyals_sizes": SPLITS, "lists": SPLITS,
             "lake_small1": SPLITS, "lake_small2": SPLITS,
             "background_evaluation": ("train", "test"), "all_characters": SPLITS, "fewshot": SPLITS,
             "dml": ("train", "test")}
# Class splits read from lists of class names (fewshot.data.class_lists).
LISTED_CLASS_SPLITS = ("vinyals_published", "lake_small1", "lake_small2", "lists")
# Names a class split had before it got one that says what it is: a record naming the old one reads under the new
# (fewshot.options.current_names); on the command line the old name is refused, naming both.
RENAMED_CLASS_SPLITS = {"vinyals": "vinyals_sizes"}


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
  """One dataset as a row of :data:`SPECS`: every fact the package needs of it before a file is read.

  Attributes:
    name: its ``--dataset`` name.
    kind: ``SMALL`` (28x28x1, ink 255 on 0) or ``IMAGE`` (RGB, stored at ``stored_size(image_size)``).
    reader: the module that reads it, imported on first use (so that configurations name datasets without
      tensorflow_datasets): an image dataset's has ``locate(data_dir)`` and ``read_<name>(data_dir)``
      (``fewshot.data.readers``), a small one's ``builder(data_dir, tfds_dir, size)`` (its prepared tfds builder)
      and, where it knows them, ``files(data_dir)``: the files it reads and those it leaves unread.
    class_splits: ``{--class_splits name: the rule in RULES that makes it}``, the default first; empty: one fixed
      split (strokes).
    boxes: whether its images have bounding boxes (``--bbox_crop``).
    images_per_class: the images in every class where the dataset fixes it: default episode sizes are chosen from
      it before any data is read (the loaded split is still checked).
    split_images: ``{class splits: {split: images}}`` of the real dataset in the default class order
      (``fewshot.data.memory``).
    resizable: a small dataset that can also be stored larger than 28 px (omniglot, box-filtered from its 105 px
      originals; strokes is drawn at 28 only).
    superclasses: whether its classes group into superclasses a draw can keep to (omniglot's alphabets).
    resizes: how its source images can be brought to the stored size (``--resize``): omniglot's 1-bit PNGs box-filtered
      to grey levels or sampled NEAREST to binary pixels (the Prototypical Networks code's inputs).
    built: whether the package makes it, so it has no files to read (strokes).
    image_size: an image dataset's default model input side where its images fix one (CIFAR's 32 px); None: the
      backbone's (``DEFAULT_IMAGE_SIZES``).
  """

  name: str
  kind: str
  reader: str
  class_splits: dict[str, str] = dataclasses.field(default_factory=dict)
  boxes: bool = False
  images_per_class: int | None = None
  split_images: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
  resizable: bool = False
  superclasses: bool = False
  built: bool = False
  resizes: tuple[str, ...] = ("box",)
  image_size: int | None = None

  def __post_init__(self):
    if self.kind not in RULES:
      raise ConfigError(f"dataset {self.name}'s kind is {self.kind!r}; use catalog.SMALL or catalog.IMAGE.")
    for name, rule in self.class_splits.items():
      splits = SPLITS_OF.get(name)
      if rule not in RULES[self.kind] or splits is None or splits != _RULE_SPLITS.get(rule, splits):
        raise ConfigError(f"dataset {self.name}'s class splits {name!r} (rule {rule!r}) needs a name of SPLITS_OF "
                          f"with the rule's splits and one of the {self.kind} datasets' rules, "
                          f"{', '.join(RULES[self.kind])}.")
    if self.kind == IMAGE and not self.class_splits:
      raise ConfigError(f"image dataset {self.name} needs class splits: class_splits={{'fewshot': catalog.PARITY}}.")


# The datasets, one row each (a new one is its reader and its row). Omniglot's class splits: the stored 60/20/20
# split, Vinyals et al.'s published lists (fewshot/data/lists/vinyals), a seeded permutation cut at Vinyals et al.'s
# sizes, Lake et al.'s background / evaluation alphabets, every background character found (a quarter held out for
# validation), Lake et al.'s minimal settings (one background-small zip's characters train, a quarter held out, the
# evaluation alphabets test: fewshot/data/lists/lake_small*), or a user's own lists (--split_lists); the image
# datasets': few-shot train/val/test or the DML halves (fewshot.data.class_splits). Images per split: CUB's fewshot
# counts are those of Chen et al.'s base / val / novel files. CIFAR-FS and FC100: CIFAR-100 under two published class
# splits (lists shipped in fewshot/data/lists), at CIFAR's own 32 px by default.
SPECS: dict[str, DatasetSpec] = {spec.name: spec for spec in (
    DatasetSpec("strokes", SMALL, "fewshot.data.strokes", images_per_class=20, built=True),
    DatasetSpec("omniglot", SMALL, "fewshot.data.omniglot", {
        "default": STORED, "vinyals_published": CHARACTERS, "vinyals_sizes": CHARACTERS,
        "background_evaluation": CHARACTERS, "all_characters": CHARACTERS, "lake_small1": CHARACTERS,
        "lake_small2": CHARACTERS, "lists": CHARACTERS}, images_per_class=20, resizable=True, superclasses=True,
        resizes=("box", "nearest")),
    DatasetSpec("cub", IMAGE, "fewshot.data.readers.cub", {"fewshot": PARITY, "dml": HALVES}, boxes=True,
                split_images={"fewshot": {"train": 5_885, "val": 2_950, "test": 2_953},
                              "dml": {"train": 5_864, "test": 5_924}}),
    DatasetSpec("mini_imagenet", IMAGE, "fewshot.data.readers.mini_imagenet", {"fewshot": FILES}, images_per_class=600,
                split_images={"fewshot": {"train": 38_400, "val": 9_600, "test": 12_000}}),
    DatasetSpec("cifar_fs", IMAGE, "fewshot.data.readers.cifar100", {"fewshot": FILES}, images_per_class=600,
                split_images={"fewshot": {"train": 38_400, "val": 9_600, "test": 12_000}}, image_size=32),
    DatasetSpec("fc100", IMAGE, "fewshot.data.readers.cifar100", {"fewshot": FILES}, images_per_class=600,
                split_images={"fewshot": {"train": 36_000, "val": 12_000, "test": 12_000}}, image_size=32),
    DatasetSpec("cars196", IMAGE, "fewshot.data.readers.cars196", {"dml": HALVES}, boxes=True,
                split_images={"dml": {"train": 8_054, "test": 8_131}}),
    DatasetSpec("sop", IMAGE, "fewshot.data.readers.sop", {"dml": FILES},
                split_images={"dml": {"train": 59_551, "test": 60_502}}),
)}


class _Names(Sequence):
  """The names of the rows of :data:`SPECS` that ``keep`` holds, read at each use, so that a row added later (a
  user's dataset) is among them wherever the names are checked or listed.
  """

  def __init__(self, keep: Callable[[DatasetSpec], bool]):
    self._keep = keep

  def _names(self) -> tuple[str, ...]:
    return tuple(name for name, spec in SPECS.items() if self._keep(spec))

  def __getitem__(self, index):
    return self._names()[index]

  def __len__(self) -> int:
    return len(self._names())

  def __iter__(self):
    return iter(self._names())

  def __contains__(self, name) -> bool:
    return name in self._names()

  def __eq__(self, other) -> bool:
    return self._names() == tuple(other) if isinstance(other, (tuple, _Names)) else NotImplemented

  __hash__ = None

  def __repr__(self) -> str:
    return repr(self._names())


DATASETS = _Names(lambda spec: True)
SMALL_DATASETS = _Names(lambda spec: spec.kind == SMALL)
IMAGE_DATASETS = _Names(lambda spec: spec.kind == IMAGE)
BBOX_DATASETS = _Names(lambda spec: spec.boxes)


def spec_of(dataset: str) -> DatasetSpec:
  """The row of ``dataset``; a one-line ``ConfigError`` naming the datasets for an unknown one."""
  check_choice("dataset", dataset, DATASETS)
  return SPECS[dataset]


# Small datasets are stored and used at 28x28 by default; a resizable one takes any larger side (below 28 Conv4's four
# 2x2 pools would leave less than one pixel).
SMALL_IMAGE_SIZE = 28
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
  resize: str = "box"  # how the source images were brought to the stored size (DatasetSpec.resizes)

  @property
  def split_names(self) -> tuple[str, ...]:
    return SPLITS if self.class_splits is None else SPLITS_OF[self.class_splits]

  @property
  def is_image_dataset(self) -> bool:
    return SPECS[self.dataset].kind == IMAGE

  @property
  def channels(self) -> int:
    return 3 if self.is_image_dataset else 1


def check_choice(name: str, value, choices) -> None:
  """A one-line ``ConfigError`` naming the choices unless ``value`` is one of them."""
  if value not in choices:
    raise ConfigError(f"unknown --{name} {value!r}; choose one of {', '.join(choices)}.")


def _listed(keep: Callable[[DatasetSpec], bool]) -> str:
  return ", ".join(_Names(keep))


def resolve(dataset: str, *, image_size: int | None = None, backbone: str = "conv4", class_splits: str | None = None,
            class_order: str = "default", bbox_crop: bool = False, rotations: bool = False,
            resize: str = "box") -> DataOptions:
  """The options with their defaults filled in; a one-line ``ConfigError`` for one the dataset does not have."""
  spec = spec_of(dataset)
  check_choice("class_order", class_order, CLASS_ORDERS)
  check_choice("resize", resize, RESIZES)
  if resize not in spec.resizes:
    raise ConfigError(f"--resize {resize} applies to {_listed(lambda s: resize in s.resizes)} (1-bit source images); "
                      f"{dataset} reaches its stored size one way only: leave --resize out.")
  if spec.kind == IMAGE:
    default = spec.image_size or DEFAULT_IMAGE_SIZES.get(backbone, DEFAULT_IMAGE_SIZES["conv4"])
    size = default if image_size is None else image_size
    if isinstance(size, bool) or not isinstance(size, int):
      raise ConfigError(f"--image_size must be an integer, got {size!r}.")
    if size < MIN_IMAGE_SIZE:
      raise ConfigError(f"--image_size must be at least {MIN_IMAGE_SIZE}, got {size}.")
    class_splits = next(iter(spec.class_splits)) if class_splits is None else class_splits
    if class_splits not in spec.class_splits:
      raise ConfigError(f"--class_splits {class_splits} is not defined for {dataset}; "
                        f"choose one of {', '.join(spec.class_splits)}.")
    if bbox_crop and not spec.boxes:
      raise ConfigError(f"{dataset} has no bounding boxes; --bbox_crop needs one of {', '.join(BBOX_DATASETS)}.")
    if rotations:
      raise ConfigError(f"--rotations turns omniglot characters into new classes; {dataset} has none.")
    return DataOptions(dataset, size, class_splits, class_order, bbox_crop, rotations, resize)
  size = SMALL_IMAGE_SIZE if image_size is None else image_size
  if spec.resizable and image_size is not None:
    if isinstance(size, bool) or not isinstance(size, int) or size < SMALL_IMAGE_SIZE:
      raise ConfigError(f"--image_size of {dataset} must be an integer of at least {SMALL_IMAGE_SIZE}, got {size!r}.")
  elif image_size not in (None, SMALL_IMAGE_SIZE):
    raise ConfigError(f"{dataset} images are {SMALL_IMAGE_SIZE}x{SMALL_IMAGE_SIZE}; --image_size {image_size} applies "
                      f"to {_listed(lambda s: s.resizable)} and {', '.join(IMAGE_DATASETS)} (use {SMALL_IMAGE_SIZE} "
                      "or leave it out).")
  fixed = {"class_order": (class_order, "default"), "bbox_crop": (bbox_crop, False)}
  if spec.class_splits:  # omniglot: its characters split again, and rotated
    class_splits = next(iter(spec.class_splits)) if class_splits is None else class_splits
    if class_splits in RENAMED_CLASS_SPLITS:
      raise ConfigError(f"--class_splits {class_splits} is now named {RENAMED_CLASS_SPLITS[class_splits]} (a seeded "
                        "permutation cut at Vinyals et al.'s sizes, not their split; runs that recorded it read as "
                        "that); Vinyals et al.'s published split is vinyals_published.")
    if class_splits not in spec.class_splits:
      raise ConfigError(f"--class_splits {class_splits} is not defined for {dataset}; choose one of "
                        f"{', '.join(spec.class_splits)}.")
  else:
    fixed.update(class_splits=(class_splits, None), rotations=(rotations, False))
  for name, (value, default) in fixed.items():
    if value != default:
      also = (f" and {_listed(lambda s: s.kind == SMALL and bool(s.class_splits))}."
              if name in ("class_splits", "rotations") else ".")
      raise ConfigError(f"{dataset} has fixed class splits and no boxes; --{name} applies to "
                        f"{', '.join(IMAGE_DATASETS)}{also}")
  return DataOptions(dataset, size, class_splits, class_order, bbox_crop, rotations, resize)
