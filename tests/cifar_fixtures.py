"""CIFAR-100 fixtures in the official python version's format: ``cifar-100-python/{meta,train,test}`` pickles (dicts
of ``data`` uint8 [N, 3072] as three colour planes, ``fine_labels``, ``coarse_labels``, ``filenames``), in a folder or
in ``cifar-100-python.tar.gz``; every one of CIFAR-100's 100 classes and 20 superclasses, few images each, in a
shuffled row order (the reader must not assume a class's images are together or train before test).
"""

from __future__ import annotations

import io
import pathlib
import pickle
import tarfile

import numpy as np

# CIFAR-100's superclasses and their classes, as CIFAR's page lists them (the meta file's names, sorted there).
SUPERCLASSES = {
    "aquatic_mammals": ("beaver", "dolphin", "otter", "seal", "whale"),
    "fish": ("aquarium_fish", "flatfish", "ray", "shark", "trout"),
    "flowers": ("orchid", "poppy", "rose", "sunflower", "tulip"),
    "food_containers": ("bottle", "bowl", "can", "cup", "plate"),
    "fruit_and_vegetables": ("apple", "mushroom", "orange", "pear", "sweet_pepper"),
    "household_electrical_devices": ("clock", "keyboard", "lamp", "telephone", "television"),
    "household_furniture": ("bed", "chair", "couch", "table", "wardrobe"),
    "insects": ("bee", "beetle", "butterfly", "caterpillar", "cockroach"),
    "large_carnivores": ("bear", "leopard", "lion", "tiger", "wolf"),
    "large_man-made_outdoor_things": ("bridge", "castle", "house", "road", "skyscraper"),
    "large_natural_outdoor_scenes": ("cloud", "forest", "mountain", "plain", "sea"),
    "large_omnivores_and_herbivores": ("camel", "cattle", "chimpanzee", "elephant", "kangaroo"),
    "medium_mammals": ("fox", "porcupine", "possum", "raccoon", "skunk"),
    "non-insect_invertebrates": ("crab", "lobster", "snail", "spider", "worm"),
    "people": ("baby", "boy", "girl", "man", "woman"),
    "reptiles": ("crocodile", "dinosaur", "lizard", "snake", "turtle"),
    "small_mammals": ("hamster", "mouse", "rabbit", "shrew", "squirrel"),
    "trees": ("maple_tree", "oak_tree", "palm_tree", "pine_tree", "willow_tree"),
    "vehicles_1": ("bicycle", "bus", "motorcycle", "pickup_truck", "train"),
    "vehicles_2": ("lawn_mower", "rocket", "streetcar", "tank", "tractor"),
}
FINE = sorted(name for names in SUPERCLASSES.values() for name in names)
COARSE = sorted(SUPERCLASSES)
SUPERCLASS_OF = {name: superclass for superclass, names in SUPERCLASSES.items() for name in names}


def planes(image: np.ndarray) -> np.ndarray:
  """One CIFAR row of an [32, 32, 3] image: its red plane, then green, then blue, each row by row."""
  return np.concatenate([image[:, :, 0].ravel(), image[:, :, 1].ravel(), image[:, :, 2].ravel()])


def images_of(rng: np.random.Generator, n: int) -> np.ndarray:
  """uint8 [n, 32, 32, 3] of random pixels."""
  return rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)


def batches(per_class: tuple[int, int] = (5, 1), seed: int = 0) -> dict[str, dict]:
  """{"meta": ..., "train": ..., "test": ...}: the dicts of each file, with ``images`` (uint8 [N, 32, 32, 3]) beside
  ``data`` so a test can compare pixels.
  """
  rng = np.random.default_rng(seed)
  out = {"meta": {"fine_label_names": list(FINE), "coarse_label_names": list(COARSE)}}
  for name, n in zip(("train", "test"), per_class):
    fine = rng.permutation(np.repeat(np.arange(len(FINE)), n))
    images = images_of(rng, len(fine))
    out[name] = {"batch_label": f"{name}ing batch 1 of 1", "filenames": [f"img_{name}_{i}.png" for i in range(len(fine))],
                 "fine_labels": fine.tolist(),
                 "coarse_labels": [COARSE.index(SUPERCLASS_OF[FINE[f]]) for f in fine],
                 "data": np.stack([planes(im) for im in images]), "images": images}
  return out


def pickled(batch: dict, protocol: int = 2) -> bytes:
  """A file's bytes as CIFAR writes them (protocol 2, as Python 2's cPickle did), without the test-only ``images``."""
  return pickle.dumps({k: v for k, v in batch.items() if k != "images"}, protocol=protocol)


def write(root: pathlib.Path, *, archive: bool = True, per_class: tuple[int, int] = (5, 1), seed: int = 0,
          files: dict[str, bytes] | None = None) -> dict[str, dict]:
  """``root/cifar-100-python.tar.gz`` (or the extracted ``root/cifar-100-python/``); ``files`` replaces some files'
  bytes (a defect). Returns ``batches``.
  """
  made = batches(per_class, seed)
  content = {name: pickled(batch) for name, batch in made.items()}
  content.update(files or {})
  root.mkdir(parents=True, exist_ok=True)
  if archive:
    with tarfile.open(root / "cifar-100-python.tar.gz", "w:gz") as tar:
      for name, data in content.items():
        info = tarfile.TarInfo(f"cifar-100-python/{name}")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
  else:
    (root / "cifar-100-python").mkdir(exist_ok=True)
    for name, data in content.items():
      (root / "cifar-100-python" / name).write_bytes(data)
  return made
