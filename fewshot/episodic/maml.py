"""MAML and ANIL (Finn et al. 2017; Raghu et al. 2020) on the episodic stages: a method of
:mod:`fewshot.episodic.methods`, its steps pure functions of (learner, state, episode) like ProtoNet's.

Each episode adapts a copy of the parameters to its support set by ``inner_steps`` steps of plain gradient descent
(rate ``inner_lr``) on the support cross-entropy; the meta-update is Adam on the query cross-entropy of the adapted
copy, differentiated through the inner steps (second order), or with the inner gradients held constant
(``first_order``, FOMAML). MAML adapts every parameter, ANIL only the head. The head (``--meta_head``) is Finn et
al.'s linear classifier on the embedding, or a distance head on class representatives ``w_c`` (the columns of the
same ``w``): ``softmax``, logits ``-||z - w_c||^2``, or ``dr``, the distance ratio ``-theta log ||z - w_c||`` with
``theta = exp(rho)`` meta-learned (the outer loop's alone: the inner steps never adapt it, so the temperature is one
value across episodes, as in a ProtoNet run). Either way ``w`` (and ``b``) start at zero: every class alike, as
episode labels are arbitrary; one inner step then moves each ``w_c`` towards its class's support embeddings, a
prototype learned by gradient descent. A meta-update averages the
query losses of ``tasks`` episodes (Finn et al.'s meta-batch), drawn together as ``way × tasks`` classes split into
episodes, so no class repeats within one update.

BatchNorm normalises with each batch's own statistics at training and evaluation alike (Finn et al.'s code: the
support set in the inner loop, the queries in the outer loss); running statistics take no part. Evaluation adapts
with ``test_inner_steps``. The update diagnostics (Procrustes scale, distance ratios) are defined for a head with a
class distance on one embedding; a method that adapts per episode has neither, so its rows carry none
(its row's ``diagnoses``, :data:`fewshot.method_rows.METHODS`).
"""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from fewshot import backbones, distances, heads, numerics
from fewshot.augment.augmentation import NO_AUGMENTATION, Augmentation
from fewshot.augment.transforms import to_float
from fewshot.choices import META_HEADS, PRECISIONS
from fewshot.episodic.episodes import Episode, EpisodeShape, episode_from_images, episode_structs
from fewshot.episodic.learning import augment_training, eval_images, model_variables  # noqa: F401 - the interface's
from fewshot.errors import DataError
from fewshot.training import chunks, seed_groups
from fewshot.training.train_state import TrainState, adam

# What a single run too large for the memory is told to change (checked before it trains, as a seed group is): the
# outer gradient keeps every inner step's activations.
DIVERGED_FIX = "lower --inner_lr (the inner loop's step) or --learning_rate"
RUN_FIX = "lower --inner_steps (the outer gradient keeps each inner step's activations), --meta_batch or --way"
NO_DIAGNOSTICS = ("not recorded: the update diagnostics compare one embedding before and after an update under a "
                  "distance head; MAML and ANIL adapt their network to each episode")


@dataclasses.dataclass(frozen=True)
class MetaLearner:
  """One backbone + adapted head meta-learned on episodes of one shape: configuration only (static under jit)."""

  backbone: nn.Module
  shape: EpisodeShape
  adapt: str = "all"  # "all" (MAML) or "head" (ANIL)
  head: str = "linear"  # one of META_HEADS: the adapted head's logits
  inner_steps: int = 1
  test_inner_steps: int = 3
  inner_lr: float = 0.4
  first_order: bool = False
  tasks: int = 1  # episodes per meta-update
  optimizer: optax.GradientTransformation = adam()
  augmentation: Augmentation = NO_AUGMENTATION
  precision: str = PRECISIONS[0]

  def __post_init__(self):
    if self.head not in META_HEADS:
      raise ValueError(f"Unknown head {self.head!r} for MAML/ANIL; choose one of {', '.join(META_HEADS)}.")


def init_state(learner: MetaLearner, key: jax.Array, input_shape: tuple[int, ...]) -> TrainState:
  """``params = {"backbone": ..., "head": {"w": 0 [D, way], "b": 0 [way]}}`` (a distance head: no ``b``; ``dr``:
  ``"rho"`` beside, :data:`fewshot.heads.RHO_INIT`).
  """
  check_shapes(learner, tuple(input_shape))
  return _init_state(learner, key, tuple(input_shape))


