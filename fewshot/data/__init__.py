"""Datasets as class splits of uint8 images, prepared once under the tfds dir and read back by random access.

    from fewshot import data
    train = data.load_split('strokes', 'train')                      # embedded, offline, 28x28x1
    test = data.load_split('omniglot', 'test', data_dir='/path/to/omniglot')
    cub = data.load_splits('cub', '/data', image_size=84)            # {'train', 'val', 'test'}: 96x96x3
    cars = data.load_splits('cars196', '/data', class_order='random', seed=1, bbox_crop=True)
    vinyals = data.load_splits('omniglot', '/data', protocol='vinyals', rotations=True)

Each dataset is prepared once into array_record files under the tfds dir
(`default_tfds_dir`) and read back by random access; later loads reuse it.
strokes and omniglot are 28x28x1 (ink 255 on background 0) with fixed 60/20/20
class splits; omniglot also has Vinyals's and Lake's splits and 90-degree rotations
as new classes (`omniglot.protocol_splits`, `omniglot.rotated`). The image datasets (cub, mini_imagenet, cars196, sop) are RGB,
stored at int(1.15 * image_size) px, and split by `protocol` and `class_order`
(see `class_splits`); `images.memory_plan` says which splits fit on the device.
"""

from __future__ import annotations

from collections.abc import Sequence

from fewshot.data import class_splits, images, omniglot, strokes, tfds_io
from fewshot.data.images import memory_plan
from fewshot.errors import DataError
from fewshot.data.split import Split
from fewshot.data.tfds_io import SPLITS, default_tfds_dir

IMAGE_DATASETS = images.DATASETS
DATASETS = ('strokes', 'omniglot') + IMAGE_DATASETS

__all__ = ['DATASETS', 'IMAGE_DATASETS', 'SPLITS', 'DataError', 'Split', 'default_tfds_dir', 'load_split',
           'load_splits', 'memory_plan', 'split_names']


def split_names(dataset: str, protocol: str | None = None) -> tuple[str, ...]:
  """The splits `dataset` has under `protocol`: ('train', 'val', 'test'), or ('train', 'test') without val."""
  if dataset in IMAGE_DATASETS:
    return class_splits.split_names(dataset, protocol)
  if dataset == 'omniglot' and protocol is not None:
    if protocol not in omniglot.PROTOCOLS:
      raise DataError(f'Protocol {protocol!r} is not defined for omniglot; choose one of {", ".join(omniglot.PROTOCOLS)}.')
    return omniglot.PROTOCOL_SPLITS[protocol]
  return SPLITS


def _builder(dataset: str, data_dir: str | None, tfds_dir: str | None):
  """The tfds builder of strokes or omniglot, prepared if it was not yet."""
  tfds_dir = default_tfds_dir(tfds_dir)
  if dataset == 'omniglot':
    return omniglot.builder(data_dir, tfds_dir)
  b = strokes.Strokes(config=strokes.config(), data_dir=tfds_dir)
  tfds_io.prepare(b)
  return b


def _check_splits(splits: Sequence[str], valid: Sequence[str], what: str) -> tuple[str, ...]:
  if isinstance(splits, str):
    splits = (splits,)
  for split in splits:
    if split not in valid:
      raise DataError(f'Unknown split {split!r} for {what}; choose one of {", ".join(valid)}.')
  return tuple(splits)


