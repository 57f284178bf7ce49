"""What a step draws from a split: which classes, and which images of each, as a pure function of a key.

:class:`ClassLayout` is all the draw needs of a split (its classes' offsets and sizes, optionally a superclass
per class); :func:`sample_class_images` is the one draw of few-shot episodes and metric-learning batches alike,
wherever the split's images live (:mod:`fewshot.training.sources`); :func:`check_fits` and :func:`check_superclasses_fit`
refuse, in one line, a split that cannot supply the draws asked for.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from fewshot.data.split import Split
from fewshot.errors import DataError


@flax.struct.dataclass
class ClassLayout:
  """Where each class of a split starts and how many images it has: all that drawing indices needs.

  With ``superclasses`` (a superclass per class, e.g. Omniglot's alphabets) every draw takes its classes from
  one superclass (:func:`sample_class_images`).
  """

  class_offsets: jax.Array  # int32 [num_classes]
  class_counts: jax.Array  # int32 [num_classes]
  max_count: int = flax.struct.field(pytree_node=False)
  superclasses: jax.Array | None = None  # int32 [num_classes] in 0..num_superclasses-1
  num_superclasses: int = flax.struct.field(pytree_node=False, default=0)

  @classmethod
  def from_split(cls, split: Split, device=None, superclasses: np.ndarray | None = None) -> ClassLayout:
    put = lambda a: jax.device_put(a, device)
    nested = {} if superclasses is None else dict(superclasses=put(np.asarray(superclasses, np.int32)),
                                                   num_superclasses=int(np.max(superclasses)) + 1)
    return cls(class_offsets=put(split.class_offsets), class_counts=put(split.class_counts),
               max_count=int(split.class_counts.max()), **nested)

  @property
  def num_classes(self) -> int:
    return self.class_offsets.shape[0]


def sample_class_images(key: jax.Array, layout: ClassLayout, num_classes: int,
                        per_class: int) -> tuple[jax.Array, jax.Array]:
  """Draw ``num_classes`` distinct classes ``[C]`` and ``per_class`` images of each, ``[C, per_class]`` indices.

  Images are distinct within a class while the class has enough of them; a smaller class
  repeats its images (pytorch-metric-learning's M-per-class sampler does the same).
  Episodes never hit that case, since :func:`check_fits` rejects such splits up front.
  """
  class_key, image_key = jax.random.split(key)
  if layout.superclasses is None:
    classes = jax.random.choice(class_key, layout.num_classes, (num_classes,), replace=False)
  else:
    classes = _classes_of_one_superclass(class_key, layout.superclasses, layout.num_superclasses, num_classes)
  counts = layout.class_counts[classes]
  # Distinct images per class: the top per_class of uniform scores over the class's
  # slots, with slots past the class's size scored below any real one.
  scores = jax.random.uniform(image_key, (num_classes, max(layout.max_count, per_class)))
  scores = jnp.where(jnp.arange(scores.shape[1])[None, :] < counts[:, None], scores, -1.0)
  _, within_class = jax.lax.top_k(scores, per_class)
  return classes, layout.class_offsets[classes][:, None] + within_class % counts[:, None]


def _classes_of_one_superclass(key: jax.Array, superclasses: jax.Array, num_superclasses: int,
                               num_classes: int) -> jax.Array:
  """``num_classes`` distinct classes of one superclass, drawn in proportion to its classes among the superclasses
  that have enough of them (:func:`check_superclasses_fit` makes sure one does).
  """
  superclass_key, class_key = jax.random.split(key)
  sizes = jnp.zeros(num_superclasses, jnp.int32).at[superclasses].add(1)
  weights = jnp.where(sizes >= num_classes, sizes, 0).astype(jnp.float32)
  superclass = jax.random.choice(superclass_key, num_superclasses, p=weights / weights.sum())
  scores = jnp.where(superclasses == superclass, jax.random.uniform(class_key, superclasses.shape), -1.0)
  return jax.lax.top_k(scores, num_classes)[1]


def check_superclasses_fit(superclasses: np.ndarray, split_name: str, flag: str, num_classes: int) -> None:
  """Raise a one-line ``DataError`` if no superclass has ``num_classes`` classes to draw from."""
  largest = int(np.bincount(superclasses).max()) if len(superclasses) else 0
  if num_classes > largest:
    raise DataError(f"{flag} {num_classes} is larger than the largest superclass (alphabet) of the {split_name} split ({largest} "
                    f"classes), and every episode draws its classes from one superclass; use {flag} {largest} or less.")


def check_fits(split: Split, split_name: str, classes: tuple[str, int], images: dict[str, int] | None = None) -> None:
  """Raise a one-line ``DataError`` if the split cannot supply the draws of a step.

  ``classes`` is the option and value of the classes drawn (``("--way", 5)``); ``images``,
  the options whose values sum to the distinct images drawn per class (``{"--shot": 1,
  "--query": 16}``), or None where a small class may repeat its images (metric-learning batches).
  """
  flag, num_classes = classes
  if num_classes > split.num_classes:
    raise DataError(f"{flag} {num_classes} is larger than the {split.num_classes} classes of the {split_name} "
                    f"split; use {flag} {split.num_classes} or less.")
  smallest = int(split.class_counts.min())
  if images is not None and sum(images.values()) > smallest:
    worst = split.class_names[int(np.argmin(split.class_counts))]
    raise DataError(f"class {worst!r} of the {split_name} split has only {smallest} images but every class needs "
                    f"{' + '.join(images)} = {' + '.join(map(str, images.values()))}; lower {' or '.join(images)} "
                    f"so they sum to {smallest} or less.")