@functools.partial(jax.jit, static_argnums=(0, 2))
def _init_state(learner: MetaLearner, key: jax.Array, input_shape: tuple[int, ...]) -> TrainState:
  variables = learner.backbone.init(key, jnp.zeros((2, *input_shape), jnp.float32),
                                 **backbones.call_options(learner.backbone, False))
  dim, way = backbones.check_output(learner.backbone, input_shape), learner.shape.way
  head = {"w": jnp.zeros((dim, way))} | ({"b": jnp.zeros((way,))} if learner.head == "linear" else {})
  params = {"backbone": variables.get("params", {}), "head": head}
  if learner.head == "dr":
    params["rho"] = jnp.float32(heads.RHO_INIT)
  return TrainState.create(params, variables.get("batch_stats", {}), learner.optimizer)


@functools.lru_cache(maxsize=64)
def check_shapes(learner: MetaLearner, input_shape: tuple[int, ...]) -> None:
  """One-line ``ConfigError`` for a backbone that does not map images to ``[n, D]`` embeddings (tracing only)."""
  backbones.check_output(learner.backbone, input_shape)


def check_splits(learner: MetaLearner, splits: dict) -> None:
  """One-line ``DataError`` where a meta-update's episodes draw more classes together than the train split holds."""
  train, way = splits.get("train"), learner.shape.way
  if train is not None and way * learner.tasks > train.num_classes:
    raise DataError(f"--way {way} × --meta_batch {learner.tasks} = {way * learner.tasks} classes drawn together "
                    f"for a meta-update, more than the {train.num_classes} classes of the train split; use "
                    f"--meta_batch {train.num_classes // way} or less, or a smaller --way.")


def _embed(learner: MetaLearner, backbone_params, batch_stats, images) -> jax.Array:
  """Embeddings normalised by the batch's own statistics (the running ones are neither read nor kept)."""
  variables = {"params": backbone_params, "batch_stats": batch_stats}
  with numerics.backbone_precision(learner.precision):
    if not batch_stats:  # a backbone without BatchNorm
      return learner.backbone.apply(variables, to_float(images), **backbones.call_options(learner.backbone, True))
    return learner.backbone.apply(variables, to_float(images), **backbones.call_options(learner.backbone, True),
                               mutable=["batch_stats"])[0]


def head_logits(kind: str, head: dict, rho, embeddings: jax.Array) -> jax.Array:
  """Logits ``[n, way]`` of the adapted head ``kind`` (``linear``, ``softmax`` or ``dr``) on embeddings ``[n, D]``:
  ``z w + b``, or :func:`fewshot.heads.logits_from_distances` of the squared distances to the columns of ``w``.

  >>> head = {"w": jnp.array([[0.0, 2.0]])}   # one dimension, representatives at 0 and 2
  >>> head_logits("softmax", head, None, jnp.array([[1.5]])).tolist()
  [[-2.25, -0.25]]
  """
  if kind == "linear":
    return embeddings @ head["w"] + head["b"]
  # By difference, as the prototypes' distances: exact float32 whatever --precision says (fewshot.numerics).
  squared = distances.squared_euclidean(embeddings, head["w"].T)
  return heads.logits_from_distances(squared, kind, heads.RHO_INIT if rho is None else rho)


def _logits(learner: MetaLearner, params, batch_stats, images) -> jax.Array:
  embeddings = _embed(learner, params["backbone"], batch_stats, images)
  return head_logits(learner.head, params["head"], params.get("rho"), embeddings)


def adapted(learner: MetaLearner, params, batch_stats, episode: Episode, steps: int):
  """The parameters after ``steps`` gradient steps on the episode's support cross-entropy (ANIL: the head's only)."""
  # The DR head's temperature is the outer loop's alone: frozen in the inner steps, as the backbone under ANIL.
  meta = {"rho": params["rho"]} if "rho" in params else {}
  if learner.adapt == "head":  # the support embeddings do not change in the inner loop: embedded once
    support = _embed(learner, params["backbone"], batch_stats, episode.support_images)
    fast, frozen = {"head": params["head"]}, {"backbone": params["backbone"], **meta}
    logits = lambda fast: head_logits(learner.head, fast["head"], params.get("rho"), support)  # noqa: E731
  else:
    fast, frozen = {k: v for k, v in params.items() if k not in meta}, meta
    logits = lambda fast: _logits(learner, {**fast, **frozen}, batch_stats, episode.support_images)  # noqa: E731

  def step(fast, _):
    grads = jax.grad(lambda f: heads.loss_and_accuracy(logits(f), episode.support_labels)[0])(fast)
    if learner.first_order:  # FOMAML: the inner gradients as constants of the meta-gradient
      grads = jax.lax.stop_gradient(grads)
    return jax.tree.map(lambda p, g: p - learner.inner_lr * g, fast, grads), None

  fast, _ = jax.lax.scan(step, fast, None, length=steps)
  return {**frozen, **fast}


