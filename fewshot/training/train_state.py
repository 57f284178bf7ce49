"""What a training run carries from step to step, its keys and the paper's optimiser: one home for both experiments.

The few-shot learner keeps ``params = {"backbone", "rho"}``, the metric learner
``{"model", "loss"}``; either way the state is ``(step, params, batch_stats, opt_state)``,
which is what a checkpoint holds and what a compiled chunk of steps carries.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax


@flax.struct.dataclass
class TrainState:
  step: jax.Array  # int32 scalar: updates so far (episodes, or metric-learning batches)
  params: Any
  batch_stats: Any  # running BatchNorm statistics
  opt_state: Any

  @classmethod
  def create(cls, params, batch_stats, optimizer: optax.GradientTransformation) -> "TrainState":
    return cls(step=jnp.zeros((), jnp.int32), params=params, batch_stats=batch_stats,
               opt_state=optimizer.init(params))

  def apply_gradients(self, grads, batch_stats, optimizer: optax.GradientTransformation) -> "TrainState":
    """One optimiser update, with the batch statistics of the forward pass that gave ``grads``."""
    updates, opt_state = optimizer.update(grads, self.opt_state, self.params)
    return self.replace(step=self.step + 1, params=optax.apply_updates(self.params, updates),
                        batch_stats=batch_stats, opt_state=opt_state)


# The few-shot run's independent key streams, so that e.g. changing --val_episodes never changes
# the training episodes; a metric-learning fold model has an (init, train) pair of its own.
KEY_STREAMS = ("init", "train", "val", "test")


def run_keys(seed: int) -> dict[str, jax.Array]:
  """A few-shot run's keys: ``fold_in(key(seed), i)`` for the i-th of :data:`KEY_STREAMS`."""
  root = jax.random.key(seed)
  return {name: jax.random.fold_in(root, i) for i, name in enumerate(KEY_STREAMS)}


def fold_keys(seed: int, fold: int) -> tuple[jax.Array, jax.Array]:
  """(init, train) keys of metric-learning fold model ``fold``; fold 0 is the one-fold run's model."""
  return tuple(jax.random.split(jax.random.fold_in(jax.random.key(seed), fold)))


def adam(learning_rate: float = 1e-3, halve_every: int | None = None) -> optax.GradientTransformation:
  """The paper's optimiser: Adam (0.9, 0.999, eps 1e-8), no weight decay, no schedule.

  ``halve_every`` halves the rate after every that many updates (Snell et al.'s Omniglot schedule, every
  2,000 episodes): ``lr_t = learning_rate * 0.5 ** (t // halve_every)``. Its optimiser state then counts the
  updates, so checkpoints of a run without it keep their structure.
  """
  if halve_every is not None:
    learning_rate = optax.exponential_decay(learning_rate, transition_steps=halve_every, decay_rate=0.5,
                                            staircase=True)
  return optax.adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8)


def adam_by_part(learning_rates: dict[str, float]) -> optax.GradientTransformation:
  """Adam with a learning rate per top-level part of the parameters (``{"model": 1e-3, "loss": 1e-2}``).

  With one rate for every part this is plain :func:`adam`, so the optimiser state, and
  checkpoints, keep one structure.
  """
  rates = set(learning_rates.values())
  if len(rates) == 1:
    return adam(rates.pop())
  labels = lambda params: {part: jax.tree.map(lambda _: part, params[part]) for part in learning_rates}
  return optax.multi_transform({part: adam(rate) for part, rate in learning_rates.items()}, labels)
