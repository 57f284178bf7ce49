"""``omniglot``: characters of the Omniglot archives (or their extracted folders), one class per character.

Images are 105x105 1-bit PNGs stored as ``<anything>/<alphabet>/<character>/NNNN_MM.png``.
They are inverted to ink 255 on background 0 (the polarity of ``strokes``) and
box-filtered down to 28x28 (or the run's larger ``--image_size``, prepared once per
size): BOX averages each output pixel's exact footprint, which anti-aliases a binary
image without the ringing (and non-zero background halo) that LANCZOS adds. ``--resize nearest``
samples the nearest source pixel instead, so the images stay binary (0 or 255): the inputs of the
Prototypical Networks code, whose PIL resize of the 1-bit PNGs is NEAREST (it rotates at 105 px
before resizing, fewshot after, so a rotated class's sampled pixels can differ by one source pixel).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import pathlib
import re

import numpy as np
import tensorflow_datasets as tfds
from PIL import Image

from fewshot.data import archives, catalog, class_lists, tfds_io
from fewshot.data.downloads import fetch_hint
from fewshot.data.split import Split
from fewshot.errors import ConfigError, DataError, one_line

# The default class split is a property of the dataset, not of a run: a fixed seed.
SPLIT_SEED = 0
SPLIT_FRACTIONS = (0.6, 0.2)  # train, val; test gets the rest

# Class splits (`character_splits`, named in omniglot's row of `catalog.SPECS`): the stored 60/20/20
# split; Vinyals et al.'s split as published (fewshot/data/lists/vinyals: 1,028 / 172 / 423 characters, the test split
# 12 evaluation alphabets whole and 4 of Gurmukhi's 45 characters) or a user's own lists (fewshot.data.class_lists); a seeded random order cut
# at Vinyals et al.'s sizes (1,200 training characters, as Ravi & Larochelle 1,028 train + 172 val, and 423 test, of
# 1,623), which is not their split; Lake et al.'s alphabets: the 30 background alphabets train, the 20 evaluation
# alphabets test; or every background character found, every fourth (in name order) held out for validation as under
# `background_evaluation`, tested on the evaluation alphabets when they were found and else on the validation quarter
# (background-only data has nothing else held out).
VINYALS_SIZES = (1028, 172, 423)
EVALUATION_ALPHABETS = frozenset({
    "Angelic", "Atemayar_Qelisayer", "Atlantean", "Aurek-Besh", "Avesta", "Ge_ez", "Glagolitic", "Gurmukhi",
    "Kannada", "Keble", "Malayalam", "Manipuri", "Mongolian", "Old_Church_Slavonic_(Cyrillic)", "Oriya", "Sylheti",
    "Syriac_(Serto)", "Tengwar", "Tibetan", "ULOG"})
ROTATIONS = (0, 90, 180, 270)
_SIZE = tfds_io.IMAGE_SHAPE[:2]
# The release's image archives: the only zips of a data folder the reader opens. The Omniglot repository's other
# zips (all_runs.zip, Lake's one-shot runs; the strokes) hold no characters of their own: all_runs.zip's 40 run
# folders are evaluation characters copied again, which read as classes leaked them across the splits.
IMAGE_ARCHIVES = ("images_background.zip", "images_evaluation.zip", "images_background_small1.zip",
                  "images_background_small2.zip")
_LAYOUT = ("put the Omniglot zips (images_background.zip, images_evaluation.zip, images_background_small1.zip, ...) "
           "or their extracted <alphabet>/<character>/*.png folders there")


@dataclasses.dataclass(frozen=True)
class Characters:
  """The images found under a data_dir: per class name ``alphabet/character``, its images' members of ``tree``."""
  data_dir: str
  tree: archives.FileTree
  classes: dict[str, tuple[str, ...]]
  fingerprint: str
  sources: tuple[str, ...] = ()  # the zips (and top folders, ``name/``) the images were found in, in name order
  not_read: tuple[str, ...] = ()  # the folder's other zips, left unopened (not among IMAGE_ARCHIVES)

  @property
  def class_names(self) -> list[str]:
    return sorted(self.classes)


def _png(member: str) -> bool:
  """A PNG that is no macOS resource fork or hidden file."""
  parts = member.split("/")
  return parts[-1].lower().endswith(".png") and not any(p.startswith(".") or p == "__MACOSX" for p in parts)