def _query_loss(learner: MetaLearner, params, batch_stats, episode: Episode, steps: int):
  fast = adapted(learner, params, batch_stats, episode, steps)
  return heads.loss_and_accuracy(_logits(learner, fast, batch_stats, episode.query_images), episode.query_labels)


def train_step(learner: MetaLearner, state: TrainState, episodes: Episode):
  """One meta-update on ``episodes`` (a leading axis of ``learner.tasks`` episodes): the mean of their query losses
  after adaptation; ``{"loss", "accuracy"}`` averaged over the tasks, before the update.
  """

  def loss_fn(params):
    losses, accuracies = jax.vmap(lambda e: _query_loss(learner, params, state.batch_stats, e, learner.inner_steps))(
        episodes)
    return losses.mean(), accuracies.mean()

  (loss, accuracy), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
  return state.apply_gradients(grads, state.batch_stats, learner.optimizer), {"loss": loss, "accuracy": accuracy}


def episode_accuracy(learner: MetaLearner, variables: dict, episode: Episode) -> jax.Array:
  """Query accuracy after ``test_inner_steps`` on the support set (evaluation transform, batch statistics)."""
  n_support = episode.support_images.shape[0]
  images = eval_images(learner, jnp.concatenate([episode.support_images, episode.query_images]))
  episode = episode.replace(support_images=images[:n_support], query_images=images[n_support:])
  return _query_loss(learner, variables["params"], variables["batch_stats"], episode, learner.test_inner_steps)[1]


def lowered_step(learner: MetaLearner, input_shape: tuple[int, ...], stored_shape: tuple[int, ...]):
  """One run's training step lowered (nothing compiles): what a seed group's memory check measures."""
  state = jax.eval_shape(lambda: init_state(learner, jax.random.key(0), input_shape))
  episode = episode_structs(learner.shape, stored_shape, lead=(learner.tasks,))
  return jax.jit(lambda s, e: train_step(learner, s, e)).lower(state, episode)


# ---- compiled chunks (fewshot.training.chunks' step functions) ---------------------------------------------------
def _train_on_draw(learner: MetaLearner, state: TrainState, key: jax.Array, index, classes, images, last):
  """One meta-update: the step's ``way × tasks`` classes split into ``tasks`` episodes, each augmented with its own
  key (the step's own for a single task).
  """
  del index, last
  shape, tasks = learner.shape, learner.tasks
  keys = key[None] if tasks == 1 else jax.vmap(lambda t: jax.random.fold_in(key, t))(jnp.arange(tasks))
  episodes = jax.vmap(lambda k, c, i: augment_training(learner, k, episode_from_images(i, c, shape)))(
      keys, classes.reshape(tasks, shape.way), images.reshape(tasks, shape.way, *images.shape[1:]))
  return train_step(learner, state, episodes)


def train_chunk(learner: MetaLearner, state: TrainState, source, train_key: jax.Array, num_episodes: int):
  """The next ``num_episodes`` meta-updates (donating ``state``): the state, per-episode metrics, and no
  diagnostics (``{}``: see the module's docstring).
  """
  shape = learner.shape
  state, out = chunks.run_chunk(_train_on_draw, learner, state, source, train_key, seed_groups.local_step(state.step),
                                num_episodes, shape.way * learner.tasks, shape.per_class, donate=True)
  return state, out, {}


def _accuracy_on_draw(static: tuple[MetaLearner, EpisodeShape], variables: dict, key, index, classes, images, last):
  del key, index, last
  learner, shape = static
  return variables, episode_accuracy(learner, variables, episode_from_images(images, classes, shape))


def episode_accuracies(learner: MetaLearner, variables: dict, source, key: jax.Array, num_episodes: int,
                       shape: EpisodeShape, shifts: int = 0, progress=None) -> jax.Array:
  """Per-episode query accuracy ``[num_episodes]`` (``[R, num_episodes]`` for a group), as ProtoNet's; ``shifts``
  must be 0 (the adapted network sees each image once; ``Config`` refuses ``--test_shifts`` for these methods).
  """
  if shifts:
    raise ValueError(f"MAML and ANIL test one view of each image; got shifts={shifts}.")
  accuracies = chunks.evaluated(_accuracy_on_draw, (learner, shape), variables, source, key, num_episodes, shape.way,
                                shape.per_class, progress)
  return jnp.zeros((*key.shape, 0), jnp.float32) if accuracies is None else accuracies
