"""Slow tests (``python -m pytest -m slow``): the paper's image sizes, on CPU."""

import jax
import numpy as np
import pytest

from fewshot.backbones import get_backbone
from fewshot.data.split import Split
from fewshot.episodic import learning
from fewshot.episodic.episodes import EpisodeShape, sample_episode
from fewshot.episodic.learning import EpisodicLearner
from fewshot.training.sources import DeviceSource

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backbone, size, dim", [("conv4", 84, 1600), ("resnet18", 224, 512)])
def test_paper_sized_episodes_train(backbone, size, dim):
  """A 5-way 1-shot episode at the paper's sizes trains in the scan: the loss on a fixed episode falls."""
  rng = np.random.default_rng(0)
  labels = np.repeat(np.arange(5), 3).astype(np.int32)
  # Classes that differ in mean brightness, so one episode is learnable in a few steps.
  images = np.clip(rng.normal(40 + 40 * labels[:, None, None, None], 20, (len(labels), size, size, 3)), 0, 255)
  source = DeviceSource.from_split(Split(images.astype(np.uint8), labels, tuple("abcde")))
  learner = EpisodicLearner(get_backbone(backbone), EpisodeShape(5, 1, 2), head="dr")
  state = learning.init_state(learner, jax.random.key(0), (size, size, 3))
  support, _, _ = learning.episode_embeddings(
      learner, state.params, state.batch_stats,
      sample_episode(jax.random.key(1), source, learner.shape),
      train=False)
  assert support.shape == (5, dim)
  state, metrics, diagnosed = learning.train_chunk(learner, state, source, jax.random.key(2), 4)
  losses = np.asarray(metrics["loss"])
  assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
  assert all(np.isfinite(v) for v in diagnosed.values())