def load_splits(dataset: str, data_dir: str | None = None, tfds_dir: str | None = None,
                splits: Sequence[str] | None = None, *, image_size: int | None = None, protocol: str | None = None,
                class_order: str = 'default', seed: int = 0, bbox_crop: bool = False,
                rotations: bool = False) -> dict[str, Split]:
  """Loads several class splits of `dataset` at once (one preparation check).

  Args:
    dataset: one of DATASETS. 'strokes' is built by the package and ignores data_dir.
    data_dir: the folder holding the dataset's files (archives or extracted folders);
      see `fewshot.data.sources` for each image dataset's layouts.
    tfds_dir: where prepared data lives; see default_tfds_dir.
    splits: split names; None: all of them (SPLITS, or the protocol's splits).
    image_size: image datasets: the model's input side (default 84); images are
      stored at int(1.15 * image_size) (96 for 84, 257 for 224), each size
      prepared once. strokes and omniglot are 28x28 and take only None or 28.
    protocol: image datasets: 'fewshot' (train/val/test; default for cub and
      mini_imagenet) or 'dml' (train/test: first and second half of the classes;
      default for cars196 and sop); see class_splits. omniglot: 'default' (the
      stored 60/20/20), 'vinyals' or 'background_evaluation' (train/test); see
      omniglot.protocol_splits.
    class_order: 'default' or 'random' (the class order permuted by `seed` before
      the split is taken).
    seed: the class order's seed; omniglot's 'vinyals' order.
    bbox_crop: crop each image to its bounding box before resizing (cub, cars196).
    rotations: omniglot: each character at 0/90/180/270 degrees, four classes.

  Raises:
    DataError: unknown dataset, split, protocol or order; an option the dataset
      does not have; missing, malformed or corrupt source data (naming the file).
  """
  if dataset not in DATASETS:
    raise DataError(f'Unknown dataset {dataset!r}; choose one of {", ".join(DATASETS)}.')
  if dataset in IMAGE_DATASETS:
    if rotations:
      raise DataError(f'rotations=True turns omniglot characters into new classes; {dataset} has none.')
    protocol = class_splits.resolve_protocol(dataset, protocol)
    valid = class_splits.PROTOCOL_SPLITS[protocol]
    splits = _check_splits(valid if splits is None else splits, valid, f'{dataset} under protocol {protocol}')
    class_splits.class_permutation(0, class_order, seed)  # reject a bad order before any preparation
    size = images.stored_size(images.DEFAULT_IMAGE_SIZE if image_size is None else image_size)
    prepared = images.prepare(dataset, data_dir, tfds_dir, size=size, bbox_crop=bbox_crop)
    ids = class_splits.class_splits(dataset, prepared.class_subsets, protocol=protocol, class_order=class_order,
                                    seed=seed)
    return {split: prepared.read(ids[split]) for split in splits}

  fixed = {'class_order': (class_order, 'default'), 'bbox_crop': (bbox_crop, False)}
  if dataset == 'strokes':
    fixed.update(protocol=(protocol, None), rotations=(rotations, False))
  for name, (value, default) in fixed.items():
    if value != default:
      raise DataError(f'{dataset} has fixed class splits and no boxes; {name}={value!r} does not apply to it.')
  if image_size not in (None, tfds_io.IMAGE_SHAPE[0]):
    raise DataError(f'{dataset} images are {tfds_io.IMAGE_SHAPE[0]}x{tfds_io.IMAGE_SHAPE[1]}; '
                    f'image_size={image_size!r} applies to {", ".join(IMAGE_DATASETS)}.')
  valid = split_names(dataset, protocol)
  splits = _check_splits(valid if splits is None else splits, valid, dataset)
  b = _builder(dataset, data_dir, tfds_dir)
  if protocol in (None, 'default'):
    loaded = {split: tfds_io.read_split(b, split) for split in splits}
  else:  # the stored default split's classes, pooled and split again
    stored = {split: tfds_io.read_split(b, split) for split in SPLITS}
    characters = omniglot.protocol_splits([n for s in stored.values() for n in s.class_names], protocol, seed)
    loaded = {split: omniglot.by_characters(stored, characters[split]) for split in splits}
  return {split: omniglot.rotated(s) for split, s in loaded.items()} if rotations else loaded


def load_split(dataset: str, split: str, data_dir: str | None = None, tfds_dir: str | None = None,
               **options) -> Split:
  """Loads one class split ('train', 'val' or 'test') of `dataset` as a `Split`; see load_splits for `options`."""
  return load_splits(dataset, data_dir, tfds_dir, splits=(split,), **options)[split]
