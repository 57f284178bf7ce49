"""Metric-learning training: a real Conv4 run on Omniglot, and the learner's contracts."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot import data
from fewshot.backbones import Conv4
from fewshot.data.split import Split
from fewshot.dml import embedding, losses, miners
from fewshot.dml.embedding import Embedder, MetricLearner
from fewshot.dml.metrics import retrieval_metrics
from fewshot.dml.samplers import BatchShape, batch_from_images
from fewshot.training.class_draws import sample_class_images
from fewshot.training.sources import DeviceSource
from fewshot.training.train_state import adam, adam_by_part


def _map_at_r(learner, state, split):
  embeddings = embedding.embed_split(learner, embedding.model_variables(state), split.images)
  return retrieval_metrics(embeddings, split.labels, embeddings, split.labels, ref_includes_query=True).map_at_r


@pytest.mark.slow  # the same learning check runs by default through the CLI: tests/dml/test_train.py
def test_triplet_training_improves_map_at_r_on_held_out_omniglot_characters(omniglot_dir):
  splits = data.load_splits("omniglot", data_dir=str(omniglot_dir), splits=("train", "test"))
  learner = MetricLearner(Embedder(Conv4(), embedding_dim=64), BatchShape(8, 4), loss="triplet", miner="semi_hard")
  state = embedding.init_state(learner, jax.random.key(0), splits["train"].image_shape)
  before = _map_at_r(learner, state, splits["test"])
  source = DeviceSource.from_split(splits["train"])
  losses_seen = []
  for chunk in range(4):
    state, chunk_losses = embedding.train_chunk(learner, state, source, jax.random.key(1), 75)
    losses_seen.append(np.asarray(chunk_losses))
  after = _map_at_r(learner, state, splits["test"])
  assert int(state.step) == 300 and np.isfinite(np.concatenate(losses_seen)).all()
  # 49 unseen characters x 20 drawers: chance MAP@R is about 1/49; training must clearly help.
  assert after > before + 0.05, (before, after)


def _tiny_split(classes=6, per_class=5, seed=0):
  rng = np.random.default_rng(seed)
  labels = np.repeat(np.arange(classes), per_class).astype(np.int32)
  images = rng.integers(0, 256, (len(labels), 12, 12, 1), dtype=np.uint8)
  return Split(images=images, labels=labels, class_names=tuple(map(str, range(classes))))


class _Flat(nn.Module):
  """A backbone that compiles in a blink: the learner's wiring, not the features, is under test here."""

  @nn.compact
  def __call__(self, x, train=True):
    return nn.relu(nn.Dense(16)(x.reshape(x.shape[0], -1)))


def _small_learner(**kwargs):
  return MetricLearner(Embedder(_Flat(), embedding_dim=8), BatchShape(3, 2), **kwargs)


def test_chunks_replay_the_same_batches_as_one_long_chunk():
  split = _tiny_split()
  learner, source = _small_learner(loss="contrastive"), DeviceSource.from_split(split)
  one = embedding.train_chunk(learner, embedding.init_state(learner, jax.random.key(0), split.image_shape), source, jax.random.key(1), 6)[0]
  two = embedding.init_state(learner, jax.random.key(0), split.image_shape)
  for _ in range(2):
    two = embedding.train_chunk(learner, two, source, jax.random.key(1), 3)[0]
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), one.params, two.params)


def test_proxy_losses_learn_their_proxies():
  split = _tiny_split()
  learner = _small_learner(loss="nsl", num_classes=split.num_classes)
  state = embedding.init_state(learner, jax.random.key(0), split.image_shape)
  proxies = np.asarray(state.params["loss"]["proxies"])
  assert proxies.shape == (split.num_classes, 8)
  state, _ = embedding.train_chunk(learner, state, DeviceSource.from_split(split), jax.random.key(1), 3)
  assert not np.allclose(proxies, state.params["loss"]["proxies"])


