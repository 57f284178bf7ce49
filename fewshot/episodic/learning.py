"""Episodic training and evaluation, as pure functions of (learner, state, data, key).

:class:`EpisodicLearner` holds a run's configuration (backbone, episode shape, head,
optimiser, diagnostics options, augmentation) and nothing else; the functions below take
it as their first, static argument. :func:`train_step` is one Adam update on one episode;
:func:`train_chunk` runs the episodes between two checkpoints as one compiled
``lax.scan`` over a source's blocks (:mod:`fewshot.training.sources`), so the host only steps in at
checkpoints. Episode ``i`` of a run always uses the key ``fold_in(train_key, i)``: a
resumed run replays the same episodes, wherever its split lives.

The learner's :class:`~fewshot.augment.Augmentation` sits between sampling and the model:
a training episode's images are augmented once, with ``fold_in(episode_key, 1)``, right
after they are drawn, so the update and its diagnostics see the same augmented images;
evaluation episodes get the deterministic evaluation transform.
"""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from fewshot import backbones, heads, numerics
from fewshot.augment import affine
from fewshot.augment.augmentation import NO_AUGMENTATION, Augmentation
from fewshot.augment.transforms import to_float
from fewshot.choices import CENTRINGS, PRECISIONS, PSI_CLASSIFIERS
from fewshot.episodic import diagnostics
from fewshot.episodic.episodes import Episode, EpisodeShape, episode_from_images, episode_structs
from fewshot.training import chunks, seed_groups
from fewshot.training.train_state import TrainState, adam

DIVERGED_FIX = "lower --learning_rate"
RUN_FIX = None  # a single run's step is not checked against the memory (one episode's activations)


@dataclasses.dataclass(frozen=True)
class EpisodicLearner:
  """One backbone + head trained on episodes of one shape: configuration only (hashable, static under jit).

  ``backbone`` is any flax module mapping images ``[n, H, W, C]`` to embeddings ``[n, D]``
  (:mod:`fewshot.backbones`); ``head`` a head value (:class:`fewshot.heads.Head`), or a ``--head``
  name that ``classifier`` and ``distance`` complete into one (they are unused beside a value). What a test
  does beyond the learner's embedding (``--test_shifts``) is the test's argument (:func:`eval_embeddings`'s
  ``shifts``), not the learner's: training and validation never see it.
  """

  backbone: nn.Module
  shape: EpisodeShape
  head: str | heads.Head = "softmax"
  classifier: str = "proto"
  distance: str = "squared_euclidean"
  optimizer: optax.GradientTransformation = adam()
  centring: str = "points"  # of the diagnostics; "features" reproduces the reference code, "both" records each
  psi_classifier: str = "model"  # the paper's ψ uses the model's class distance; the reference code "proto"
  augmentation: Augmentation = NO_AUGMENTATION
  precision: str = PRECISIONS[0]  # the backbone's (fewshot.numerics); heads and diagnostics are float32 whatever it says

  def __post_init__(self):
    # Resolved once here, so that every function below sees a head value.
    object.__setattr__(self, "head", heads.resolve(self.head, self.classifier, self.distance))
    for name, choices in (("centring", CENTRINGS), ("psi_classifier", PSI_CLASSIFIERS)):
      if getattr(self, name) not in choices:
        raise ValueError(f"Unknown {name} {getattr(self, name)!r}; choose one of {', '.join(choices)}.")

  @property
  def psi_head(self) -> heads.Head | None:
    """The head whose class distance the diagnostics' ψ compares: the model's (None if it has none), or
    Euclidean prototypes (``psi_classifier="proto"``, the reference code's).
    """
    if self.psi_classifier == "proto":
      return heads.DistanceHead(classifier="proto")
    return self.head if heads.has_class_distance(self.head) else None


# ---- the model: backbone and head ---------------------------------------------------------------
def init_state(learner: EpisodicLearner, key: jax.Array, input_shape: tuple[int, ...]) -> TrainState:
  """The initial state ``params = {"backbone": ..., **head.init(...)}``, once :func:`check_shapes` passed;
  ``input_shape`` is the backbone's input (the transformed images'), not the stored one.
  """
  check_shapes(learner, tuple(input_shape))
  return _init_state(learner, key, tuple(input_shape))


