"""The compiled parts of metric-learning training: embedder, train state, a scanned chunk of steps.

Like the episodic :class:`fewshot.learner.Learner`, one :meth:`MetricLearner.train_chunk`
call runs the steps between two evaluations inside one ``lax.scan``: batches are drawn,
gathered and converted on the device. Step ``i`` of a run always uses the key
``fold_in(train_key, i)``, so a resumed run sees the same batches. The learner's
:class:`fewshot.augment.Augmentation` transforms each drawn batch with the key
``fold_in(fold_in(train_key, i), 1)`` and every embedded image with its evaluation
transform; the default, ``NO_AUGMENTATION``, only converts pixels to float. A split in
host memory (:class:`fewshot.streaming.HostSource`) trains on the same batches, one
``lax.scan`` per prefetched block.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax

from fewshot import distances
from fewshot.augment import NO_AUGMENTATION, Augmentation, to_float
from fewshot.dml import miners
from fewshot.dml.losses import LOSSES, check_loss_name
from fewshot.dml.samplers import Batch, BatchShape, batch_from_images, sample_batch
from fewshot.episodes import EpisodeSource
from fewshot.learner import adam
from fewshot.streaming import Drawn, HostSource

MINERS = {"batch_hard": miners.batch_hard, "semi_hard": miners.semi_hard}


def optimizer(learning_rate: float = 1e-3, loss_learning_rate: float | None = None) -> optax.GradientTransformation:
  """Adam for the model; the loss's own parameters (proxies, scales) may take their own learning rate.

  Proxy losses often train their proxies faster than the backbone (the reality check tunes
  the two separately). With one rate this is plain :func:`fewshot.learner.adam`, so the
  optimiser state, and checkpoints, keep one structure.
  """
  if loss_learning_rate is None or loss_learning_rate == learning_rate:
    return adam(learning_rate)
  labels = lambda params: {part: jax.tree.map(lambda _: part, params[part]) for part in ("model", "loss")}
  return optax.multi_transform({"model": adam(learning_rate), "loss": adam(loss_learning_rate)}, labels)


class Embedder(nn.Module):
  """A backbone followed by a linear map to ``embedding_dim`` (the reality check's 128), or none."""

  backbone: nn.Module
  embedding_dim: int | None = 128

  @nn.compact
  def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
    features = self.backbone(x, train=train)
    return features if self.embedding_dim is None else nn.Dense(self.embedding_dim)(features)


@flax.struct.dataclass
class MetricState:
  step: jax.Array  # int32 scalar: steps trained so far
  params: Any  # {"model": ..., "loss": {...}}: the loss's own learnable parameters (proxies, scale, ...)
  batch_stats: Any
  opt_state: Any

  @property
  def variables(self) -> dict:
    """What embedding needs: the model's parameters and running BatchNorm statistics."""
    return {"params": self.params["model"], "batch_stats": self.batch_stats}


class MetricLearner:
  """Compiled training of an embedder with one loss of :data:`fewshot.dml.losses.LOSSES`.

  Embeddings are L2-normalised before the loss and whenever they are returned, as in the
  reality check's protocol.
  """

  def __init__(self, model: nn.Module, batch: BatchShape, *, loss: str = "triplet", miner: str | None = None,
               num_classes: int | None = None, loss_options: dict | None = None,
               optimizer: optax.GradientTransformation | None = None,
               augmentation: Augmentation = NO_AUGMENTATION):
    check_loss_name(loss)
    self.loss = LOSSES[loss]
    if miner is not None and miner not in MINERS:
      raise ValueError(f"Unknown miner {miner!r}; choose one of {', '.join(MINERS)} or none.")
    if miner is not None and not self.loss.takes_triplets:
      takes = ", ".join(name for name, spec in LOSSES.items() if spec.takes_triplets)
      raise ValueError(f"the {loss} loss does not take mined triplets; use a miner only with {takes}.")
    if self.loss.per_class and num_classes is None:
      raise ValueError(f"the {loss} loss learns one proxy per class: pass num_classes (the training split's classes).")
    self.model, self.batch, self.miner, self.num_classes = model, batch, miner, num_classes
    self.loss_options = dict(loss_options or {})
    self.optimizer = optimizer or adam()
    self.augmentation = augmentation
    self.init = jax.jit(self._init, static_argnums=1)
    self._train_resident = jax.jit(self._train_chunk, static_argnums=3, donate_argnums=0)
    self._train_drawn = jax.jit(self._train_block, donate_argnums=0)
    self._embed_chunk = jax.jit(self.embed)

  def _init(self, key: jax.Array, image_shape: tuple[int, ...]) -> MetricState:
    model_key, loss_key = jax.random.split(key)
    # The model sees images after the evaluation transform (a crop to the augmentation's size).
    zeros = self.augmentation.eval(jnp.zeros((2, *image_shape), jnp.uint8))
    variables = self.model.init(model_key, zeros, train=False)
    dim = self.model.apply(variables, zeros[:1], train=False).shape[-1]
    loss_params = {} if self.loss.init is None else self.loss.init(loss_key, self.num_classes, dim)
    params = {"model": variables["params"], "loss": loss_params}
    return MetricState(step=jnp.zeros((), jnp.int32), params=params,
                       batch_stats=variables.get("batch_stats", {}), opt_state=self.optimizer.init(params))

  def embed(self, variables: dict, images: jax.Array) -> jax.Array:
    """L2-normalised embeddings of images (uint8, or float in [0, 1]), after the evaluation transform, BatchNorm in evaluation mode."""
    return distances.l2_normalize(self.model.apply(variables, self.augmentation.eval(images), train=False))

  def _loss(self, params, batch_stats, batch: Batch):
    variables = {"params": params["model"], "batch_stats": batch_stats}
    # _train_chunk's batches arrive transformed (float, passed through); a direct caller's uint8 are converted.
    embeddings, updates = self.model.apply(variables, to_float(batch.images), train=True, mutable=["batch_stats"])
    embeddings = distances.l2_normalize(embeddings)
    options = dict(self.loss_options)
    if self.miner is not None:
      options["triplets"] = MINERS[self.miner](embeddings, batch.labels)
    loss = self.loss.fn(embeddings, batch.labels, **params["loss"], **options)
    return loss, updates.get("batch_stats", {})

  def train_step(self, state: MetricState, batch: Batch):
    """One update on one batch (images as the model takes them: transformed, or uint8 without augmentation); returns the new state and the loss before the update."""
    (loss, batch_stats), grads = jax.value_and_grad(self._loss, has_aux=True)(state.params, state.batch_stats, batch)
    updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
    return state.replace(step=state.step + 1, params=optax.apply_updates(state.params, updates),
                         batch_stats=batch_stats, opt_state=opt_state), loss

  def train_chunk(self, state: MetricState, source: EpisodeSource | HostSource, train_key: jax.Array,
                  num_steps: int):
    """Train on the next ``num_steps`` batches; returns the state (the one passed in is donated) and each step's loss ``[num_steps]``."""
    if not isinstance(source, HostSource):
      return self._train_resident(state, source, train_key, num_steps)
    losses = []
    for drawn in source.stream(train_key, int(state.step), num_steps, self.batch.classes, self.batch.per_class):
      state, block_losses = self._train_drawn(state, drawn, train_key)
      losses.append(block_losses)
    return state, jnp.concatenate(losses)

  def _scan_steps(self, state: MetricState, train_key: jax.Array, draw, drawn, length):
    """``lax.scan`` of updates on the batches ``draw(key, x)`` for each ``x`` of ``drawn``, augmented with ``fold_in(key, 1)``."""

    def body(state, x):
      step_key = jax.random.fold_in(train_key, state.step)
      batch = draw(step_key, x)
      batch = batch.replace(images=self.augmentation.train(jax.random.fold_in(step_key, 1), batch.images))
      return self.train_step(state, batch)

    return jax.lax.scan(body, state, drawn, length=length)

  def _train_chunk(self, state: MetricState, source: EpisodeSource, train_key: jax.Array, num_steps: int):
    return self._scan_steps(state, train_key, lambda key, _: sample_batch(key, source, self.batch), None, num_steps)

  def _train_block(self, state: MetricState, drawn: Drawn, train_key: jax.Array):
    return self._scan_steps(state, train_key, lambda key, x: batch_from_images(x.images, x.classes), drawn, None)

  def embed_all(self, variables: dict, images: np.ndarray, chunk: int = 256) -> np.ndarray:
    """Embeddings of a whole split in host memory, ``chunk`` images per compiled call (the last one padded).

    Chunk i's result is read back only after chunk i + 1 is dispatched, so copying one chunk
    to the device overlaps embedding the previous one, with at most two chunks on the device.
    """
    out, in_flight = [], None
    for start in range(0, len(images), chunk):
      part = images[start : start + chunk]
      padded = np.concatenate([part, np.zeros((chunk - len(part), *part.shape[1:]), part.dtype)])
      dispatched = (self._embed_chunk(variables, padded), len(part))
      if in_flight is not None:
        out.append(np.asarray(in_flight[0])[: in_flight[1]])
      in_flight = dispatched
    if in_flight is not None:
      out.append(np.asarray(in_flight[0])[: in_flight[1]])
    return np.concatenate(out) if out else np.zeros((0, 0), np.float32)