def _image_key(member: str) -> tuple[str, str] | None:
  """(class name, file name) of a character's PNG (``<alphabet>/characterNN/<file>.png``, as the release names
  them), or None for any other member: an extracted ``all_runs/run01/training/class01.png`` is no character.
  """
  parts = member.split("/")
  if len(parts) < 3 or not _png(member) or not re.fullmatch(r"character\d+", parts[-2]):
    return None
  return f"{parts[-3]}/{parts[-2]}", parts[-1]


def _fingerprint(tree: archives.FileTree) -> str:
  """The names and sizes of the zips and of the folder's PNGs, hashed.

  Keyed on names and sizes, not contents: cheap, and any re-extraction or different
  archive set gets freshly prepared data instead of stale data. It names data already
  prepared on users' disks, so the rule never changes (no mtimes, unlike other datasets).
  """
  listing = [(name, size) for kind, name, size, _ in tree.file_stats()
             if kind == "zip" or name.lower().endswith(".png")]
  return hashlib.sha1(repr(sorted(listing)).encode()).hexdigest()[:12]


def scan(data_dir: str | None) -> Characters:
  """Lists the images under ``data_dir`` without decoding them; cheap enough for every load."""
  if not data_dir:
    raise DataError("Dataset omniglot needs its image files: pass --data_dir pointing at a folder with the Omniglot "
                    f"zips or their extracted folders{fetch_hint('omniglot')}.")
  root = pathlib.Path(data_dir).expanduser()
  if not root.is_dir():
    raise DataError(f"Omniglot data_dir {root} does not exist or is not a directory; pass --data_dir pointing at the "
                    f"folder holding the Omniglot zips{fetch_hint('omniglot')}.")
  # Linked folders stay out: the fingerprint has never counted what they hold.
  not_read = {p.name for p in root.glob("*.zip") if p.name not in IMAGE_ARCHIVES}
  with archives.open_folder_with_zips(root, follow_links=False, zips=IMAGE_ARCHIVES.__contains__) as tree:
    first: dict[tuple[str, str], str] = {}
    for member in tree.stored_members():
      key = _image_key(member)
      # Archives overlap (Greek and Latin are in both 'small' zips): first copy wins.
      if key is not None and key not in first:
        first[key] = member
      elif key is None and _png(member):  # PNGs outside character folders (Lake's runs extracted): named, not read
        not_read.add(tree.source(member))
  not_read = tuple(sorted(not_read))
  if not first:
    raise DataError(f"Found no Omniglot images in {root}; {_LAYOUT}{fetch_hint('omniglot')}.")
  classes: dict[str, list[str]] = {}
  for (cls, _), member in sorted(first.items()):
    classes.setdefault(cls, []).append(member)
  if len(classes) < 3:
    raise DataError(f"Found only {len(classes)} characters in {root}, need at least 3 (one per split); {_LAYOUT}.")
  return Characters(str(root), tree, {k: tuple(v) for k, v in classes.items()}, _fingerprint(tree),
                    _sources(tree, first.values()), not_read)


def _sources(tree: archives.FileTree, members) -> tuple[str, ...]:
  """The zips and top folders of the data folder that hold ``members``: what a run says it read (a folder of lists
  or a README beside them is not among them).
  """
  return tuple(sorted({tree.source(member) for member in members}))


RESAMPLING = {"box": Image.Resampling.BOX, "nearest": Image.Resampling.NEAREST}  # by --resize


def decode(data: bytes, where: str, size: int = _SIZE[0], resize: str = "box") -> np.ndarray:
  """One PNG's bytes as the stored ``size`` x ``size`` x 1 uint8 image (ink 255 on 0); ``where`` names it in the
  DataError.
  """
  try:
    with Image.open(io.BytesIO(data)) as im:
      im.load()
      # convert('L') maps 1-bit pixels to exactly 0/255 whatever the decoder.
      ink = Image.fromarray(255 - np.asarray(im.convert("L"), np.uint8))
  except Exception as e:  # PIL raises many types on corrupt files
    raise DataError(f"Cannot decode image {where} ({one_line(e)}); replace or delete it (re-extract the archive).") from None
  return np.asarray(ink.resize((size, size), RESAMPLING[resize]), np.uint8)[..., None]


def decode_all(characters: Characters, size: int = _SIZE[0], resize: str = "box") -> dict[str, np.ndarray]:
  """Decodes every image; raises DataError naming the first unreadable file."""
  with characters.tree as tree:
    image = lambda member: decode(tree.read(member), tree.where(member), size, resize)
    return {cls: np.stack([image(member) for member in characters.classes[cls]]) for cls in characters.class_names}