@functools.partial(jax.jit, static_argnums=(0, 2))  # eager init would compile op by op
def _init_state(learner: EpisodicLearner, key: jax.Array, input_shape: tuple[int, ...]) -> TrainState:
  variables = learner.backbone.init(key, jnp.zeros((2, *input_shape), jnp.float32),
                                 **backbones.call_options(learner.backbone, False))
  params = {"backbone": variables["params"], **learner.head.init(jax.random.fold_in(key, 1))}
  return TrainState.create(params, variables.get("batch_stats", {}), learner.optimizer)


@functools.lru_cache(maxsize=64)
def check_shapes(learner: EpisodicLearner, input_shape: tuple[int, ...]) -> None:
  """One-line ``ConfigError`` for a backbone or head that returns the wrong shapes, from tracing alone (nothing runs):
  see :func:`fewshot.backbones.check_output` and :func:`fewshot.heads.check_outputs`.
  """
  dim = backbones.check_output(learner.backbone, input_shape)
  shape = learner.shape
  heads.check_outputs(learner.head, shape.way, shape.way * shape.shot, shape.way * shape.query, dim)


def check_splits(learner: EpisodicLearner, splits: dict) -> None:
  """Nothing beyond the episodes' own checks: any split that supplies the episodes trains and tests."""
  del learner, splits


def model_variables(state: TrainState) -> dict:
  """What evaluation needs: backbone and head parameters, running BatchNorm statistics."""
  return {"params": state.params, "batch_stats": state.batch_stats}


def head_params(params: dict) -> dict:
  """The head's parameters: everything in ``params`` but the backbone's (the paper heads': ``{"rho"}``)."""
  return {name: value for name, value in params.items() if name != "backbone"}


def theta(head, params: dict) -> float | None:
  """The DR head's θ = exp(ρ); None for a head without ρ, and for the softmax head, whose ρ is carried (every
  paper head's checkpoint holds one) but takes no part in its logits (``metrics.jsonl`` records it all the same).
  """
  rho = params.get("rho")
  if rho is None or (isinstance(head, heads.DistanceHead) and head.formulation != "dr"):
    return None
  return float(jnp.exp(rho))


def embed(learner: EpisodicLearner, params, batch_stats, images: jax.Array, train: bool):
  """Embeddings of images (uint8, or float in [0, 1]) and the batch statistics after the forward pass.

  Its products follow ``learner.precision`` (:mod:`fewshot.numerics`). In training mode BatchNorm normalises with
  this batch's statistics and updates its running averages; in evaluation mode it uses the running averages and
  changes nothing.
  """
  variables = {"params": params["backbone"], "batch_stats": batch_stats}
  with numerics.backbone_precision(learner.precision):
    if not train:
      return learner.backbone.apply(variables, to_float(images), **backbones.call_options(learner.backbone, False)), batch_stats
    embeddings, updates = learner.backbone.apply(variables, to_float(images),
                                              **backbones.call_options(learner.backbone, True), mutable=["batch_stats"])
  return embeddings, updates.get("batch_stats", batch_stats)  # a backbone without BatchNorm has none


def episode_embeddings(learner: EpisodicLearner, params, batch_stats, episode: Episode, train: bool):
  """Support and query embeddings from one forward pass (one set of BatchNorm statistics)."""
  n_support = episode.support_images.shape[0]
  images = jnp.concatenate([episode.support_images, episode.query_images])
  embeddings, batch_stats = embed(learner, params, batch_stats, images, train)
  return embeddings[:n_support], embeddings[n_support:], batch_stats


def logits(learner: EpisodicLearner, params, support: jax.Array, query: jax.Array, episode: Episode) -> jax.Array:
  """Query logits of an episode from its embeddings, under the learner's head."""
  return learner.head.logits(head_params(params), support, episode.support_labels, query, episode.classes.shape[0])


