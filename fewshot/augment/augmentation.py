"""What a learner holds between stored images and its model: a run's training and evaluation transforms.

:class:`Augmentation` is built from a run's configuration alone (:meth:`Augmentation.for_dataset`), so a
saved run rebuilds it; its transforms are :mod:`fewshot.augment.transforms` (the DR paper's pipeline) and,
for characters, :mod:`fewshot.augment.affine`.
"""

from __future__ import annotations

import dataclasses

import jax

from fewshot.augment.affine import Distortion, distort
from fewshot.augment.transforms import IMAGENET_MEAN, IMAGENET_STD, eval_transform, to_float, train_transform


@dataclasses.dataclass(frozen=True)
class Augmentation:
  """What a learner holds: the training and evaluation transforms of one run (hashable, static).

  ``size=None`` means no augmentation: both transforms are :func:`to_float` only (the
  behaviour before augmentation existed) and every other field is ignored.
  ``random=False`` gives training images the evaluation transform: no randomness, but the
  input size and normalisation the model is evaluated with (RGB data stored at
  int(1.15·size) with augmentation switched off). ``distortion`` (ink on a 0 background
  only) follows the training transform with a random affine map (:mod:`fewshot.augment.affine`).
  """

  size: int | None = None
  resize: int | None = None  # evaluation resize side; None: int(1.15·size)
  scale: tuple[float, float] = (0.08, 1.0)
  ratio: tuple[float, float] = (3 / 4, 4 / 3)
  brightness: float = 0.4
  contrast: float = 0.4
  saturation: float = 0.4
  flip_prob: float = 0.5
  mean: tuple[float, ...] | None = IMAGENET_MEAN
  std: tuple[float, ...] | None = IMAGENET_STD
  random: bool = True
  distortion: Distortion | None = None

  def __post_init__(self):
    # the fields become static jit arguments: tuples (hashable), whatever sequence was given
    for name in ("scale", "ratio", "mean", "std"):
      value = getattr(self, name)
      if value is not None:
        object.__setattr__(self, name, tuple(float(v) for v in value))
    if self.size is not None and self.size < 1:
      raise ValueError(f"augmentation size must be a positive integer, got {self.size}.")

  @classmethod
  def paper(cls, size: int, channels: int = 3) -> Augmentation:
    """The DR paper's augmentation (docs/protocol.md#data) at ``size``; ImageNet normalisation for RGB, none otherwise."""
    stats = (IMAGENET_MEAN, IMAGENET_STD) if channels == 3 else (None, None)
    return cls(size=size, mean=stats[0], std=stats[1])

  @classmethod
  def for_dataset(cls, image_size: int, channels: int, image_dataset: bool, augment: bool,
                  distortion: Distortion | None = None) -> Augmentation:
    """The transforms a run on a dataset gets: what both experiments build from their configuration.

    The image datasets are stored at int(1.15·size) and always evaluated through the
    paper's evaluation transform; ``augment`` turns the random training transform on. The
    28×28 datasets are stored at the input size: without augmentation nothing but
    :func:`to_float` (exactly as before augmentation existed); with it, the paper's training
    transform and an evaluation transform that resizes nothing and, with one channel,
    normalises nothing, so evaluation is unchanged. ``distortion`` distorts their training images.
    """
    if image_dataset:  # no distortion: it assumes ink on a 0 background (refused by the configuration)
      return dataclasses.replace(cls.paper(image_size, channels), random=augment)
    if augment:
      return dataclasses.replace(cls.paper(image_size, channels), resize=image_size, distortion=distortion)
    return NO_AUGMENTATION if distortion is None else cls(distortion=distortion)

  @property
  def enabled(self) -> bool:
    return self.size is not None

  @property
  def changes_training(self) -> bool:
    """Whether training images are anything but the stored ones as floats."""
    return self.enabled or self.distortion is not None

  def train(self, key: jax.Array, images: jax.Array) -> jax.Array:
    if self.distortion is not None:  # its own key, so the other draws are those of a run without it
      undistorted = dataclasses.replace(self, distortion=None).train(key, images)
      return distort(jax.random.fold_in(key, 1), undistorted, self.distortion)
    if not self.enabled:
      return to_float(images)
    if not self.random:
      return self.eval(images)
    return train_transform(key, images, self.size, scale=self.scale, ratio=self.ratio, brightness=self.brightness,
                           contrast=self.contrast, saturation=self.saturation, flip_prob=self.flip_prob,
                           mean=self.mean, std=self.std)

  def eval(self, images: jax.Array) -> jax.Array:
    if not self.enabled:
      return to_float(images)
    return eval_transform(images, self.size, resize=self.resize, mean=self.mean, std=self.std)


NO_AUGMENTATION = Augmentation()
