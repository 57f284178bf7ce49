"""The compiled parts of episodic training: train state, a scanned chunk of episodes, evaluation.

One call of :meth:`Learner.train_chunk` trains on the episodes between two checkpoints
inside a single ``lax.scan``: episodes are drawn, gathered and converted on the device,
so the host only steps in at checkpoints. Episode ``i`` of a run always uses the key
``fold_in(train_key, i)``; a resumed run therefore replays the same episodes. A split in
host memory (:class:`fewshot.streaming.HostSource`) trains on the same episodes, one
``lax.scan`` per prefetched block.

The learner's :class:`~fewshot.augment.Augmentation` sits between sampling and the model:
a training episode's images are augmented once, with ``fold_in(episode_key, 1)``, right
after they are drawn, so the update and its diagnostics see the same augmented images;
evaluation episodes get the deterministic evaluation transform.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import optax

from fewshot import diagnostics, heads
from fewshot.augment import NO_AUGMENTATION, Augmentation, to_float
from fewshot.episodes import Episode, EpisodeShape, EpisodeSource, episode_from_images, sample_episode
from fewshot.streaming import Drawn, HostSource


@flax.struct.dataclass
class TrainState:
  episode: jax.Array  # int32 scalar: episodes trained so far
  params: Any  # {"backbone": ..., "rho": scalar}; rho is unused (zero gradient) by softmax heads
  batch_stats: Any
  opt_state: Any

  @property
  def variables(self) -> dict:
    """What evaluation needs: backbone parameters, running BatchNorm statistics and rho."""
    return {"params": self.params, "batch_stats": self.batch_stats}


def adam(learning_rate: float = 1e-3) -> optax.GradientTransformation:
  """The paper's optimiser: Adam (0.9, 0.999, eps 1e-8), no weight decay, no schedule."""
  return optax.adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8)


PSI_CLASSIFIERS = ("model", "proto")