# ---- transforms ---------------------------------------------------------------------------------
def _transform(episode: Episode, transform, applies: bool) -> Episode:
  """The episode with support and query images passed through ``transform`` as one batch, if it ``applies``."""
  if not applies:
    return episode  # as stored: to_float in embed, exactly as before augmentation existed
  n_support = episode.support_images.shape[0]
  images = transform(jnp.concatenate([episode.support_images, episode.query_images]))
  return episode.replace(support_images=images[:n_support], query_images=images[n_support:])


def augment_training(learner: EpisodicLearner, key: jax.Array, episode: Episode) -> Episode:
  """The drawn episode of ``key`` through the training augmentation, keyed ``fold_in(key, 1)``."""
  return _transform(episode, lambda images: learner.augmentation.train(jax.random.fold_in(key, 1), images),
                    learner.augmentation.changes_training)


def eval_images(learner: EpisodicLearner, images: jax.Array) -> jax.Array:
  """Stored images (uint8, or float in [0, 1]) as evaluation sees them."""
  return learner.augmentation.eval(images) if learner.augmentation.enabled else images


def eval_embeddings(learner: EpisodicLearner, variables: dict, images: jax.Array, shifts: int = 0) -> jax.Array:
  """Embeddings ``[n, D]`` of stored images as every evaluation computes them: the evaluation transform,
  BatchNorm in evaluation mode (so an image's embedding does not depend on its batch), and with ``shifts`` > 0
  (``--test_shifts``) the mean over the image's whole-pixel translations within ``±shifts``
  (:func:`fewshot.augment.affine.translations`).
  """
  images = eval_images(learner, images)
  one = lambda view: embed(learner, variables["params"], variables["batch_stats"], view, train=False)[0]
  # Shifted views one at a time (lax.map): the activations stay those of a single view's batch.
  return jax.lax.map(one, affine.translations(images, shifts)).mean(0) if shifts else one(images)


def view_embeddings(view: tuple[EpisodicLearner, int], variables: dict, images: jax.Array) -> jax.Array:
  """:func:`eval_embeddings` of ``view = (learner, shifts)``: an embed function of
  :mod:`fewshot.training.split_embedding`, whose static argument is one hashable value.
  """
  learner, shifts = view
  return eval_embeddings(learner, variables, images, shifts)


# ---- steps ---------------------------------------------------------------------------------------
def _loss(learner: EpisodicLearner, params, batch_stats, episode: Episode):
  support, query, batch_stats = episode_embeddings(learner, params, batch_stats, episode, train=True)
  loss, accuracy = heads.loss_and_accuracy(logits(learner, params, support, query, episode), episode.query_labels)
  return loss, (accuracy, batch_stats, (support, query))


def train_step(learner: EpisodicLearner, state: TrainState, episode: Episode):
  """One Adam update on one episode.

  Returns the new state, ``{"loss", "accuracy"}`` before the update, and the episode's
  embeddings before the update (the diagnostics' X).
  """
  grad_fn = jax.value_and_grad(functools.partial(_loss, learner), has_aux=True)
  (loss, (accuracy, batch_stats, before)), grads = grad_fn(state.params, state.batch_stats, episode)
  return state.apply_gradients(grads, batch_stats, learner.optimizer), {"loss": loss, "accuracy": accuracy}, before


def diagnose(learner: EpisodicLearner, before, new_state: TrainState, old_batch_stats, episode: Episode) -> dict:
  """Diagnostics of one update: the same images embedded again with the updated parameters.

  The second forward pass runs in the update's BatchNorm mode (training: the episode's
  own statistics) and its running-statistics update is discarded, so diagnosing never
  changes the model.
  """
  after_support, after_query, _ = episode_embeddings(learner, new_state.params, old_batch_stats, episode, train=True)
  return diagnostics.update_diagnostics(
      *before, after_support, after_query, episode.support_labels, episode.query_labels,
      episode.classes.shape[0], classifier=learner.psi_head, centring=learner.centring,
  )