def test_proxies_take_their_own_learning_rate():
  # Adam's first step moves every parameter with a non-negligible gradient by its rate: lr * g / (|g| + eps).
  split = _tiny_split()
  learner = _small_learner(loss="nsl", num_classes=split.num_classes, optimizer=adam_by_part({"model": 1e-3, "loss": 1e-1}))
  start = embedding.init_state(learner, jax.random.key(0), split.image_shape)
  initial = jax.tree.map(np.array, start.params)
  state, _ = embedding.train_chunk(learner, start, DeviceSource.from_split(split), jax.random.key(1), 1)
  proxy_step = np.abs(np.asarray(state.params["loss"]["proxies"]) - initial["loss"]["proxies"])
  model_step = np.concatenate([np.abs(np.asarray(a) - b).ravel() for a, b in zip(
      jax.tree.leaves(state.params["model"]), jax.tree.leaves(initial["model"]))])
  np.testing.assert_allclose(proxy_step.max(), 1e-1, rtol=1e-3)
  np.testing.assert_allclose(model_step.max(), 1e-3, rtol=1e-3)
  # One rate is plain Adam: the same state structure as before, so older checkpoints restore.
  assert jax.tree.structure(adam_by_part({"model": 1e-3, "loss": 1e-3}).init(initial)) == jax.tree.structure(adam(1e-3).init(initial))


def test_embeddings_are_unit_vectors_and_independent_of_the_chunking():
  split = _tiny_split(classes=7)
  learner = _small_learner(loss="contrastive")
  state = embedding.init_state(learner, jax.random.key(0), split.image_shape)
  variables = embedding.model_variables(state)
  a = embedding.embed_split(learner, variables, split.images, batch=4)
  b = embedding.embed_split(learner, variables, split.images, batch=64)
  np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, rtol=1e-5)
  np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_class_pool_trains_each_step_on_the_classes_the_miner_picks_from_it():
  # Replayed by hand: step i draws a pool of 5 classes x 2 with fold_in(train_key, i), embeds it under the current
  # model, mines 3 classes with fold_in(step_key, 2) and takes one update on them; the chunk must do the same.
  split = _tiny_split(classes=8, per_class=3)
  learner = _small_learner(loss="npair", class_pool=5)
  init = lambda: embedding.init_state(learner, jax.random.key(0), split.image_shape)  # noqa: E731
  source, train_key = DeviceSource.from_split(split), jax.random.key(1)

  @jax.jit  # compiled, as the chunk is: the backward pass op by op would cost more than the check
  def by_hand(state, step):
    step_key = jax.random.fold_in(train_key, step)
    classes, indices = sample_class_images(step_key, source.layout, 5, 2)
    pool = embedding.embed(learner, embedding.model_variables(state), source.images[indices.reshape(-1)])
    order = miners.hard_negative_classes(jax.random.fold_in(step_key, 2), pool.reshape(5, 2, -1), 3)
    state, _ = embedding.train_step(learner, state, batch_from_images(source.images[indices][order], classes[order]))
    return state, order

  state, picked = init(), []
  for step in range(3):
    state, order = by_hand(state, step)
    picked.append(sorted(np.asarray(order).tolist()))
  chunk, _ = embedding.train_chunk(learner, init(), source, train_key, 3)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), chunk.params, state.params)
  assert any(p != [0, 1, 2] for p in picked)  # not merely the pool's first classes
  # The memory check lowers the same step: a pool's images, not a batch's.
  assert "5x2x12x12x1xui8" in embedding.lowered_step(learner, split.image_shape).as_text().replace(",", "x")


@pytest.mark.parametrize("kwargs,message", [
    (dict(loss="nope"), "Unknown loss 'nope'"),
    (dict(loss="triplet", miner="hardest"), "Unknown miner 'hardest'"),
    (dict(loss="contrastive", miner="semi_hard"), "does not take mined triplets"),
    (dict(loss="nsl"), "pass num_classes"),
    (dict(loss="npair", class_pool=3), "must hold more than the batch's 3 classes"),
])
def test_bad_configurations_are_one_line_errors(kwargs, message):
  with pytest.raises(ValueError, match=message) as info:
    _small_learner(**kwargs)
  assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", sorted(losses.LOSSES))
def test_every_registered_loss_trains_a_step_with_finite_values(name):
  split = _tiny_split()
  spec = losses.LOSSES[name]
  learner = _small_learner(loss=name, num_classes=split.num_classes if spec.per_class else None)
  state = embedding.init_state(learner, jax.random.key(0), split.image_shape)
  initial = jax.tree.map(np.asarray, state.params["model"])
  state, step_losses = embedding.train_chunk(learner, state, DeviceSource.from_split(split), jax.random.key(1), 2)
  assert np.isfinite(np.asarray(step_losses)).all()
  assert all(bool(jnp.isfinite(leaf).all()) for leaf in jax.tree.leaves(state.params))
  changed = jax.tree.map(lambda a, b: not np.allclose(a, b), initial, jax.tree.map(np.asarray, state.params["model"]))
  assert any(jax.tree.leaves(changed))
