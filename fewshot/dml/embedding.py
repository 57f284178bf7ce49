"""Metric-learning training, as pure functions of (learner, state, data, key).

:class:`MetricLearner` holds the configuration (embedder, C x M batch shape, loss, miner,
optimiser, augmentation); the functions take it as their first, static argument. Like
episodic training (:mod:`fewshot.episodic.learning`), :func:`train_chunk` runs the steps between
two evaluations as one compiled ``lax.scan`` over a source's blocks: step ``i`` draws its
batch with ``fold_in(train_key, i)`` and augments it with ``fold_in(fold_in(train_key, i), 1)``,
so a resumed run sees the same batches wherever its split lives. Embeddings are
L2-normalised before the loss and whenever they are returned (the reality check's protocol).
"""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from fewshot import choices, distances, numerics
from fewshot.augment.augmentation import NO_AUGMENTATION, Augmentation
from fewshot.augment.transforms import to_float
from fewshot.dml.losses import LOSSES, Loss, get_loss
from fewshot.dml.miners import MINERS, hard_negative_classes
from fewshot.dml.samplers import Batch, BatchShape, batch_from_images
from fewshot.errors import ConfigError
from fewshot.training import chunks, seed_groups, split_embedding
from fewshot.training.train_state import TrainState, adam


class Embedder(nn.Module):
  """A backbone followed by a linear map to ``embedding_dim`` (the reality check's 128), or none."""

  backbone: nn.Module
  embedding_dim: int | None = 128

  @nn.compact
  def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
    features = self.backbone(x, train=train)
    return features if self.embedding_dim is None else nn.Dense(self.embedding_dim)(features)


@dataclasses.dataclass(frozen=True)
class MetricLearner:
  """An embedder trained with one loss (a name of :data:`fewshot.dml.losses.LOSSES`, or any
  :class:`~fewshot.dml.losses.Loss`, which it holds): configuration only (hashable).
  """

  embedder: nn.Module
  batch: BatchShape
  loss: str | Loss = "triplet"
  miner: str | None = None
  num_classes: int | None = None  # the training split's classes, for losses with a proxy per class
  loss_options: tuple[tuple[str, object], ...] = ()  # keyword arguments of the loss, as (name, value) pairs
  optimizer: optax.GradientTransformation = adam()
  augmentation: Augmentation = NO_AUGMENTATION
  # Data parallel: each batch's images sharded over a mesh's devices (NamedSharding(mesh, P("data"))). The
  # state stays replicated; the partitioner all-reduces BatchNorm's statistics and gathers the embeddings for
  # the loss, so the step is the single-device one, summed in another order.
  batch_sharding: jax.sharding.Sharding | None = None
  precision: str = choices.PRECISIONS[0]  # the embedder's (fewshot.numerics); losses and metrics are float32 whatever it says
  # Hard negative class mining (Sohn, 2016): each step draws this many classes and trains on the batch.classes
  # whose images the chosen ones confuse most (:func:`fewshot.dml.miners.hard_negative_classes`); None draws
  # batch.classes at random.
  class_pool: int | None = None

  def __post_init__(self):
    spec = get_loss(self.loss)
    object.__setattr__(self, "loss", spec)
    if self.miner is not None and self.miner not in MINERS:
      raise ValueError(f"Unknown miner {self.miner!r}; choose one of {', '.join(MINERS)} or none.")
    if self.miner is not None and not spec.takes_triplets:
      takes = ", ".join(name for name, s in LOSSES.items() if s.takes_triplets)
      raise ConfigError(f"the {spec.label} loss does not take mined triplets; use a miner only with {takes}.")
    choices.check_batch(spec.label, spec.needs, self.batch.classes, self.batch.per_class)
    if self.class_pool is not None and self.class_pool <= self.batch.classes:
      raise ConfigError(f"a class pool of {self.class_pool} must hold more than the batch's {self.batch.classes} "
                        "classes to mine among them; raise it or pass none.")
    if spec.per_class and self.num_classes is None:
      raise ValueError(f"the {spec.label} loss learns one proxy per class: pass num_classes (the training split's "
                       "classes).")
    object.__setattr__(self, "loss_options", tuple(dict(self.loss_options).items()))

  @property
  def drawn_classes(self) -> int:
    """The classes a step draws: the pool, where classes are mined from one."""
    return self.batch.classes if self.class_pool is None else self.class_pool


