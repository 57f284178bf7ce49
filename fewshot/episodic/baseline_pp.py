"""Baseline++ (Chen et al. 2019, "A Closer Look at Few-shot Classification", Sec. 3.2): a method of
:mod:`fewshot.episodic.methods`, its steps pure functions of (learner, state, episode) like ProtoNet's.

Training is not episodic: the backbone and a cosine classifier over every training class (``base_classes``
outputs) learn by cross-entropy. Each step here takes one drawn batch of ``way`` classes × ``shot + query``
images, each labelled by its class in the train split (a class-balanced batch; Chen et al. draw 16 images
at random). The classifier is Chen et al.'s ``distLinear``: logits ``s · <x/||x||, g_c v_c/||v_c||>``, the weight's
direction ``v_c`` and its norm ``g_c`` learned per class (their code's ``WeightNorm``), scale ``s`` = 2 for at most
200 outputs, else 10 (their code's choice). At test the backbone is frozen: a new cosine classifier of ``way``
outputs (initialised as PyTorch's ``nn.Linear``, from the episode's key) is fitted on the support embeddings by
``finetune_steps`` steps of SGD (rate 0.01, momentum 0.9, dampening 0.9, weight decay 0.001, as their code), and
labels the queries. Their code takes 100 epochs over the support set in shuffled batches of 4; here each step
takes the whole support set at once, so an episode's fine-tuning is one compiled loop. Updates record no
diagnostics (the classifier is not a distance head on one episode's embedding).

    >>> import jax.numpy as jnp
    >>> cosine_logits({"v": jnp.eye(2), "g": jnp.ones(2)}, jnp.array([[3.0, 0.0]]), scale=2.0)
    Array([[2., 0.]], dtype=float32)
"""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from fewshot import backbones, heads
from fewshot.augment.augmentation import NO_AUGMENTATION, Augmentation
from fewshot.choices import PRECISIONS
from fewshot.episodic import learners
from fewshot.episodic.episodes import Episode, EpisodeShape, episode_from_images, episode_structs
from fewshot.episodic.learning import augment_training, embed, eval_embeddings, model_variables  # noqa: F401
from fewshot.errors import ConfigError
from fewshot.training import chunks, seed_groups
from fewshot.training.train_state import TrainState, adam

DIVERGED_FIX = "lower --learning_rate"
RUN_FIX = None  # one batch's activations, as ProtoNet's step
NO_DIAGNOSTICS = ("not recorded: the update diagnostics compare one episode's embedding under a distance head; "
                  "Baseline++ trains a classifier over every training class")
EPS = 1e-5  # Chen et al.'s distLinear: x / (||x|| + 1e-5)


@dataclasses.dataclass(frozen=True)
class BaselineLearner:
  """A backbone and a cosine classifier over ``base_classes`` training classes (configuration only)."""

  backbone: nn.Module
  shape: EpisodeShape  # a training batch: way classes x (shot + query) images
  base_classes: int
  finetune_steps: int = 100
  optimizer: optax.GradientTransformation = adam()
  augmentation: Augmentation = NO_AUGMENTATION
  precision: str = PRECISIONS[0]


def learner(config, head, backbone: nn.Module) -> BaselineLearner:
  """Its row's learner: the configuration's (``--base_classes``, ``--finetune_steps``) on ``backbone``."""
  del head  # a head value is protonet's (refused by the configuration's method check)
  return BaselineLearner(backbone, learners.train_shape(config), config.base_classes, config.finetune_steps,
                         adam(config.learning_rate, config.lr_halve_every), learners.build_augmentation(config),
                         config.precision)


def scale(outputs: int) -> float:
  """Chen et al.'s scale of the cosine logits: 2 for at most 200 classes, else 10."""
  return 2.0 if outputs <= 200 else 10.0


