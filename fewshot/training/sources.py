"""Where a split's images live during training, behind one interface: resident on the device or streamed.

Every step of both experiments draws ``C`` classes and ``M`` images of each from a split (an
episode is ``way x (shot + query)``, a metric-learning batch ``classes x per_class``) with
the key ``fold_in(key, step)``. A source hands a compiled chunk those draws as *blocks*:

* :class:`DeviceSource`: the split is resident on the device, and one
  :class:`ResidentDraws` block lets the compiled scan draw and gather every step itself;
* :class:`HostSource`: a split too large for the device stays in host memory; the index
  draw (the same :func:`fewshot.training.class_draws.sample_class_images`, same keys) runs for a whole chunk, the host
  gathers the images, and :class:`GatheredDraws` blocks go to the device ``PREFETCH`` ahead
  of the one training.

Both block kinds answer ``scanned()`` (what ``lax.scan`` walks over, one entry per step)
and ``draw(key, x)`` (that step's classes ``[C]`` and images ``[C, M, H, W, Ch]``), so the
compiled step never asks which kind it got: :func:`scan_draws` runs it over either, and
:func:`run_blocks` runs a compiled chunk over a source's blocks. A run therefore sees the
same draws wherever its data lives. :func:`place` chooses the source by the device budget.
"""

from __future__ import annotations

import collections
import concurrent.futures
from collections.abc import Callable, Iterator

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from fewshot.choices import PLACEMENTS
from fewshot.data.catalog import DEVICE_BUDGET_BYTES, fits_on_device
from fewshot.data.split import Split
from fewshot.errors import DataError
from fewshot.training import seed_groups
from fewshot.training.class_draws import ClassLayout, sample_class_images

BLOCK_BYTES = 256 << 20  # images per transfer: large enough to amortise it, small enough to keep 3 in flight
PREFETCH = 2  # blocks being gathered or copied while one trains


# ---- blocks: what a compiled chunk scans over -----------------------------------------------------
@flax.struct.dataclass
class ResidentDraws:
  """Steps whose draws the compiled code makes itself, from a split resident on the device."""

  images: jax.Array  # uint8 [N, H, W, C], the whole split
  layout: ClassLayout
  steps: jax.Array  # int32 [n]
  num_classes: int = flax.struct.field(pytree_node=False)
  per_class: int = flax.struct.field(pytree_node=False)

  def scanned(self) -> dict:
    return {"step": self.steps}

  def draw(self, key: jax.Array, x: dict) -> tuple[jax.Array, jax.Array]:
    del x
    classes, indices = sample_class_images(key, self.layout, self.num_classes, self.per_class)
    return classes, self.images[indices]

  def run_axes(self):
    """``vmap`` axes for a group of runs: every run draws from the same split, with its own key."""
    return None


@flax.struct.dataclass
class GatheredDraws:
  """Steps whose draws were gathered on the host: one entry per step (per run and step for a group)."""

  steps: jax.Array  # int32 [n]
  classes: jax.Array  # int32 [n, C] ([R, n, C] for a group): the split labels of each draw's classes
  images: jax.Array  # uint8 [n, C, M, H, W, Ch] ([R, n, ...]), class-major as the resident gather

  def scanned(self) -> dict:
    return {"step": self.steps, "classes": self.classes, "images": self.images}

  def draw(self, key: jax.Array, x: dict) -> tuple[jax.Array, jax.Array]:
    del key
    return x["classes"], x["images"]

  def run_axes(self):
    """``vmap`` axes for a group of runs: each run has its own draws, the steps are shared."""
    return GatheredDraws(steps=None, classes=0, images=0)


def scan_draws(step: Callable, carry, draws: ResidentDraws | GatheredDraws, key: jax.Array):
  """``lax.scan`` of ``step(carry, step_key, step_index, classes, images) -> (carry, out)`` over a block.

  ``step_key = fold_in(key, step_index)``: a step's draw, and whatever else the step keys
  on it, depend only on the run's key and the step's index. Traceable (call it under jit).
  """

  def body(carry, x):
    step_key = jax.random.fold_in(key, x["step"])
    classes, images = draws.draw(step_key, x)
    return step(carry, step_key, x["step"], classes, images)

  return jax.lax.scan(body, carry, draws.scanned())


