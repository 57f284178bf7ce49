"""Image transforms on the device, between the stored images and the model.

* :mod:`~fewshot.augment.transforms`: the DR paper's training augmentation (random resized crop, colour
  jitter, flip, normalise) and evaluation transform (resize, centre crop, normalise), batched and jittable;
* :mod:`~fewshot.augment.random_params`: each image's random crop, jitter and flip, as torchvision draws them;
* :mod:`~fewshot.augment.affine`: small random affine distortions of characters, and the whole-pixel shifts
  of test-time averaging (``--distort``, ``--test_shifts``);
* :mod:`~fewshot.augment.augmentation`: :class:`Augmentation`, the transforms one run holds.

Imports JAX and :mod:`fewshot.data.catalog` only: both experiments stand on it, it stands on neither.

May import: kernel, research, data (docs/architecture.md, "Layers").
"""

from fewshot.augment.affine import Distortion, distort, translations
from fewshot.augment.augmentation import NO_AUGMENTATION, Augmentation
from fewshot.augment.random_params import AugmentParams, sample_params
from fewshot.augment.transforms import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    apply_params,
    color_jitter,
    eval_resize,
    eval_transform,
    grayscale,
    normalize,
    resample_weights,
    to_float,
    train_transform,
)

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "NO_AUGMENTATION", "AugmentParams", "Augmentation", "Distortion",
           "apply_params", "color_jitter", "distort", "eval_resize", "eval_transform", "grayscale", "normalize",
           "resample_weights", "sample_params", "to_float", "train_transform", "translations"]
