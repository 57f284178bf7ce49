"""A split in host memory streams the same episodes and batches as a resident one, and trains the same."""

import flax.linen as nn
import jax
import numpy as np
import pytest
from flax.traverse_util import flatten_dict

from fewshot.config import Config
from fewshot.data.split import Split
from fewshot.dml import embedding
from fewshot.dml.embedding import Embedder, MetricLearner
from fewshot.dml.samplers import BatchShape
from fewshot.episodic import learning
from fewshot.episodic.episodes import EpisodeShape
from fewshot.episodic.experiment import Experiment
from fewshot.episodic.learning import EpisodicLearner
from fewshot.errors import DataError
from fewshot.training import sources
from fewshot.training.class_draws import sample_class_images
from fewshot.training.sources import DeviceSource, HostSource


def _indexed_split(counts=(5, 9, 6, 7, 8, 5, 10)):
  """Image ``i`` is filled with ``i % 256`` and its row ``0`` holds ``i // 256``, so a drawn image names its index."""
  n = sum(counts)
  images = np.zeros((n, 6, 6, 1), np.uint8)
  images[:] = (np.arange(n) % 256)[:, None, None, None]
  images[:, 0] = (np.arange(n) // 256)[:, None, None]
  labels = np.repeat(np.arange(len(counts)), counts).astype(np.int32)
  return Split(images, labels, tuple(f"c{i}" for i in range(len(counts))))


def _image_index(images):
  images = np.asarray(images)
  return images[..., 1, 0, 0].astype(np.int64) + 256 * images[..., 0, 0, 0].astype(np.int64)


@pytest.mark.parametrize("block_draws, prefetch", [(1, 0), (3, 1), (4, 2), (100, 2)])
def test_stream_yields_the_resident_draws_in_order(block_draws, prefetch):
  split = _indexed_split()
  num_classes, per_class = 3, 4
  draw_bytes = num_classes * per_class * split.images[0].nbytes
  host = HostSource(split, block_bytes=block_draws * draw_bytes, prefetch=prefetch)
  key, first, count = jax.random.key(3), 17, 11
  blocks = list(host.blocks(key, first, count, num_classes, per_class))
  assert [len(b.classes) for b in blocks] == host.block_sizes(count, num_classes * per_class)
  classes = np.concatenate([np.asarray(b.classes) for b in blocks])
  indices = np.concatenate([_image_index(b.images) for b in blocks])
  assert classes.shape == (count, num_classes) and indices.shape == (count, num_classes, per_class)
  np.testing.assert_array_equal(np.concatenate([np.asarray(b.steps) for b in blocks]), np.arange(first, first + count))
  layout = DeviceSource.from_split(split).layout
  for i in range(count):
    want_classes, want_indices = sample_class_images(jax.random.fold_in(key, first + i), layout, num_classes, per_class)
    np.testing.assert_array_equal(classes[i], want_classes)
    np.testing.assert_array_equal(indices[i], want_indices)
  # Independently of the sampler: every image belongs to its drawn class.
  np.testing.assert_array_equal(split.labels[indices], np.broadcast_to(classes[..., None], indices.shape))


@pytest.mark.parametrize("count, per_block", [(100, 15), (7, 7), (7, 100), (10, 3), (1, 1), (13, 1)])
def test_block_sizes_cover_the_draws_within_the_byte_budget(count, per_block):
  split = _indexed_split()
  host = HostSource(split, block_bytes=per_block * 2 * split.images[0].nbytes)
  sizes = host.block_sizes(count, draw_images=2)
  assert sum(sizes) == count and min(sizes) >= 1
  assert max(sizes) <= per_block and len(set(sizes)) <= 2
  assert len(sizes) == -(-count // per_block)  # as few transfers as the budget allows


def test_a_draw_larger_than_the_budget_still_streams_one_per_block():
  host = HostSource(_indexed_split(), block_bytes=1)
  assert host.block_sizes(4, draw_images=3) == [1, 1, 1, 1]


def test_place_follows_the_budget_and_rejects_unknown_placements():
  split = _indexed_split()
  assert isinstance(sources.place(split, "auto", budget_bytes=split.images.nbytes), DeviceSource)
  assert isinstance(sources.place(split, "auto", budget_bytes=split.images.nbytes - 1), HostSource)
  assert isinstance(sources.place(split, "host"), HostSource)
  assert isinstance(sources.place(split, "device", budget_bytes=0), DeviceSource)
  with pytest.raises(DataError) as error:
    sources.place(split, "gpu")
  assert "\n" not in str(error.value) and "auto, device, host" in str(error.value)


def _random_split(classes=8, per_class=6, size=16, channels=1, seed=0):
  rng = np.random.default_rng(seed)
  labels = np.repeat(np.arange(classes), per_class).astype(np.int32)
  images = rng.integers(0, 256, (len(labels), size, size, channels), dtype=np.uint8)
  return Split(images, labels, tuple(f"c{i}" for i in range(classes)))


class _Tiny(nn.Module):
  """Dense + BatchNorm: compiles in a blink; the data path, not the features, is under test."""

  @nn.compact
  def __call__(self, x, train=True):
    x = nn.Dense(16)(x.reshape(x.shape[0], -1))
    return nn.relu(nn.BatchNorm(use_running_average=not train, momentum=0.9)(x))


def _assert_trees_close(a, b):
  for (name, x), y in zip(flatten_dict(a).items(), flatten_dict(b).values()):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=1e-5, err_msg=str(name))


@pytest.mark.slow  # 13 s; the default tier keeps the host-placed test below and the DML batches from host memory
def test_episodic_training_and_evaluation_match_between_device_and_host():
  split, shape = _random_split(), EpisodeShape(3, 2, 2)
  learner = EpisodicLearner(_Tiny(), shape, head="dr")
  init = lambda: learning.init_state(learner, jax.random.key(0), split.image_shape)
  key = jax.random.key(1)
  episode_bytes = shape.way * shape.per_class * split.images[0].nbytes
  host = HostSource(split, block_bytes=3 * episode_bytes)  # 7 episodes: blocks of 3, 2, 2
  resident = DeviceSource.from_split(split)
  results = {}
  for name, source in (("device", resident), ("host", host)):
    state = init()
    state, metrics, diagnosed = learning.train_chunk(learner, state, source, key, 4)  # a chunk boundary mid-block
    state, more, last_diagnosed = learning.train_chunk(learner, state, source, key, 3)
    accuracies = learning.episode_accuracies(learner, learning.model_variables(state), source, jax.random.key(2), 5,
                                   EpisodeShape(3, 1, 3))
    results[name] = state, np.concatenate([metrics["loss"], more["loss"]]), last_diagnosed, np.asarray(accuracies)
  (dev_state, dev_loss, dev_diag, dev_acc), (host_state, host_loss, host_diag, host_acc) = results.values()
  assert int(host_state.step) == 7 and host_loss.shape == (7,)
  np.testing.assert_allclose(host_loss, dev_loss, rtol=1e-4)
  _assert_trees_close(host_state.params, dev_state.params)
  for name in dev_diag:
    assert np.isfinite(host_diag[name]), name
    np.testing.assert_allclose(host_diag[name], dev_diag[name], rtol=1e-3, err_msg=name)
  assert host_acc.shape == (5,)
  np.testing.assert_array_equal(host_acc, dev_acc)


@pytest.mark.slow  # 12 s; the episodic family's host source is the default tier's
def test_metric_learning_trains_the_same_batches_from_host_memory():
  split, batch = _random_split(), BatchShape(4, 2)
  learner = MetricLearner(Embedder(_Tiny(), embedding_dim=8), batch, loss="triplet", miner="semi_hard")
  host = HostSource(split, block_bytes=2 * batch.size * split.images[0].nbytes)
  states, losses = {}, {}
  for name, source in (("device", DeviceSource.from_split(split)), ("host", host)):
    state = embedding.init_state(learner, jax.random.key(0), split.image_shape)
    state, first = embedding.train_chunk(learner, state, source, jax.random.key(1), 3)
    states[name], second = embedding.train_chunk(learner, state, source, jax.random.key(1), 2)
    losses[name] = np.concatenate([first, second])
  assert int(states["host"].step) == 5
  np.testing.assert_allclose(losses["host"], losses["device"], rtol=1e-4, atol=1e-6)
  _assert_trees_close(states["host"].params, states["device"].params)


def test_an_experiment_placed_on_the_host_tests_like_one_on_the_device():
  config = Config(dataset="strokes", way=3, shot=1, query=2, test_query=2, test_episodes=6)
  experiments = {p: Experiment.build(config, splits=("test",), placement=p) for p in ("device", "host")}
  assert isinstance(experiments["host"].sources["test"], HostSource)
  assert isinstance(experiments["device"].sources["test"], DeviceSource)
  state = experiments["device"].initial_state()
  assert experiments["host"].test(state) == experiments["device"].test(state)