def run_blocks(compiled: Callable, carry, source: DeviceSource | HostSource, key: jax.Array, first: int, count: int,
               num_classes: int, per_class: int):
  """``compiled(carry, block, key) -> (carry, per-step outputs)`` over the source's blocks of steps
  ``first .. first + count - 1``; returns the last carry and the outputs of all steps, concatenated
  (None for no steps).
  """
  outputs = []
  for block in source.blocks(key, first, count, num_classes, per_class):
    carry, out = compiled(carry, block, key)
    outputs.append(out)
  if len(outputs) <= 1:
    return carry, outputs[0] if outputs else None
  return carry, jax.tree.map(lambda *o: jnp.concatenate(o), *outputs)


# ---- sources ------------------------------------------------------------------------------------
@flax.struct.dataclass
class DeviceSource:
  """A split resident on the device: images grouped by class, and their class layout."""

  images: jax.Array  # uint8 [N, H, W, C]
  layout: ClassLayout

  @classmethod
  def from_split(cls, split: Split, device=None, superclasses: np.ndarray | None = None) -> DeviceSource:
    return cls(images=jax.device_put(split.images, device), layout=ClassLayout.from_split(split, device, superclasses))

  @property
  def num_classes(self) -> int:
    return self.layout.num_classes

  def blocks(self, key: jax.Array, first: int, count: int, num_classes: int, per_class: int) -> list[ResidentDraws]:
    del key  # drawn inside the compiled chunk
    steps = jnp.arange(first, first + count, dtype=jnp.int32)
    return [ResidentDraws(self.images, self.layout, steps, num_classes, per_class)] if count > 0 else []


def _draw_indices(base_key: jax.Array, steps: jax.Array, layout: ClassLayout, num_classes: int, per_class: int):
  """Classes ``[n, C]`` and image indices ``[n, C, M]`` of the draws keyed ``fold_in(base_key, step)``
  (``[R, n, ...]`` for ``[R]`` keys).
  """
  draw = lambda key: jax.vmap(lambda step: sample_class_images(jax.random.fold_in(key, step), layout, num_classes,
                                                               per_class))(steps)
  return draw(base_key) if base_key.ndim == 0 else jax.vmap(draw)(base_key)


_draw_indices_jit = jax.jit(_draw_indices, static_argnums=(3, 4))


def drawn_indices(layout: ClassLayout, key: jax.Array, count: int, num_classes: int, per_class: int) -> np.ndarray:
  """The image indices ``[count, num_classes, per_class]`` of the draws keyed ``fold_in(key, i)``, ``i < count``:
  the episodes a run draws, for code that replays them elsewhere (``experiments/torch_parity.py``).
  """
  steps = jnp.arange(count, dtype=jnp.int32)
  return np.asarray(_draw_indices_jit(key, steps, layout, num_classes, per_class)[1])


def drawn_images(layout: ClassLayout, key: jax.Array, count: int, num_classes: int, per_class: int) -> np.ndarray:
  """The distinct indices (sorted) of every image the draws keyed ``fold_in(key, i)``, ``i < count``, take: what a
  test of those episodes needs embedded, and nothing else.
  """
  if count <= 0:
    return np.zeros((0,), np.int64)
  return np.unique(drawn_indices(layout, key, count, num_classes, per_class))