def cosine_logits(classifier: dict, embeddings: jax.Array, scale: float) -> jax.Array:
  """``scale · cos`` of embeddings ``[n, D]`` with the classes' weights ``g_c v_c / ||v_c||`` (``v``: ``[D, C]``)."""
  x = embeddings / (jnp.linalg.norm(embeddings, axis=-1, keepdims=True) + EPS)
  w = classifier["v"] * (classifier["g"] / jnp.linalg.norm(classifier["v"], axis=0))
  return scale * jnp.matmul(x, w, precision=jax.lax.Precision.HIGHEST)


def new_classifier(key: jax.Array, dim: int, outputs: int) -> dict:
  """PyTorch ``nn.Linear``'s initialisation, ``U(-1/sqrt(D), 1/sqrt(D))``, with ``g`` the columns' norms (WeightNorm)."""
  v = jax.random.uniform(key, (dim, outputs), jnp.float32, -1.0, 1.0) / jnp.sqrt(dim)
  return {"v": v, "g": jnp.linalg.norm(v, axis=0)}


def init_state(learner: BaselineLearner, key: jax.Array, input_shape: tuple[int, ...]) -> TrainState:
  """``params = {"backbone": ..., "classifier": {"v": [D, base_classes], "g": [base_classes]}}``."""
  check_shapes(learner, tuple(input_shape))
  return _init_state(learner, key, tuple(input_shape))


@functools.partial(jax.jit, static_argnums=(0, 2))
def _init_state(learner: BaselineLearner, key: jax.Array, input_shape: tuple[int, ...]) -> TrainState:
  variables = learner.backbone.init(key, jnp.zeros((2, *input_shape), jnp.float32),
                                 **backbones.call_options(learner.backbone, False))
  dim = backbones.check_output(learner.backbone, input_shape)
  params = {"backbone": variables["params"],
            "classifier": new_classifier(jax.random.fold_in(key, 1), dim, learner.base_classes)}
  return TrainState.create(params, variables.get("batch_stats", {}), learner.optimizer)


@functools.lru_cache(maxsize=64)
def check_shapes(learner: BaselineLearner, input_shape: tuple[int, ...]) -> None:
  """One-line ``ConfigError`` for a backbone that does not map images to ``[n, D]`` embeddings (tracing only)."""
  backbones.check_output(learner.backbone, input_shape)


def check_splits(learner: BaselineLearner, splits: dict) -> None:
  """One-line ``ConfigError`` where the train split has more classes than the classifier has outputs."""
  train = splits.get("train")
  if train is not None and train.num_classes > learner.base_classes:
    raise ConfigError(f"--base_classes {learner.base_classes} is below the {train.num_classes} classes of the train "
                      f"split, each of which needs an output; pass --base_classes {train.num_classes}.")


# ---- training: a batch of training classes under the cosine classifier ------------------------------------------
def _loss(learner: BaselineLearner, params, batch_stats, images: jax.Array, labels: jax.Array):
  embeddings, batch_stats = embed(learner, params, batch_stats, images, train=True)
  logits = cosine_logits(params["classifier"], embeddings.astype(jnp.float32), scale(learner.base_classes))
  loss, accuracy = heads.loss_and_accuracy(logits, labels)
  return loss, (accuracy, batch_stats)


def train_step(learner: BaselineLearner, state: TrainState, episode: Episode):
  """One Adam update on the episode's images, each labelled by its class in the train split."""
  images = jnp.concatenate([episode.support_images, episode.query_images])
  labels = episode.classes[jnp.concatenate([episode.support_labels, episode.query_labels])]
  grad_fn = jax.value_and_grad(functools.partial(_loss, learner), has_aux=True)
  (loss, (accuracy, batch_stats)), grads = grad_fn(state.params, state.batch_stats, images, labels)
  return state.apply_gradients(grads, batch_stats, learner.optimizer), {"loss": loss, "accuracy": accuracy}


def lowered_step(learner: BaselineLearner, input_shape: tuple[int, ...], stored_shape: tuple[int, ...]):
  """One run's training step lowered (nothing compiles): what a seed group's memory check measures."""
  state = jax.eval_shape(lambda: init_state(learner, jax.random.key(0), input_shape))
  episode = episode_structs(learner.shape, stored_shape)
  return jax.jit(lambda s, e: train_step(learner, s, e)).lower(state, episode)