@functools.partial(jax.jit, static_argnums=(0, 2))
def init_state(learner: MetricLearner, key: jax.Array, stored_shape: tuple[int, ...]) -> TrainState:
  """The initial state for stored images of ``stored_shape`` (the model sees them after the evaluation transform)."""
  embedder_key, loss_key = jax.random.split(key)
  zeros = learner.augmentation.eval(jnp.zeros((2, *stored_shape), jnp.uint8))
  variables = learner.embedder.init(embedder_key, zeros, train=False)
  dim = learner.embedder.apply(variables, zeros[:1], train=False).shape[-1]
  spec = learner.loss
  loss_params = {} if spec.init is None else spec.init(loss_key, learner.num_classes, dim)
  # "model": the embedder's parameters, the model's (beside the loss's); a checkpoint key, so recorded runs keep it.
  return TrainState.create({"model": variables["params"], "loss": loss_params}, variables.get("batch_stats", {}),
                           learner.optimizer)


def model_variables(state: TrainState) -> dict:
  """What embedding needs: the model's parameters and running BatchNorm statistics."""
  return {"params": state.params["model"], "batch_stats": state.batch_stats}


def embed(learner: MetricLearner, variables: dict, images: jax.Array) -> jax.Array:
  """L2-normalised embeddings of images (uint8, or float in [0, 1]), after the evaluation transform, BatchNorm in evaluation mode."""
  with numerics.backbone_precision(learner.precision):
    embeddings = learner.embedder.apply(variables, learner.augmentation.eval(images), train=False)
  return distances.l2_normalize(embeddings)


def _loss(learner: MetricLearner, params, batch_stats, batch: Batch):
  variables = {"params": params["model"], "batch_stats": batch_stats}
  # train_chunk's batches arrive transformed (float, passed through); a direct caller's uint8 are converted.
  with numerics.backbone_precision(learner.precision):
    embeddings, updates = learner.embedder.apply(variables, to_float(batch.images), train=True, mutable=["batch_stats"])
  embeddings = distances.l2_normalize(embeddings)
  options = dict(learner.loss_options)
  if learner.miner is not None:
    options["triplets"] = MINERS[learner.miner](embeddings, batch.labels)
  loss = learner.loss.fn(embeddings, batch.labels, **params["loss"], **options)
  if jnp.shape(loss) != ():  # seen as the step is traced, before it compiles or runs
    raise ConfigError(f"the loss {learner.loss.label} returned shape {tuple(jnp.shape(loss))} for a batch of "
                      f"{len(batch.labels)}; a loss must return a scalar (e.g. the mean over the batch).")
  return loss, updates.get("batch_stats", {})


def check_loss(learner: MetricLearner, stored_shape: tuple[int, ...]) -> None:
  """Trace one step's loss on a batch of zeros (shapes only: nothing compiles or runs), so a loss that does not
  return a scalar is a one-line ``ConfigError`` before a run writes or trains anything.
  """
  def first_loss(key):
    state = init_state(learner, key, stored_shape)
    images = learner.augmentation.eval(jnp.zeros((learner.batch.size, *stored_shape), jnp.uint8))
    labels = jnp.repeat(jnp.arange(learner.batch.classes, dtype=jnp.int32), learner.batch.per_class)
    return _loss(learner, state.params, state.batch_stats, Batch(images=images, labels=labels))

  jax.eval_shape(first_loss, jax.random.key(0))