class Learner:
  """Compiled training and evaluation of one backbone + head on episodes of one shape."""

  def __init__(
      self,
      model: nn.Module,
      shape: EpisodeShape,
      *,
      head: str = "softmax",
      classifier: str = "proto",
      optimizer: optax.GradientTransformation | None = None,
      centring: str = "points",
      psi_classifier: str = "model",
      augmentation: Augmentation = NO_AUGMENTATION,
  ):
    heads.check_names(head, classifier)
    self.model, self.shape, self.head, self.classifier = model, shape, head, classifier
    self.optimizer = optimizer or adam()
    if centring not in diagnostics.CENTRINGS:
      raise ValueError(f"Unknown centring {centring!r}; choose one of {', '.join(diagnostics.CENTRINGS)}.")
    self.centring = centring
    # The paper's ψ uses the model's own class distance; the reference code always uses prototypes.
    if psi_classifier not in PSI_CLASSIFIERS:
      raise ValueError(f"Unknown psi_classifier {psi_classifier!r}; choose one of {', '.join(PSI_CLASSIFIERS)}.")
    self.psi_classifier = classifier if psi_classifier == "model" else psi_classifier
    self.augmentation = augmentation
    self.init = jax.jit(self._init, static_argnums=1)  # eager init would compile op by op
    self._train_resident = jax.jit(self._train_chunk, static_argnums=3, donate_argnums=0)
    self._train_drawn = jax.jit(self._train_block, donate_argnums=0)
    self._evaluate_resident = jax.jit(self._evaluate, static_argnums=(3, 4))
    self._evaluate_drawn = jax.jit(self._evaluate_block, static_argnums=2)

  # ---- pure pieces -------------------------------------------------------------------
  def _init(self, key: jax.Array, image_shape: tuple[int, ...]) -> TrainState:
    """``image_shape`` is the backbone's input: the transformed images' shape, not the stored one."""
    variables = self.model.init(key, jnp.zeros((2, *image_shape), jnp.float32), train=False)
    params = {"backbone": variables["params"], "rho": jnp.asarray(heads.RHO_INIT, jnp.float32)}
    return TrainState(
        episode=jnp.zeros((), jnp.int32),
        params=params,
        batch_stats=variables["batch_stats"],
        opt_state=self.optimizer.init(params),
    )

  def embed(self, params, batch_stats, images: jax.Array, train: bool):
    """Embeddings of images (uint8, or float in [0, 1]) and the batch statistics after the forward pass.

    In training mode BatchNorm normalises with this batch's statistics and updates its
    running averages; in evaluation mode it uses the running averages and changes nothing.
    """
    variables = {"params": params["backbone"], "batch_stats": batch_stats}
    if not train:
      return self.model.apply(variables, to_float(images), train=False), batch_stats
    embeddings, updates = self.model.apply(variables, to_float(images), train=True, mutable=["batch_stats"])
    return embeddings, updates["batch_stats"]

  def _transform(self, episode: Episode, transform) -> Episode:
    """The episode with support and query images passed through ``transform`` as one batch."""
    if not self.augmentation.enabled:
      return episode  # as stored: to_float in embed, exactly as before augmentation existed
    n_support = episode.support_images.shape[0]
    images = transform(jnp.concatenate([episode.support_images, episode.query_images]))
    return episode.replace(support_images=images[:n_support], query_images=images[n_support:])

  def training_episode(self, key: jax.Array, source: EpisodeSource) -> Episode:
    """The training episode of ``key``: drawn with ``key``, augmented with ``fold_in(key, 1)``."""
    return self.augment_training(key, sample_episode(key, source, self.shape))

  def augment_training(self, key: jax.Array, episode: Episode) -> Episode:
    """The drawn episode of ``key`` through the training augmentation, keyed ``fold_in(key, 1)``."""
    return self._transform(episode, lambda images: self.augmentation.train(jax.random.fold_in(key, 1), images))

  def evaluation_episode(self, key: jax.Array, source: EpisodeSource, shape: EpisodeShape) -> Episode:
    """The evaluation episode of ``key``, through the evaluation transform."""
    return self._transform(sample_episode(key, source, shape), self.augmentation.eval)

  def eval_images(self, images: jax.Array) -> jax.Array:
    """Stored images (uint8, or float in [0, 1]) as evaluation sees them."""
    return self.augmentation.eval(images) if self.augmentation.enabled else images

  def episode_embeddings(self, params, batch_stats, episode: Episode, train: bool):
    """Support and query embeddings from one forward pass (one set of BatchNorm statistics)."""
    n_support = episode.support_images.shape[0]
    images = jnp.concatenate([episode.support_images, episode.query_images])
    embeddings, batch_stats = self.embed(params, batch_stats, images, train)
    return embeddings[:n_support], embeddings[n_support:], batch_stats

  def logits(self, params, support: jax.Array, query: jax.Array, episode: Episode) -> jax.Array:
    """Query logits of an episode from its embeddings, under this learner's head."""
    return heads.episode_logits(
        support,
        episode.support_labels,
        query,
        episode.classes.shape[0],
        classifier=self.classifier,
        head=self.head,
        rho=params["rho"],
    )

  def _loss(self, params, batch_stats, episode: Episode):
    support, query, batch_stats = self.episode_embeddings(params, batch_stats, episode, train=True)
    loss, accuracy = heads.loss_and_accuracy(self.logits(params, support, query, episode), episode.query_labels)
    return loss, (accuracy, batch_stats, (support, query))

  def train_step(self, state: TrainState, episode: Episode):
    """One Adam update on one episode.

    Returns the new state, ``{"loss", "accuracy"}`` before the update, and the episode's
    embeddings before the update (the diagnostics' X).
    """
    grad_fn = jax.value_and_grad(self._loss, has_aux=True)
    (loss, (accuracy, batch_stats, before)), grads = grad_fn(state.params, state.batch_stats, episode)
    updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
    new_state = state.replace(
        episode=state.episode + 1,
        params=optax.apply_updates(state.params, updates),
        batch_stats=batch_stats,
        opt_state=opt_state,
    )
    return new_state, {"loss": loss, "accuracy": accuracy}, before

  def diagnose(self, before, new_state: TrainState, old_batch_stats, episode: Episode) -> dict:
    """Diagnostics of one update: the same images embedded again with the updated parameters.

    The second forward pass runs in the update's BatchNorm mode (training: the episode's
    own statistics) and its running-statistics update is discarded, so diagnosing never
    changes the model.
    """
    after_support, after_query, _ = self.episode_embeddings(new_state.params, old_batch_stats, episode, train=True)
    return diagnostics.episode_diagnostics(
        *before, after_support, after_query, episode.support_labels, episode.query_labels,
        episode.classes.shape[0], classifier=self.psi_classifier, centring=self.centring,
    )

  # ---- entry points: a resident split is drawn from inside one compiled call, a host split in blocks --
  def train_chunk(self, state: TrainState, source: EpisodeSource | HostSource, train_key: jax.Array,
                  num_episodes: int):
    """Train on the next ``num_episodes`` episodes.

    Returns the state, per-episode ``{"loss", "accuracy"}`` (before each update) and the
    diagnostics of the last update (:func:`fewshot.diagnostics.episode_diagnostics`).
    The state passed in is donated (invalid afterwards).
    """
    if not isinstance(source, HostSource):
      return self._train_resident(state, source, train_key, num_episodes)
    first = int(state.episode)
    last = jnp.int32(first + num_episodes - 1)
    metrics, diagnosed = [], None
    for drawn in source.stream(train_key, first, num_episodes, self.shape.way, self.shape.per_class):
      state, block_metrics, diagnosed = self._train_drawn(state, drawn, train_key, last)
      metrics.append(block_metrics)
    return state, jax.tree.map(lambda *m: jnp.concatenate(m), *metrics), diagnosed

  def evaluate(self, variables, source: EpisodeSource | HostSource, key: jax.Array, num_episodes: int,
               shape: EpisodeShape) -> jax.Array:
    """Per-episode query accuracy ``[num_episodes]`` of the episodes keyed ``fold_in(key, i)`` (BatchNorm in evaluation mode)."""
    if not isinstance(source, HostSource):
      return self._evaluate_resident(variables, source, key, num_episodes, shape)
    blocks = [self._evaluate_drawn(variables, drawn, shape)
              for drawn in source.stream(key, 0, num_episodes, shape.way, shape.per_class)]
    return jnp.concatenate(blocks) if blocks else jnp.zeros((0,), jnp.float32)

  # ---- compiled bodies ---------------------------------------------------------------------------
  def _scan_training(self, state: TrainState, train_key: jax.Array, last: jax.Array, draw, drawn, length):
    """``lax.scan`` of training steps on the episodes ``draw(key, x)`` for each ``x`` of ``drawn``."""
    no_diagnostics = {name: jnp.float32(jnp.nan) for name in diagnostics.FIELDS}

    def body(state, x):
      key = jax.random.fold_in(train_key, state.episode)
      # Augmented once: the update and the diagnostics' second pass see the same images.
      episode = self.augment_training(key, draw(key, x))
      new_state, metrics, before = self.train_step(state, episode)
      # Only the chunk's last update is diagnosed (the paper's protocol); the cond keeps
      # the extra forward pass out of the other episodes.
      diagnosed = jax.lax.cond(
          state.episode == last,
          lambda: self.diagnose(before, new_state, state.batch_stats, episode),
          lambda: no_diagnostics,
      )
      return new_state, (metrics, diagnosed)

    state, (metrics, diagnosed) = jax.lax.scan(body, state, drawn, length=length)
    return state, metrics, jax.tree.map(lambda d: d[-1], diagnosed)

  def _train_chunk(self, state: TrainState, source: EpisodeSource, train_key: jax.Array, num_episodes: int):
    last = state.episode + num_episodes - 1
    return self._scan_training(state, train_key, last, lambda key, _: sample_episode(key, source, self.shape),
                               None, num_episodes)

  def _train_block(self, state: TrainState, drawn: Drawn, train_key: jax.Array, last: jax.Array):
    draw = lambda key, x: episode_from_images(x.images, x.classes, self.shape)
    return self._scan_training(state, train_key, last, draw, drawn, None)

  def _episode_accuracy(self, variables, episode: Episode) -> jax.Array:
    """Query accuracy of a drawn episode, through the evaluation transform."""
    episode = self._transform(episode, self.augmentation.eval)
    support, query, _ = self.episode_embeddings(variables["params"], variables["batch_stats"], episode, train=False)
    return heads.loss_and_accuracy(self.logits(variables["params"], support, query, episode), episode.query_labels)[1]

  def _evaluate(self, variables, source: EpisodeSource, key: jax.Array, num_episodes: int, shape: EpisodeShape):
    draw = lambda i: sample_episode(jax.random.fold_in(key, i), source, shape)
    return jax.lax.map(lambda i: self._episode_accuracy(variables, draw(i)), jnp.arange(num_episodes))

  def _evaluate_block(self, variables, drawn: Drawn, shape: EpisodeShape):
    return jax.lax.map(lambda x: self._episode_accuracy(variables, episode_from_images(x.images, x.classes, shape)),
                       drawn)
