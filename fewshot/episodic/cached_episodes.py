"""Test episodes drawn over a split embedded once: :func:`learning.episode_accuracies`'s episodes at a fraction of the cost.

With BatchNorm in evaluation mode (running statistics) an image's embedding does not
depend on the episode it is drawn into, so embedding the split once (:func:`embed_split`)
and gathering each episode's embeddings by the indices :func:`learning.episode_accuracies` would
draw (:func:`cached_episode_accuracies`) scores the same episodes. The per-episode path embeds
``way x (shot + query)`` images per episode (48,000 for 600 five-way 1-shot episodes with
15 queries); this one embeds each test image once and then only runs the head.

The two paths differ only in the batch an image is embedded in, which moves an embedding
by float rounding (about 1e-6 relative): the head's decisions, hence the per-episode
accuracies, are the same unless two class distances tie to that precision.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from fewshot import heads
from fewshot.episodic import learning
from fewshot.episodic.episodes import EpisodeShape, episode_from_images
from fewshot.episodic.learning import EpisodicLearner
from fewshot.training import class_draws, sources, split_embedding

BLOCK_FLOATS = 1 << 25  # gathered embeddings per compiled block of episodes (128 MiB of float32)


def embed_split(learner: EpisodicLearner, variables: dict, images, batch: int = split_embedding.BATCH,
                shifts: int = 0, progress=None) -> jax.Array:
  """Embeddings ``[N, D]`` of a split's stored images (a device or host array), through the evaluation transform
  (and the mean over ``shifts`` translations where > 0), on the device: each row is the embedding
  :func:`fewshot.episodic.learning.episode_accuracies` computes for that image in any episode with the same
  ``shifts`` (:func:`fewshot.training.split_embedding.embed_split`, ``batch`` images per compiled call;
  ``progress(done, all)`` after each).
  """
  return jnp.asarray(split_embedding.embed_split(learning.view_embeddings, (learner, shifts), variables, images,
                                                 batch, progress=progress))


def episode_accuracy(learner: EpisodicLearner, variables: dict, embeddings: jax.Array, layout: class_draws.ClassLayout,
                     key: jax.Array, shape: EpisodeShape) -> jax.Array:
  """Query accuracy of the episode keyed ``key``, its embeddings gathered from ``embeddings`` (traceable).

  The draw (:func:`fewshot.training.class_draws.sample_class_images`) and the support/query split
  (:func:`fewshot.episodic.episodes.episode_from_images`, indifferent to the trailing shape) are
  those of :func:`learning.episode_accuracies`; only the images are replaced by their embeddings.
  """
  classes, indices = class_draws.sample_class_images(key, layout, shape.way, shape.per_class)
  episode = episode_from_images(embeddings[indices], classes, shape)
  episode_logits = learning.logits(learner, variables["params"], episode.support_images, episode.query_images, episode)
  return heads.loss_and_accuracy(episode_logits, episode.query_labels)[1]


@functools.partial(jax.jit, static_argnums=(0, 5))
def _block(learner: EpisodicLearner, variables: dict, embeddings: jax.Array, layout: class_draws.ClassLayout,
           key: jax.Array, shape: EpisodeShape, steps: jax.Array) -> jax.Array:
  one = lambda step: episode_accuracy(learner, variables, embeddings, layout, jax.random.fold_in(key, step), shape)
  return jax.vmap(one)(steps)


def cached_episode_accuracies(learner: EpisodicLearner, variables: dict, embeddings: jax.Array,
                              layout: class_draws.ClassLayout, key: jax.Array, num_episodes: int,
                              shape: EpisodeShape) -> jax.Array:
  """Per-episode query accuracy ``[num_episodes]`` of :func:`learning.episode_accuracies`'s episodes, over ``embeddings``.

  ``embeddings`` are :func:`embed_split` of the split whose ``layout`` draws the episodes;
  episode ``i`` is keyed ``fold_in(key, i)``, the episode ``learning.episode_accuracies`` draws with
  the same key. Episodes run vectorised in equal blocks (the last padded): one compiled
  program, and at most :data:`BLOCK_FLOATS` gathered embeddings in memory at a time.
  """
  if num_episodes <= 0:
    return jnp.zeros((0,), jnp.float32)
  block = max(1, min(num_episodes, BLOCK_FLOATS // (shape.way * shape.per_class * embeddings.shape[-1])))
  steps = jnp.arange(-(-num_episodes // block) * block, dtype=jnp.int32).reshape(-1, block)
  return jnp.concatenate([_block(learner, variables, embeddings, layout, key, shape, s) for s in steps])[:num_episodes]


def drawn_episode_accuracies(learner: EpisodicLearner, variables: dict, images, layout: class_draws.ClassLayout,
                             key: jax.Array, num_episodes: int, shape: EpisodeShape, shifts: int = 0,
                             progress=None) -> jax.Array:
  """:func:`cached_episode_accuracies` with only the images the episodes draw embedded
  (:func:`fewshot.training.sources.drawn_images`): the per-episode test's accuracies at the cost of the distinct
  images it tests, not of the split and not of every draw again (``--test_shifts`` embeds each of them
  ``(2·shifts + 1)²`` times). The rows of images no episode draws stay zero and are never gathered.
  """
  if num_episodes <= 0:
    return jnp.zeros((0,), jnp.float32)
  drawn = sources.drawn_images(layout, key, num_episodes, shape.way, shape.per_class)
  embedded = embed_split(learner, variables, images[drawn], shifts=shifts, progress=progress)
  table = jnp.zeros((images.shape[0], embedded.shape[-1]), embedded.dtype).at[drawn].set(embedded)
  return cached_episode_accuracies(learner, variables, table, layout, key, num_episodes, shape)