def _train_on_draw(learner: BaselineLearner, state: TrainState, key: jax.Array, index, classes, images, last):
  del index, last
  return train_step(learner, state, augment_training(learner, key, episode_from_images(images, classes,
                                                                                         learner.shape)))


def train_chunk(learner: BaselineLearner, state: TrainState, source, train_key: jax.Array, num_episodes: int):
  """The next ``num_episodes`` batches (donating ``state``): the state, per-batch metrics, and no diagnostics."""
  shape = learner.shape
  state, out = chunks.run_chunk(_train_on_draw, learner, state, source, train_key, seed_groups.local_step(state.step),
                                num_episodes, shape.way, shape.per_class, donate=True)
  return state, out, {}


# ---- test: a new cosine classifier fitted on the frozen support embeddings ---------------------------------------
def finetuned(key: jax.Array, support: jax.Array, labels: jax.Array, way: int, steps: int) -> dict:
  """The classifier of ``way`` outputs fitted on ``support [n, D]`` by ``steps`` full-batch SGD steps (Chen et al.'s
  rate 0.01, momentum 0.9 with dampening 0.9 and weight decay 0.001, as PyTorch's ``SGD`` defines them: optax's
  momentum has no dampening).
  """
  lr, momentum, dampening, decay = 0.01, 0.9, 0.9, 1e-3
  loss = lambda c: optax.softmax_cross_entropy_with_integer_labels(cosine_logits(c, support, scale(way)),  # noqa: E731
                                                                    labels).mean()

  def step(i, carry):
    classifier, buffer = carry
    grads = jax.tree.map(lambda g, p: g + decay * p, jax.grad(loss)(classifier), classifier)
    buffer = jax.tree.map(lambda b, g: jnp.where(i == 0, g, momentum * b + (1 - dampening) * g), buffer, grads)
    return jax.tree.map(lambda p, b: p - lr * b, classifier, buffer), buffer

  start = new_classifier(key, support.shape[-1], way)
  return jax.lax.fori_loop(0, steps, step, (start, jax.tree.map(jnp.zeros_like, start)))[0]


def episode_accuracy(learner: BaselineLearner, variables: dict, key: jax.Array, episode: Episode) -> jax.Array:
  """Query accuracy of the classifier fitted on the episode's support embeddings (evaluation transform and mode)."""
  n_support, way = episode.support_images.shape[0], episode.classes.shape[0]
  embeddings = eval_embeddings(learner, variables, jnp.concatenate([episode.support_images, episode.query_images]))
  support, query = embeddings[:n_support].astype(jnp.float32), embeddings[n_support:].astype(jnp.float32)
  classifier = finetuned(jax.random.fold_in(key, 2), support, episode.support_labels, way, learner.finetune_steps)
  return heads.loss_and_accuracy(cosine_logits(classifier, query, scale(way)), episode.query_labels)[1]


def _accuracy_on_draw(static: tuple[BaselineLearner, EpisodeShape], variables: dict, key, index, classes, images,
                      last):
  del index, last
  learner, shape = static
  return variables, episode_accuracy(learner, variables, key, episode_from_images(images, classes, shape))


def episode_accuracies(learner: BaselineLearner, variables: dict, source, key: jax.Array, num_episodes: int,
                       shape: EpisodeShape, shifts: int = 0, progress=None) -> jax.Array:
  """Per-episode query accuracy ``[num_episodes]`` (``[R, num_episodes]`` for a group), as ProtoNet's; ``shifts``
  must be 0 (``Config`` refuses ``--test_shifts`` for this method).
  """
  if shifts:
    raise ValueError(f"Baseline++ tests one view of each image; got shifts={shifts}.")
  accuracies = chunks.evaluated(_accuracy_on_draw, (learner, shape), variables, source, key, num_episodes, shape.way,
                                shape.per_class, progress)
  return jnp.zeros((*key.shape, 0), jnp.float32) if accuracies is None else accuracies
