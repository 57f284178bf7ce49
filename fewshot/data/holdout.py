"""Validation classes held out of a training split, for class splits that define none.

Two rules, one per experiment, both class-disjoint and both deterministic:

* :func:`every_fourth_class`: episodic training on class splits without 'val' (``dml`` on
  cars196/sop, Omniglot's ``background_evaluation``) validates on the training classes
  whose label is 3 mod 4, and trains on the rest;
* :func:`class_fold`: the cross-validation of Musgrave et al. 2020, A Metric Learning Reality
  Check: the training classes, in the class order, are cut into ``num_folds`` contiguous
  blocks; fold ``k`` validates on block ``k`` and trains on the others.
"""

from __future__ import annotations

import numpy as np

from fewshot.data.class_splits import class_permutation
from fewshot.data.split import Split
from fewshot.errors import DataError

NUM_FOLDS = 4


def every_fourth_class(train: Split) -> tuple[Split, Split]:
  """(train, val) of a training split: every fourth class (by label) validates."""
  held = np.arange(train.num_classes) % 4 == 3
  if not held.any() or held.all():
    raise DataError(f"the train split has {train.num_classes} classes; holding out every fourth class for "
                    "validation needs at least 4.")
  return train.subset(np.flatnonzero(~held)), train.subset(np.flatnonzero(held))


def class_fold(train: Split, fold: int, num_folds: int = NUM_FOLDS, class_order: str = "default",
               seed: int = 0) -> tuple[Split, Split]:
  """(train, val) of fold ``fold`` of ``num_folds`` class-disjoint folds: blocks of the class order, permuted
  by ``seed`` under ``class_order='random'`` (so the folds do not keep the default order's related classes together).
  """
  if train.num_classes < num_folds:
    raise DataError(f"the training split has {train.num_classes} classes, fewer than the {num_folds} "
                    f"class-disjoint folds; use a dataset with more classes.")
  blocks = np.array_split(class_permutation(train.num_classes, class_order, seed), num_folds)
  return (train.subset(np.sort(np.concatenate(blocks[:fold] + blocks[fold + 1:]))),
          train.subset(np.sort(blocks[fold])))
