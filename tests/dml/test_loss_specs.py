"""A loss is one function and one row of ``fewshot.dml.loss_specs.SPECS``: a throwaway one, registered here from a
module of its own, is validated by ``DMLConfig`` and trains through the learner's loss path.
"""

from __future__ import annotations

import sys
import textwrap

import flax.linen as nn
import jax
import numpy as np
import pytest

from fewshot.data.split import Split
from fewshot.dml import embedding, loss_specs, losses
from fewshot.dml.config import DMLConfig
from fewshot.dml.embedding import Embedder, MetricLearner
from fewshot.dml.samplers import BatchShape
from fewshot.training.sources import DeviceSource

from dataset_fixtures import one_line_error

# The throwaway loss's module: a function and the initialiser of its one learnable parameter (no classes in it).
MODULE = textwrap.dedent('''
    import jax.numpy as jnp


    def pull_push_loss(embeddings, labels, *, scale):
      """Mean squared distance of same-class pairs minus that of other-class pairs, times a learnt scale."""
      d = jnp.sum((embeddings[:, None] - embeddings[None]) ** 2, -1)
      same = (labels[:, None] == labels[None]) & ~jnp.eye(len(labels), dtype=bool)
      other = labels[:, None] != labels[None]
      mean = lambda mask: jnp.sum(jnp.where(mask, d, 0.0)) / jnp.maximum(jnp.sum(mask), 1)
      return scale * (mean(same) - mean(other))


    def init_pull_push_params():
      return {"scale": jnp.ones(())}
''')


@pytest.fixture
def pull_push(tmp_path, monkeypatch):
  """The throwaway loss's row in the table, its module importable (both gone afterwards)."""
  (tmp_path / "pull_push_module.py").write_text(MODULE)
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.setitem(loss_specs.SPECS, "pull_push", loss_specs.LossSpec(
      "pull_push", "pull_push_module:pull_push_loss", "pull_push_module:init_pull_push_params"))
  yield
  sys.modules.pop("pull_push_module", None)


class _Flat(nn.Module):
  """A backbone that compiles in a blink: the loss path, not the features, is under test here."""

  @nn.compact
  def __call__(self, x, train=True):
    return nn.relu(nn.Dense(16)(x.reshape(x.shape[0], -1)))


def test_a_registered_loss_is_validated_by_the_configuration(pull_push):
  config = DMLConfig(loss="pull_push")
  assert (config.loss, config.classes, config.per_class, config.custom_loss) == ("pull_push", 8, 4, False)
  one_line_error(lambda: DMLConfig(loss="pull_push", miner="semi_hard"), "the pull_push loss does not take mined "
                 "triplets", "--loss triplet")
  one_line_error(lambda: DMLConfig(loss="pull_push", per_class=1), "--per_class 1 gives no positive pair")


def test_a_registered_loss_trains_through_the_learners_loss_path(pull_push):
  loss = losses.get_loss("pull_push")
  assert (loss.name, loss.label, loss.needs, loss.per_class) == ("pull_push", "pull_push", ("positives", "negatives"),
                                                                 False)
  assert losses.LOSSES["pull_push"] is loss
  rng = np.random.default_rng(0)
  labels = np.repeat(np.arange(4), 3).astype(np.int32)
  split = Split(images=rng.integers(0, 256, (12, 8, 8, 1), dtype=np.uint8), labels=labels,
                class_names=tuple("abcd"))
  learner = MetricLearner(Embedder(_Flat(), embedding_dim=8), BatchShape(3, 2), loss="pull_push")
  state = embedding.init_state(learner, jax.random.key(0), split.image_shape)
  assert float(state.params["loss"]["scale"]) == 1.0  # its initialiser, called with no classes
  state, step_losses = embedding.train_chunk(learner, state, DeviceSource.from_split(split), jax.random.key(1), 2)
  assert int(state.step) == 2 and np.isfinite(np.asarray(step_losses)).all()
  assert float(state.params["loss"]["scale"]) != 1.0  # the loss's own parameter learns too


def test_an_unregistered_loss_is_refused_naming_the_rows():
  one_line_error(lambda: DMLConfig(loss="pull_push"), "unknown --loss 'pull_push'", "contrastive", "dr_proxy")
  with pytest.raises(ValueError, match="Unknown loss 'pull_push'"):
    losses.get_loss("pull_push")