def train_step(learner: MetricLearner, state: TrainState, batch: Batch):
  """One update on one batch (images as the model takes them: transformed, or uint8 without augmentation).

  Returns the new state and the loss before the update.
  """
  grad_fn = jax.value_and_grad(functools.partial(_loss, learner), has_aux=True)
  (loss, batch_stats), grads = grad_fn(state.params, state.batch_stats, batch)
  return state.apply_gradients(grads, batch_stats, learner.optimizer), loss


def lowered_step(learner: MetricLearner, stored_shape: tuple[int, ...]):
  """One run's training step lowered on a draw of ``stored_shape`` images (a pool's, where classes are mined),
  augmented as a chunk's are (nothing compiles or runs): what :func:`fewshot.training.seed_groups.check_memory`
  measures a group's memory by.
  """
  state = jax.eval_shape(lambda: init_state(learner, jax.random.key(0), stored_shape))
  classes = jax.ShapeDtypeStruct((learner.drawn_classes,), jnp.int32)
  images = jax.ShapeDtypeStruct((learner.drawn_classes, learner.batch.per_class, *stored_shape), jnp.uint8)
  step = functools.partial(_train_on_draw, learner, index=0, last=0)
  return jax.jit(step).lower(state, jax.ShapeDtypeStruct((), jax.random.key(0).dtype), classes=classes, images=images)


def mine_classes(learner: MetricLearner, state: TrainState, key: jax.Array, classes, images):
  """The ``batch.classes`` of a drawn pool (``classes [P]``, ``images [P, M, ...]``) that the hard negative class
  miner picks from their embeddings under the current model (evaluation mode, no gradient), with their drawn images;
  the draw unchanged without a pool. Sohn (2016) draws two fresh images of each picked class instead: reusing the
  pool's keeps the draw one compiled gather.
  """
  if learner.class_pool is None:
    return classes, images
  pool = jax.lax.stop_gradient(embed(learner, model_variables(state), images.reshape(-1, *images.shape[2:])))
  order = hard_negative_classes(key, pool.reshape(*images.shape[:2], -1), learner.batch.classes)
  return classes[order], images[order]


def _train_on_draw(learner: MetricLearner, state: TrainState, key: jax.Array, index, classes, images, last):
  """One training step of a chunk (the step function of :mod:`fewshot.training.chunks`): the drawn batch (the
  mined classes of a pool, mined with ``fold_in(key, 2)``), sharded over the data-parallel devices if any,
  augmented with ``fold_in(key, 1)``.
  """
  del index, last
  classes, images = mine_classes(learner, state, jax.random.fold_in(key, 2), classes, images)
  batch = batch_from_images(images, classes)
  if learner.batch_sharding is not None:
    batch = jax.lax.with_sharding_constraint(batch, learner.batch_sharding)
  batch = batch.replace(images=learner.augmentation.train(jax.random.fold_in(key, 1), batch.images))
  return train_step(learner, state, batch)


def train_chunk(learner: MetricLearner, state: TrainState, source, train_key: jax.Array, num_steps: int):
  """Train on the next ``num_steps`` batches; returns the state (the one passed in is donated) and each step's
  loss ``[num_steps]``; a seed group (``[R]`` keys, a state stacked over R runs) trains at once, ``[R, num_steps]``.
  """
  return chunks.run_chunk(_train_on_draw, learner, state, source, train_key, seed_groups.local_step(state.step),
                          num_steps, learner.drawn_classes, learner.batch.per_class, donate=True)


def embed_split(learner: MetricLearner, variables: dict, images, runs: tuple[int, ...] | None = None,
                batch: int = split_embedding.BATCH) -> np.ndarray:
  """L2-normalised embeddings of a whole split (:func:`fewshot.training.split_embedding.embed_split`), each batch
  sharded over the data-parallel devices if any; ``[len(runs), N, D]`` for a group's stacked variables.
  """
  return split_embedding.embed_split(embed, learner, variables, images, batch, runs, learner.batch_sharding)