def class_split(class_names: list[str]) -> dict[str, list[str]]:
  """Disjoint train / val / test character names (60/20/20), fixed by SPLIT_SEED."""
  names = sorted(class_names)
  perm = np.random.default_rng(SPLIT_SEED).permutation(len(names))
  n_train = max(1, round(SPLIT_FRACTIONS[0] * len(names)))
  n_val = max(1, round(SPLIT_FRACTIONS[1] * len(names)))
  parts = np.split(perm, [n_train, n_train + n_val])
  return {split: sorted(names[i] for i in p) for split, p in zip(catalog.SPLITS, parts)}


def _missing_advice(missing: str, names: list[str], class_splits: str) -> str:
  """The fix for a listed character ``missing`` from the characters ``names`` found: the zip that holds its
  alphabet where none of that alphabet was found, else the list's spelling.
  """
  alphabet = missing.split("/")[0]
  if alphabet not in known_alphabets():
    return (f"{alphabet!r} is no Omniglot alphabet: a list names characters as the zips do, <alphabet>/characterNN "
            "(Latin/character01)")
  needs = ("images_evaluation.zip" if alphabet in EVALUATION_ALPHABETS else
           {"lake_small1": "images_background_small1.zip", "lake_small2": "images_background_small2.zip"}.get(
               class_splits, "images_background.zip"))
  if not any(name.split("/")[0] == alphabet for name in names):
    return f"--data_dir holds no {alphabet} character: it needs {needs}"
  lacks = f"--data_dir holds {alphabet} but not {missing}"
  if class_splits in class_lists.SHIPPED:  # the shipped lists name the release's characters
    return f"{lacks}: its {needs} is not the release's complete one"
  return f"{lacks}: check the list's spelling (<alphabet>/characterNN), or that {needs} is the release's complete one"


@functools.cache
def known_alphabets() -> frozenset[str]:
  """Omniglot's 50 alphabets, read off Vinyals et al.'s lists (which place every character)."""
  return frozenset(name.split("/")[0] for names in class_lists.read(class_lists.VINYALS).splits.values()
                   for name in names)


def character_splits(class_names: list[str], class_splits: str, seed: int = 0,
                     split_lists: str | None = None) -> dict[str, list[str]]:
  """{split: sorted character names} of the characters ``class_names`` ('alphabet/character') under ``class_splits``.

  'vinyals_published' and 'lists' are the characters listed in Vinyals et al.'s published lists or in the folder
  ``split_lists`` (:mod:`fewshot.data.class_lists`), every listed character required; 'vinyals_sizes' cuts a
  permutation of the sorted names (seeded by ``seed``) in Vinyals's proportions, which are exactly 1,028 / 172 /
  423 on the full 1,623 characters; 'background_evaluation' splits by alphabet; 'all_characters' trains on every
  background character but every fourth, which validates (and tests, unless evaluation alphabets were found).
  'default' is ``class_split``.
  """
  catalog.resolve("omniglot", class_splits=class_splits)  # refuses unknown class splits
  names = sorted(class_names)
  if class_splits == "default":
    return class_split(names)
  if class_splits in catalog.LISTED_CLASS_SPLITS:
    return class_lists.chosen(listed(class_splits, split_lists), names,
                              lambda missing: _missing_advice(missing, names, class_splits))
  test = [n for n in names if n.split("/")[0] in EVALUATION_ALPHABETS]
  background = [n for n in names if n.split("/")[0] not in EVALUATION_ALPHABETS]
  if class_splits == "background_evaluation":
    chosen = {"train": background, "test": test}
  elif class_splits == "all_characters":
    val = background[3::4]  # holdout.every_fourth_class's rule, on the names in order
    chosen = {"train": [n for i, n in enumerate(background) if i % 4 != 3], "val": val, "test": test or val}
  else:  # vinyals_sizes
    perm = np.random.default_rng(seed).permutation(len(names))
    bounds = np.round(np.cumsum(VINYALS_SIZES)[:-1] / sum(VINYALS_SIZES) * len(names)).astype(int)
    chosen = {split: sorted(names[i] for i in part) for split, part in zip(catalog.SPLITS, np.split(perm, bounds))}
  for split, members in chosen.items():
    if not members:
      fix = ("add images_evaluation.zip (or images_background.zip) to --data_dir"
             if class_splits == "background_evaluation" else "use more characters")
      raise DataError(f"Omniglot's --class_splits {class_splits} leaves split {split!r} without characters among the "
                      f"{len(names)} found; {fix}.")
  return chosen