def lowered_step(learner: EpisodicLearner, input_shape: tuple[int, ...], stored_shape: tuple[int, ...]):
  """One run's training step lowered on an episode of ``stored_shape`` images (nothing compiles or runs): what
  :func:`fewshot.training.seed_groups.check_memory` measures a group's memory by.
  """
  state = jax.eval_shape(lambda: init_state(learner, jax.random.key(0), input_shape))
  episode = episode_structs(learner.shape, stored_shape)
  return jax.jit(lambda s, e: train_step(learner, s, e)[:2]).lower(state, episode)


def episode_accuracy(learner: EpisodicLearner, variables: dict, episode: Episode, shifts: int = 0) -> jax.Array:
  """Query accuracy of a drawn episode, its images embedded by :func:`eval_embeddings` (with ``shifts``)."""
  n_support = episode.support_images.shape[0]
  embeddings = eval_embeddings(learner, variables, jnp.concatenate([episode.support_images, episode.query_images]),
                               shifts)
  support, query = embeddings[:n_support], embeddings[n_support:]
  return heads.loss_and_accuracy(logits(learner, variables["params"], support, query, episode),
                                 episode.query_labels)[1]


# ---- compiled chunks: the step functions of fewshot.training.chunks ----------------------------------
def _train_on_draw(learner: EpisodicLearner, state: TrainState, key: jax.Array, index, classes, images, last):
  """One training episode of a chunk: augmented once (the update and the diagnostics' second pass see the same
  images), and diagnosed only if it is the chunk's last (the paper's protocol; the cond keeps the extra forward
  pass out of the other episodes).
  """
  episode = augment_training(learner, key, episode_from_images(images, classes, learner.shape))
  new_state, metrics, before = train_step(learner, state, episode)
  no_diagnostics = {name: jnp.float32(jnp.nan) for name in diagnostics.fields(learner.centring)}
  diagnosed = jax.lax.cond(index == last, lambda: diagnose(learner, before, new_state, state.batch_stats, episode),
                           lambda: no_diagnostics)
  return new_state, {**metrics, "diagnostics": diagnosed}


def train_chunk(learner: EpisodicLearner, state: TrainState, source, train_key: jax.Array, num_episodes: int):
  """Train on the next ``num_episodes`` episodes of ``source`` (a :mod:`fewshot.training.sources` source).

  Returns the state, per-episode ``{"loss", "accuracy"}`` (before each update) and the
  diagnostics of the last update (:func:`fewshot.episodic.diagnostics.episode_diagnostics`).
  The state passed in is donated (invalid afterwards). With ``[R]`` keys and a state
  stacked over R runs, trains the group at once: outputs gain a leading run axis.
  """
  shape = learner.shape
  state, out = chunks.run_chunk(_train_on_draw, learner, state, source, train_key, seed_groups.local_step(state.step),
                                num_episodes, shape.way, shape.per_class, donate=True)
  diagnosed = jax.tree.map(lambda d: d[..., -1], out.pop("diagnostics"))
  return state, out, diagnosed


def _accuracy_on_draw(static: tuple[EpisodicLearner, EpisodeShape, int], variables: dict, key, index, classes,
                      images, last):
  del key, index, last
  learner, shape, shifts = static
  return variables, episode_accuracy(learner, variables, episode_from_images(images, classes, shape), shifts)


def episode_accuracies(learner: EpisodicLearner, variables: dict, source, key: jax.Array, num_episodes: int,
                       shape: EpisodeShape, shifts: int = 0, progress=None) -> jax.Array:
  """Per-episode query accuracy ``[num_episodes]`` of the episodes keyed ``fold_in(key, i)`` (BatchNorm in
  evaluation mode, each image the mean over its ``shifts`` translations where > 0); ``[R, num_episodes]`` for a
  group's stacked variables and ``[R]`` keys. ``progress(done, all)``: told as spans of episodes finish.
  """
  static = (learner, shape, shifts)
  accuracies = chunks.evaluated(_accuracy_on_draw, static, variables, source, key, num_episodes, shape.way,
                                shape.per_class, progress)
  return jnp.zeros((*key.shape, 0), jnp.float32) if accuracies is None else accuracies
