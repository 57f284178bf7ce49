"""experiments.torch_parity: fewshot's weights in the eager PyTorch twin embed as fewshot does (skipped without
torch, which only the ``bench`` extra installs).
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jax  # noqa: E402

from fewshot.config import Config  # noqa: E402
from fewshot.episodic import learning  # noqa: E402
from fewshot.episodic.experiment import Experiment  # noqa: E402

from experiments import torch_parity  # noqa: E402


def test_the_twin_with_fewshot_s_weights_embeds_as_fewshot_in_evaluation_mode():
  config = Config(dataset="strokes", way=3, shot=1, query=2, test_way=3, test_query=2, episodes=2, eval_every=2,
                  val_episodes=1, test_episodes=1)
  exp = Experiment.build(config, splits=("train",))
  state = exp.initial_state()
  state, _ = exp.train_chunk(0, state, 2)  # BatchNorm's running statistics away from their start
  params, stats = jax.device_get((state.params, state.batch_stats))
  images = np.asarray(exp.sources["train"].images)[:12]
  ours = np.asarray(learning.eval_embeddings(exp.learner, learning.model_variables(state),
                                             images.astype(np.float32) / 255.0, 0))
  twin = torch_parity.torch_model(params, stats).eval()
  with torch.no_grad():
    theirs = twin.backbone(torch.from_numpy(images.transpose(0, 3, 1, 2).copy()).float() / 255.0).numpy()
  np.testing.assert_allclose(theirs, ours, rtol=1e-4, atol=1e-4)