def listed(class_splits: str, split_lists: str | None) -> class_lists.ClassLists:
  """The lists a listed class split reads: Vinyals et al.'s published ones, or the folder ``split_lists``."""
  if class_splits in class_lists.SHIPPED:
    return class_lists.read(class_lists.SHIPPED[class_splits])
  if not split_lists:
    raise ConfigError("--class_splits lists reads the folder --split_lists names (train.txt, val.txt, test.txt, one "
                      "Alphabet/characterNN a line); pass it.")
  return class_lists.read(split_lists)


def rotated(split: Split) -> Split:
  """Each character's images turned by 0, 90, 180 and 270 degrees (counter-clockwise), each angle a class.

  Vinyals et al.'s augmentation of the classes: a character and its rotations stay in one split.
  """
  images = np.concatenate([np.rot90(split.images, k, axes=(1, 2)) for k in range(len(ROTATIONS))])
  labels = np.concatenate([split.labels * len(ROTATIONS) + k for k in range(len(ROTATIONS))])
  order = np.argsort(labels, kind="stable")
  names = tuple(f"{name}/rot{angle:03d}" for name in split.class_names for angle in ROTATIONS)
  return Split(np.ascontiguousarray(images[order]), labels[order].astype(np.int32), names)


def alphabets(class_names) -> np.ndarray:
  """Each class's alphabet, numbered in name order: Omniglot's classes are ``alphabet/character[/rotNNN]``, so a
  rotated character stays its alphabet's.
  """
  names = [name.split("/")[0] for name in class_names]
  number = {name: k for k, name in enumerate(sorted(set(names)))}
  return np.array([number[name] for name in names], np.int32)


def by_characters(pooled: Split, characters: list[str]) -> Split:
  """The images of ``characters`` (names) in ``pooled``, classes in name order."""
  wanted = set(characters)
  ids = [label for label, name in enumerate(pooled.class_names) if name in wanted]
  return pooled.subset(sorted(ids, key=lambda label: pooled.class_names[label]))


class Omniglot(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """tfds builder of omniglot from the ``Characters`` found in a data_dir; one config per their fingerprint."""

  name = "fewshot_omniglot"
  # Bump when decoding, resizing or the class split changes.
  VERSION = tfds.core.Version("1.0.0")

  def __init__(self, *, characters: Characters, size: int = _SIZE[0], resize: str = "box", **kwargs):
    self._characters, self._size, self._resize = characters, size, resize
    self.decoded: dict[str, np.ndarray] | None = None
    # The names prepared data already has on disk: 28 px data keeps the one it had before other sizes existed, box
    # filtering the one it had before --resize existed.
    name = f"src_{characters.fingerprint}" if size == _SIZE[0] else f"src_{characters.fingerprint}_{size}px"
    name += "" if resize == "box" else f"_{resize}"
    super().__init__(config=tfds.core.BuilderConfig(name=name), **kwargs)

  def _info(self) -> tfds.core.DatasetInfo:
    found = self._characters
    return tfds_io.dataset_info(self, found.class_names, f"Omniglot characters from {found.data_dir} (fewshot).",
                                image_shape=(self._size, self._size, 1))

  def _split_generators(self, dl_manager):
    del dl_manager
    if self.decoded is None:
      self.decoded = decode_all(self._characters, self._size, self._resize)
    return {split: self._generate_examples(names) for split, names in class_split(self._characters.class_names).items()}

  def _generate_examples(self, names):
    for cls in names:
      for i, image in enumerate(self.decoded[cls]):
        yield f"{cls}/{i:03d}", {"image": image, "label": cls}


def files(data_dir: str | None) -> tuple[list[str], list[str]]:
  """From one scan of ``data_dir``: the zips and folders that hold characters (what a run's images are read from),
  and those the reader leaves unopened (``all_runs.zip`` beside the image zips, as ``python -m fewshot.data.get
  omniglot`` lays them out: what a run says it did not read).
  """
  found = scan(data_dir)
  return list(found.sources), list(found.not_read)


def builder(data_dir: str | None, tfds_dir: str, size: int = _SIZE[0], resize: str = "box") -> Omniglot:
  """The prepared omniglot builder for ``data_dir`` at ``size`` px (``resize``: box or nearest, :data:`RESAMPLING`);
  decodes and prepares only on first use.

  Every image is decoded before tfds writes anything, so a corrupt file raises
  DataError and leaves the tfds dir untouched.
  """
  b = Omniglot(characters=scan(data_dir), size=size, resize=resize, data_dir=tfds_dir)
  if not b.is_prepared():
    b.decoded = decode_all(b._characters, size, resize)
    tfds_io.prepare(b)
    b.decoded = None
  return b
