"""Splits too large for the accelerator: kept in host memory, streamed to the device in prefetched blocks.

A split that fits (``fewshot.data.memory_plan`` says 'device') becomes an
:class:`~fewshot.episodes.EpisodeSource` and every episode or batch is drawn and gathered
inside compiled code. One that does not (SOP or mini-ImageNet stored for 224-px models)
becomes a :class:`HostSource`: its images stay a numpy array and only its
:class:`~fewshot.episodes.ClassLayout` goes to the device. The index draw is the resident
path's own (:func:`~fewshot.episodes.sample_class_images` with the same keys), so a run
sees exactly the same episodes wherever its data lives. The host gathers a block of draws
and a background thread puts it on the device while the previous block trains (double
buffering), so the accelerator waits only if gathering is slower than training.
"""

from __future__ import annotations

import collections
import concurrent.futures
from collections.abc import Iterator

import chex
import jax
import jax.numpy as jnp
import numpy as np

from fewshot.data.images import DEVICE_BUDGET_BYTES
from fewshot.data.split import DataError, Split
from fewshot.episodes import ClassLayout, EpisodeSource, sample_class_images

PLACEMENTS = ("auto", "device", "host")
BLOCK_BYTES = 256 << 20  # images per transfer: large enough to amortise it, small enough to keep 3 in flight
PREFETCH = 2  # blocks being gathered or copied while one trains


@chex.dataclass(frozen=True)
class Drawn:
  """A block of draws, gathered: what a compiled step takes in place of a resident split."""

  classes: chex.Array  # int32 [n, C]: the split labels of each draw's classes
  images: chex.Array  # uint8 [n, C, M, H, W, Ch], class-major as the resident gather


def _draw_indices(base_key: jax.Array, steps: jax.Array, layout: ClassLayout, num_classes: int, per_class: int):
  """Classes ``[n, C]`` and image indices ``[n, C, M]`` of the draws keyed ``fold_in(base_key, step)``."""
  return jax.vmap(lambda step: sample_class_images(jax.random.fold_in(base_key, step), layout, num_classes,
                                                   per_class))(steps)


_draw_indices_jit = jax.jit(_draw_indices, static_argnums=(3, 4))


class HostSource:
  """A split in host memory: images as numpy, the class layout on the device for the index draws."""

  def __init__(self, split: Split, device: jax.Device | None = None, block_bytes: int = BLOCK_BYTES,
               prefetch: int = PREFETCH):
    self.images, self.device = split.images, device
    self.layout = ClassLayout.from_split(split, device)
    self.block_bytes, self.prefetch = block_bytes, prefetch

  @property
  def num_classes(self) -> int:
    return self.layout.num_classes

  def block_sizes(self, count: int, draw_images: int) -> list[int]:
    """``count`` draws cut into blocks of at most ``block_bytes``, as equal as that allows (at most two
    distinct sizes, so a compiled step is traced at most twice per chunk length)."""
    per_draw = draw_images * int(np.prod(self.images.shape[1:]))
    largest = max(1, min(count, self.block_bytes // max(per_draw, 1)))
    blocks = -(-count // largest)
    size = -(-count // blocks)
    return [size] * (count // size) + ([count % size] if count % size else [])

  def stream(self, base_key: jax.Array, first: int, count: int, num_classes: int,
             per_class: int) -> Iterator[Drawn]:
    """The draws keyed ``fold_in(base_key, first + i)``, i < count, as :class:`Drawn` blocks on the device.

    Blocks are gathered and put on the device ``prefetch`` ahead of the one being used.
    """
    if count <= 0:
      return
    steps = jnp.arange(first, first + count, dtype=jnp.int32)
    classes, indices = jax.device_get(_draw_indices_jit(base_key, steps, self.layout, num_classes, per_class))
    bounds = np.cumsum([0, *self.block_sizes(count, num_classes * per_class)])
    slices = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]

    def gather(block: slice) -> Drawn:
      # Fancy indexing copies (so a zero-copy device_put never aliases the split) and releases the GIL.
      drawn = Drawn(classes=classes[block], images=self.images[indices[block]])
      return jax.device_put(drawn, self.device)

    # One worker per block in flight: gathers overlap one another as well as the training.
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, self.prefetch)) as pool:
      pending = collections.deque(pool.submit(gather, s) for s in slices[: self.prefetch + 1])
      for s in slices[self.prefetch + 1 :]:
        ready = pending.popleft().result()
        pending.append(pool.submit(gather, s))
        yield ready
      while pending:
        yield pending.popleft().result()


def place(split: Split, placement: str = "auto", budget_bytes: int = DEVICE_BUDGET_BYTES,
          device: jax.Device | None = None) -> EpisodeSource | HostSource:
  """The split as a source: resident on the device, or streamed from host memory.

  ``auto`` keeps a split on the device when its images fit ``budget_bytes`` (the rule of
  ``fewshot.data.memory_plan``); ``device`` and ``host`` force one path.
  """
  if placement not in PLACEMENTS:
    raise DataError(f"Unknown placement {placement!r}; choose one of {', '.join(PLACEMENTS)}.")
  on_host = placement == "host" or (placement == "auto" and split.images.nbytes > budget_bytes)
  return HostSource(split, device) if on_host else EpisodeSource.from_split(split, device)
