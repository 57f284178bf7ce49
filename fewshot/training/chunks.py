"""The compiled chunk both experiments run: a learner's steps between two checkpoints as one ``lax.scan``.

A *step function* is a module-level function ``step(static, carry, key, index, classes, images, last) ->
(carry, out)``: ``static`` is hashable configuration (a learner, or a learner and an episode shape), ``carry``
what the steps thread (a train state, or evaluation variables), ``key = fold_in(run_key, index)`` the step's
key, ``classes [C]`` and ``images [C, M, H, W, Ch]`` its draw from the split, and ``last`` the index of the
chunk's last step. :func:`run_chunk` runs steps ``first .. first + count - 1`` of a run over a source's blocks
(:mod:`fewshot.training.sources`) as compiled programs, and a seed group's (``[R]`` keys, a carry stacked over
R runs, :mod:`fewshot.training.seed_groups`) as the same program ``vmap``-ed over the run axis, every run drawing
its own steps with its own key. The few-shot and the metric-learning experiments supply only their step function.

    >>> state, out = run_chunk(episode_step, learner, state, source, key, first=0, count=100, num_classes=5,
    ...                        per_class=17, donate=True)
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp

from fewshot.training import sources


def _scan(step: Callable, static, carry, draws, key: jax.Array, last: jax.Array):
  return sources.scan_draws(lambda c, k, i, classes, images: step(static, c, k, i, classes, images, last), carry,
                            draws, key)


def _scan_group(step: Callable, static, carries, draws, keys: jax.Array, last: jax.Array):
  return jax.vmap(functools.partial(_scan, step, static), in_axes=(0, draws.run_axes(), 0, None))(
      carries, draws, keys, last)


# Training donates the state it is given (updated in place on the device); evaluation keeps its variables.
_COMPILED = {
    (False, True): jax.jit(_scan, static_argnums=(0, 1), donate_argnums=2),
    (True, True): jax.jit(_scan_group, static_argnums=(0, 1), donate_argnums=2),
    (False, False): jax.jit(_scan, static_argnums=(0, 1)),
    (True, False): jax.jit(_scan_group, static_argnums=(0, 1)),
}


def compiled(group: bool, donate: bool) -> Callable:
  """The jitted block of steps ``(step, static, carry, draws, key, last) -> (carry, out)`` (for a benchmark's
  ``lower``); a group's is vmapped over its run axis.
  """
  return _COMPILED[(group, donate)]


def run_chunk(step: Callable, static, carry, source, key: jax.Array, first: int, count: int, num_classes: int,
              per_class: int, donate: bool):
  """``step`` for steps ``first .. first + count - 1`` of ``source``; returns the last carry and every step's
  outputs concatenated along the step axis (None for no steps). ``donate``: the carry passed in is invalid
  afterwards (training); ``[R]`` keys run a seed group.
  """
  block = compiled(key.ndim > 0, donate)
  last = jnp.int32(first + count - 1)
  return sources.run_blocks(lambda c, draws, k: block(step, static, c, draws, k, last), carry, source, key, first,
                            count, num_classes, per_class)


def evaluated(step: Callable, static, carry, source, key: jax.Array, count: int, num_classes: int, per_class: int,
              progress: Callable[[int, int], None] | None = None, spans: int = 10):
  """Every output of steps ``0 .. count - 1`` that evaluate (the carry kept, not donated), concatenated along the
  step axis (the last: ``[R, count]`` for a group); None for no steps. With ``progress(done, count)`` they run in
  ``spans`` equal spans (at most two compiled programs: the last span may be shorter), each waited for and then
  reported, so a long test shows how far it is; each step's output is the same either way (its key and draw are
  its index's).
  """
  if progress is None:
    return run_chunk(step, static, carry, source, key, 0, count, num_classes, per_class, donate=False)[1]
  size, outputs = max(1, -(-count // spans)), []
  for first in range(0, count, size):
    length = min(size, count - first)
    _, out = run_chunk(step, static, carry, source, key, first, length, num_classes, per_class, donate=False)
    outputs.append(jax.block_until_ready(out))
    progress(first + length, count)
  return jax.tree.map(lambda *o: jnp.concatenate(o, axis=-1), *outputs) if outputs else None
