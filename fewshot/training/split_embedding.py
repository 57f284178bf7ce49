"""A whole split embedded in padded batches, for one run or each run of a seed group: what evaluation embeds.

Both experiments embed splits the same way: the few-shot cached test (:mod:`fewshot.episodic.cached_episodes`) and
``fewshot.load``, the metric-learning validation and test (:mod:`fewshot.dml.experiment`). An *embed function* is
a module-level function ``embed(static, variables, images) -> [n, D]`` (BatchNorm in evaluation mode, so an image's
embedding does not depend on its batch); it runs here in batches of one static size, the last padded, so that one
compiled program embeds the whole split.

    >>> embeddings = embed_split(eval_embeddings, learner, variables, split.images)   # [N, D], numpy
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from fewshot.training import seed_groups

BATCH = 256  # images per compiled call: one shape for every split, modest activation memory


@functools.partial(jax.jit, static_argnums=(0, 1))
def _embed(embed: Callable, static, variables: dict, images: jax.Array) -> jax.Array:
  return embed(static, variables, images)


# A group's runs embed the same images, each with its own variables.
@functools.partial(jax.jit, static_argnums=(0, 1))
def _embed_group(embed: Callable, static, variables: dict, images: jax.Array) -> jax.Array:
  return jax.vmap(lambda v: embed(static, v, images))(variables)


def embed_batch(embed: Callable, static, variables: dict, images) -> jax.Array:
  """``embed`` compiled, on one batch of images (any size: each size compiles once)."""
  return _embed(embed, static, variables, images)


def _padded(images, start: int, batch: int, sharding):
  """Images ``start .. start + batch`` (zeros past the end), where the split lives (host or device)."""
  part = images[start : start + batch]
  stack = np if isinstance(part, np.ndarray) else jnp
  padded = stack.concatenate([part, stack.zeros((batch - len(part), *part.shape[1:]), part.dtype)])
  return padded if sharding is None else jax.device_put(padded, sharding)


def embed_split(embed: Callable, static, variables: dict, images, batch: int = BATCH,
                runs: tuple[int, ...] | None = None, sharding: jax.sharding.Sharding | None = None,
                progress: Callable[[int, int], None] | None = None) -> np.ndarray:
  """Embeddings ``[N, D]`` of a split's images (a host or device array), ``batch`` per compiled call;
  ``progress(images embedded, all)`` after each batch read back (:func:`fewshot.training.progress.batches`).

  ``runs``: ``variables`` are a seed group's, stacked on a leading run axis, and the result is
  ``[len(runs), N, D]``, the embeddings of those runs (this process's). ``sharding`` spreads each batch over
  devices (data parallel; ``batch`` is rounded down to a multiple of their number). Batch i's result is read back
  only after batch i + 1 is dispatched, so copying one batch overlaps embedding the previous one.
  """
  group = runs is not None
  compiled, axis = (_embed_group, 1) if group else (_embed, 0)
  if sharding is not None:
    batch -= batch % sharding.mesh.devices.size

  def take(done):
    embedded, count = done
    if not group:
      return np.asarray(embedded)[:count]
    per_run = [np.asarray(seed_groups.unstack(embedded, i))[:count] for i in runs]
    return np.asarray(per_run, embedded.dtype).reshape(len(runs), count, *embedded.shape[2:])

  out, in_flight = [], None
  for start in range(0, len(images), batch):
    dispatched = (compiled(embed, static, variables, _padded(images, start, batch, sharding)),
                  min(batch, len(images) - start))
    if in_flight is not None:
      out.append(take(in_flight))
      if progress is not None:
        progress(start, len(images))
    in_flight = dispatched
  if in_flight is not None:
    out.append(take(in_flight))
    if progress is not None:
      progress(len(images), len(images))
  return np.concatenate(out, axis=axis) if out else np.zeros((0, 0), np.float32)
