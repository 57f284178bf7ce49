"""Loading a dataset's class splits: prepared once under the tfds dir, read back, held out, rotated."""

from __future__ import annotations

import importlib
import pathlib
from collections.abc import Sequence
from types import ModuleType

from fewshot.data import catalog, class_splits, holdout, images, omniglot, tfds_io
from fewshot.data.split import Split
from fewshot.errors import DataError


def default_tfds_dir(tfds_dir: str | None = None) -> str:
  """``tfds_dir``, else ``$TFDS_DATA_DIR``, else ``~/tensorflow_datasets``."""
  return tfds_io.default_tfds_dir(tfds_dir)


def reader(dataset: str) -> ModuleType:
  """The module that reads ``dataset``, as its row names it (``catalog.DatasetSpec.reader``), imported now."""
  return importlib.import_module(catalog.spec_of(dataset).reader)


def _read(resolved: catalog.DataOptions, data_dir: str | None, tfds_dir: str | None, seed: int,
          wanted: tuple[str, ...], split_lists: str | None = None) -> dict[str, Split]:
  """The splits ``wanted`` of the class splits, as stored or split again."""
  if resolved.is_image_dataset:
    prepared = images.prepare(resolved.dataset, data_dir, tfds_dir, size=catalog.stored_size(resolved.image_size),
                              bbox_crop=resolved.bbox_crop)
    ids = class_splits.class_ids(resolved.dataset, prepared.class_subsets, class_splits=resolved.class_splits,
                                    class_order=resolved.class_order, seed=seed)
    return {split: prepared.read(ids[split]) for split in wanted}
  resized = {} if resolved.resize == "box" else {"resize": resolved.resize}  # only a row's resizes reach here
  b = reader(resolved.dataset).builder(data_dir, default_tfds_dir(tfds_dir), resolved.image_size, **resized)
  if catalog.SPECS[resolved.dataset].class_splits.get(resolved.class_splits, catalog.STORED) == catalog.STORED:
    return {split: tfds_io.read_split(b, split) for split in wanted}
  # catalog.CHARACTERS: omniglot's stored default split's characters, pooled and split again.
  pooled = Split.concatenate(tfds_io.read_split(b, split) for split in catalog.SPLITS)
  characters = omniglot.character_splits(list(pooled.class_names), resolved.class_splits, seed, split_lists)
  return {split: omniglot.by_characters(pooled, characters[split]) for split in wanted}


def load_splits(dataset: str, data_dir: str | None = None, tfds_dir: str | None = None,
                splits: Sequence[str] | None = None, *, image_size: int | None = None, class_splits: str | None = None,
                class_order: str = "default", seed: int = 0, bbox_crop: bool = False,
                rotations: bool = False, split_lists: str | None = None, resize: str = "box") -> dict[str, Split]:
  """Loads several class splits of ``dataset`` at once (one preparation check).

  Args:
    dataset: one of ``catalog.DATASETS``. 'strokes' is built by the package and ignores data_dir.
    data_dir: the folder holding the dataset's files (archives or extracted folders);
      see ``fewshot.data.readers`` for each image dataset's layouts.
    tfds_dir: where prepared data lives; see default_tfds_dir.
    splits: split names; None: those its class splits define. 'val' under class splits
      without one is every fourth training class, held out (``holdout.every_fourth_class``).
    image_size: image datasets: the model's input side (default 84); images are
      stored at int(1.15 * image_size) (96 for 84, 257 for 224), each size
      prepared once. strokes is 28x28 and takes only None or 28; omniglot is
      28x28 by default and takes any size from 28 up (each prepared once).
    class_splits: image datasets: 'fewshot' (train/val/test; default for cub and
      mini_imagenet) or 'dml' (train/test: first and second half of the classes;
      default for cars196 and sop); see class_splits. omniglot: 'default' (the
      stored 60/20/20), 'vinyals_published' (Vinyals et al.'s lists), 'vinyals_sizes'
      (a seeded order cut at their sizes), 'background_evaluation' (train/test),
      'all_characters' or 'lists' (``split_lists``); see omniglot.character_splits.
    class_order: 'default' or 'random' (the class order permuted by ``seed`` before
      the split is taken).
    seed: the class order's seed; omniglot's 'vinyals_sizes' order.
    bbox_crop: crop each image to its bounding box before resizing (cub, cars196).
    rotations: omniglot: each character at 0/90/180/270 degrees, four classes, made
      after any hold-out, so a character and its rotations stay in one split.
    split_lists: omniglot's class splits 'lists': a folder of train.txt, val.txt and
      test.txt (fewshot.data.class_lists).

  Raises:
    ConfigError: unknown dataset, class splits or order; an option the dataset does not have.
    DataError: an unknown split; missing, malformed or corrupt dataset files (naming the file).
  """
  resolved = catalog.resolve(dataset, image_size=image_size, class_splits=class_splits, class_order=class_order,
                             bbox_crop=bbox_crop, rotations=rotations, resize=resize)
  root = pathlib.Path(default_tfds_dir(tfds_dir))
  if root.exists() and not root.is_dir():
    raise DataError(f"--tfds_dir {root} is a file; pass a folder for prepared datasets (or leave it out for "
                    "$TFDS_DATA_DIR or ~/tensorflow_datasets).")
  own = resolved.split_names
  valid = own if "val" in own else (*own[:1], "val", *own[1:])
  splits = own if splits is None else (splits,) if isinstance(splits, str) else tuple(splits)
  for split in splits:
    if split not in valid:
      raise DataError(f"Unknown split {split!r} for {dataset}; choose one of {', '.join(valid)}.")
  held_out = "val" in splits and "val" not in own
  wanted = tuple(s for s in own if s in splits or (held_out and s == "train"))
  loaded = _read(resolved, data_dir, tfds_dir, seed, wanted, split_lists)
  if held_out:
    loaded["train"], loaded["val"] = holdout.every_fourth_class(loaded["train"])
  return {split: omniglot.rotated(loaded[split]) if rotations else loaded[split] for split in splits}


def files(dataset: str, data_dir: str | None) -> tuple[list[str] | None, list[str]]:
  """The files of ``data_dir`` a dataset's images are read from and those its reader leaves unread on purpose, where
  its reader knows them (omniglot: the zips and folders holding characters, and zips that are not its image
  archives); else None (the run then names what the folder holds at its top) and none.
  """
  known = getattr(reader(dataset), "files", None)
  return (None, []) if known is None else known(data_dir)


def load_split(dataset: str, split: str, data_dir: str | None = None, tfds_dir: str | None = None,
               **options_) -> Split:
  """Loads one class split ('train', 'val' or 'test') of ``dataset``; see load_splits for the options."""
  return load_splits(dataset, data_dir, tfds_dir, splits=(split,), **options_)[split]
