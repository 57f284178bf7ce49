"""Class splits of the image datasets as pure functions: which class ids form 'train', 'val', 'test'.

Every split is a rule on *positions* in a class order (the rule each class split of a dataset's row names:
``catalog.PARITY``, ``catalog.HALVES`` or ``catalog.FILES``); the order is the dataset's
default one (label 0, 1, ...) or a seeded random permutation of it, so a random
order reshuffles which classes land together while keeping the rule (default-order
splits put related classes together, a domain bias; the splits are listed in docs/protocol.md).

    class_splits   dataset         rule on positions 0..C-1 of the order              splits
    fewshot    cub             even -> train, % 4 == 1 -> val, % 4 == 3 -> test   100 / 50 / 50  (Chen et al. 2019)
    fewshot    mini_imagenet   the csv / pickle partition of the classes          64 / 16 / 20   (Ravi & Larochelle)
    dml        cub             first ceil(C/2) -> train, the rest -> test         100 / 100
    dml        cars196         same                                               98 / 98
    dml        sop             the Ebay_train.txt / Ebay_test.txt partition       11,318 / 11,316

A partition defined by files (mini-ImageNet, SOP) is, in the default order, exactly
those files' classes. In a random order it is blocks of the same sizes taken from
the permuted order: a seeded random class split with the official sizes, the
official partitions pooled. The 'dml' class splits have no 'val': its experiment makes
class-disjoint folds inside 'train' (Musgrave et al. 2020, A Metric Learning Reality Check).

Class ids in each split are returned sorted, so a split's class order (and its
``Split`` labels) is the default order whatever order chose its members.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fewshot.data import catalog
from fewshot.errors import ConfigError, DataError


def class_permutation(num_classes: int, class_order: str = "default", seed: int = 0) -> np.ndarray:
  """int64 [num_classes]: the class id at each position, the identity or a permutation seeded by ``seed``."""
  catalog.check_choice("class_order", class_order, catalog.CLASS_ORDERS)
  if class_order == "default":
    return np.arange(num_classes, dtype=np.int64)
  if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
    raise ConfigError(f"--split_seed (the class-order seed) must be an integer, got {seed!r}.")
  return np.random.default_rng(int(seed)).permutation(num_classes).astype(np.int64)


def class_subsets(labels: Sequence[int], subsets: Sequence[str | None], num_classes: int) -> list[str | None]:
  """Per class, the partition all its images share ('train', 'val', 'test'), or None when they differ or have none.

  CUB's and Cars196's train/test are image splits (a class has images in both):
  None for every class. mini-ImageNet's and SOP's are class partitions.
  """
  out: list = [...] * num_classes  # Ellipsis: no image seen yet
  for label, subset in zip(labels, subsets):
    have = out[label]
    out[label] = subset if have is ... or have == subset else None
  return [None if s is ... else s for s in out]


def class_ids(dataset: str, subsets: Sequence[str | None], *, class_splits: str | None = None,
                 class_order: str = "default", seed: int = 0) -> dict[str, np.ndarray]:
  """{split: sorted int64 class ids} for ``dataset`` under ``class_splits`` and ``class_order``.

  Args:
    dataset: 'cub', 'mini_imagenet', 'cars196' or 'sop'.
    subsets: one entry per class (the number of classes is its length): the
      partition its files put it in (see ``class_subsets``); used by mini_imagenet
      and sop, whose class partition is given by files.
    class_splits: 'fewshot' or 'dml'; None: the dataset's default (the first of its row's ``class_splits``).
    class_order: 'default' (label order) or 'random' (a seeded permutation of it).
    seed: the permutation's seed for order 'random'.

  Raises:
    ConfigError: unknown dataset, class splits or order.
    DataError: a file-defined partition with a class outside it, or too few classes
      for every split to get one.
  """
  if dataset not in catalog.IMAGE_DATASETS:
    raise ConfigError(f'{dataset} has no class splits of its own; choose one of '
                      f'{", ".join(catalog.IMAGE_DATASETS)}.')
  resolved = catalog.resolve(dataset, class_splits=class_splits, class_order=class_order)
  class_splits, names = resolved.class_splits, resolved.split_names
  rule = catalog.SPECS[dataset].class_splits[class_splits]
  num_classes = len(subsets)
  perm = class_permutation(num_classes, class_order, seed)
  pos = np.arange(num_classes)
  if rule == catalog.FILES:
    subs = np.array([s if s is not None else "" for s in subsets], dtype=object)
    outside = [c for c in range(num_classes) if subs[c] not in names]
    if outside:
      raise DataError(f'{dataset} class {outside[0]} is in partition {subsets[outside[0]]!r}, but --class_splits {class_splits} '
                      f'splits classes by their files into {", ".join(names)}; read the dataset again '
                      '(delete its prepared directory under the tfds dir).')
    if class_order == "default":
      chosen = {name: np.flatnonzero(subs == name) for name in names}
    else:
      # Same sizes as the files' partition, as consecutive blocks of the permuted order.
      sizes = np.cumsum([np.sum(subs == name) for name in names])[:-1]
      chosen = {name: perm[block] for name, block in zip(names, np.split(pos, sizes))}
  elif rule == catalog.PARITY:  # cub: Chen et al.'s split
    chosen = {"train": perm[pos % 2 == 0], "val": perm[pos % 4 == 1], "test": perm[pos % 4 == 3]}
  else:  # catalog.HALVES
    n_train = (num_classes + 1) // 2
    chosen = {"train": perm[:n_train], "test": perm[n_train:]}
  out = {name: np.sort(chosen[name]).astype(np.int64) for name in names}
  empty = [name for name in names if not len(out[name])]
  if empty:
    need = 4 if rule == catalog.PARITY else len(names)
    raise DataError(f"{dataset} has {num_classes} classes, which leaves split {empty[0]!r} of --class_splits {class_splits} "
                    f"without classes; it needs at least {need}.")
  return out