class HostSource:
  """A split in host memory: images as numpy, the class layout on the device for the index draws."""

  def __init__(self, split: Split, device=None, block_bytes: int = BLOCK_BYTES, prefetch: int = PREFETCH,
               run_sharding=None, superclasses: np.ndarray | None = None):
    """``device``: a device or a (replicated) sharding; ``run_sharding``: where a group's blocks go (their
    leading run axis sharded over the devices), None to put them like the rest.
    """
    self.images, self.device, self.run_sharding = split.images, device, run_sharding
    self.layout = ClassLayout.from_split(split, device, superclasses)
    self.block_bytes, self.prefetch = block_bytes, prefetch

  @property
  def num_classes(self) -> int:
    return self.layout.num_classes

  def block_sizes(self, count: int, draw_images: int) -> list[int]:
    """``count`` draws cut into blocks of at most ``block_bytes``, as equal as that allows (at most two
    distinct sizes, so a compiled step is traced at most twice per chunk length).
    """
    per_draw = draw_images * int(np.prod(self.images.shape[1:]))
    largest = max(1, min(count, self.block_bytes // max(per_draw, 1)))
    blocks = -(-count // largest)
    size = -(-count // blocks)
    return [size] * (count // size) + ([count % size] if count % size else [])

  def blocks(self, key: jax.Array, first: int, count: int, num_classes: int,
             per_class: int) -> Iterator[GatheredDraws]:
    """The draws keyed ``fold_in(key, first + i)``, i < count, as blocks on the device, ``prefetch`` ahead."""
    if count <= 0:
      return
    steps = jnp.arange(first, first + count, dtype=jnp.int32)
    classes, indices = map(seed_groups.local_numpy, _draw_indices_jit(key, steps, self.layout, num_classes, per_class))
    steps, runs = np.asarray(steps), 1 if key.ndim == 0 else key.shape[0]
    bounds = np.cumsum([0, *self.block_sizes(count, runs * num_classes * per_class)])
    slices = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
    # A group's draws are [R, n, ...]: its blocks cut the step axis.
    at = (lambda block: block) if key.ndim == 0 else (lambda block: (slice(None), block))

    def gather(block: slice) -> GatheredDraws:
      # Fancy indexing copies (so a zero-copy device_put never aliases the split) and releases the GIL.
      if self.run_sharding is None or key.ndim == 0:
        return jax.device_put(GatheredDraws(steps=steps[block], classes=classes[at(block)],
                                            images=self.images[indices[at(block)]]), self.device)
      # A group's draws: each device's runs only, gathered by the process that holds them.
      drawn, chosen = classes[at(block)], indices[at(block)]
      sharded = lambda shape, part: jax.make_array_from_callback(shape, self.run_sharding, part)  # noqa: E731
      return GatheredDraws(steps=jax.device_put(steps[block], self.device),
                           classes=sharded(drawn.shape, lambda at_runs: drawn[at_runs]),
                           images=sharded((*chosen.shape, *self.images.shape[1:]),
                                          lambda at_runs: self.images[chosen[at_runs[:chosen.ndim]]]))

    # One worker per block in flight: gathers overlap one another as well as the training.
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, self.prefetch)) as pool:
      pending = collections.deque(pool.submit(gather, s) for s in slices[: self.prefetch + 1])
      for s in slices[self.prefetch + 1 :]:
        ready = pending.popleft().result()
        pending.append(pool.submit(gather, s))
        yield ready
      while pending:
        yield pending.popleft().result()


def place(split: Split, placement: str = "auto", budget_bytes: int = DEVICE_BUDGET_BYTES, device=None,
          run_sharding=None, superclasses: np.ndarray | None = None) -> DeviceSource | HostSource:
  """The split as a source: resident on the device, or streamed from host memory.

  ``auto`` keeps a split on the device when :func:`fits_on_device`; ``device`` and ``host``
  force one path. Either way a run sees the same draws. ``device`` may be a sharding: a
  group of runs sharded over several devices keeps a copy of the split on each
  (``NamedSharding(mesh, P())``) and streams its draws sharded by run (``run_sharding``).
  ``superclasses`` (see :class:`ClassLayout`) makes each draw's classes one group's.
  """
  if placement not in PLACEMENTS:
    raise DataError(f"Unknown placement {placement!r}; choose one of {', '.join(PLACEMENTS)}.")
  on_host = placement == "host" or (placement == "auto" and not fits_on_device(split.images.nbytes, budget_bytes))
  if on_host:
    return HostSource(split, device, run_sharding=run_sharding, superclasses=superclasses)
  return DeviceSource.from_split(split, device, superclasses)
