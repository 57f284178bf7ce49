"""Baseline++ (fewshot.episodic.baseline_pp): its classifier, its test-time fine-tuning and its training labels
against independent computations (numpy; PyTorch's SGD where installed), its options by its row, and a run end to
end through the commands (slow tier).
"""

from __future__ import annotations

import json
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot.config import Config
from fewshot.episodic import baseline_pp
from fewshot.episodic.episodes import Episode, EpisodeShape
from fewshot.errors import ConfigError
from fewshot.training.train_state import adam


def _cosine_numpy(v, g, x, scale):
  x = x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-5)
  return scale * x @ (v * g / np.linalg.norm(v, axis=0))


def test_cosine_logits_are_chen_et_al_s_dist_linear():
  rng = np.random.default_rng(0)
  v, g, x = rng.normal(size=(6, 4)), rng.uniform(0.5, 2, 4), rng.normal(size=(3, 6))
  got = baseline_pp.cosine_logits({"v": jnp.asarray(v, jnp.float32), "g": jnp.asarray(g, jnp.float32)},
                                  jnp.asarray(x, jnp.float32), scale=10.0)
  np.testing.assert_allclose(got, _cosine_numpy(v, g, x, 10.0), rtol=1e-5, atol=1e-5)
  assert (baseline_pp.scale(200), baseline_pp.scale(201)) == (2.0, 10.0)
  start = baseline_pp.new_classifier(jax.random.key(0), 64, 5)  # PyTorch nn.Linear's bound 1/sqrt(64)
  assert float(jnp.abs(start["v"]).max()) <= 1 / 8 and np.allclose(start["g"], np.linalg.norm(start["v"], axis=0))


def test_fine_tuning_is_pytorchs_sgd_with_dampening():
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(1)
  support, labels = rng.normal(size=(10, 8)).astype(np.float32), np.repeat(np.arange(5), 2)
  key, steps = jax.random.key(3), 7
  start = baseline_pp.new_classifier(key, 8, 5)
  got = baseline_pp.finetuned(key, jnp.asarray(support), jnp.asarray(labels), 5, steps)
  v = torch.tensor(np.asarray(start["v"]), requires_grad=True)
  g = torch.tensor(np.asarray(start["g"]), requires_grad=True)
  sgd = torch.optim.SGD([v, g], lr=0.01, momentum=0.9, dampening=0.9, weight_decay=1e-3)
  x = torch.tensor(support)
  for _ in range(steps):
    sgd.zero_grad()
    logits = 2.0 * (x / (x.norm(dim=1, keepdim=True) + 1e-5)) @ (v * g / v.norm(dim=0))
    torch.nn.functional.cross_entropy(logits, torch.tensor(labels)).backward()
    sgd.step()
  np.testing.assert_allclose(got["v"], v.detach().numpy(), rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(got["g"], g.detach().numpy(), rtol=1e-4, atol=1e-6)
  assert not np.allclose(got["v"], start["v"])  # it moved


class _Flat(nn.Module):
  @nn.compact
  def __call__(self, x, train=False):
    return nn.Dense(6)(x.reshape(x.shape[0], -1))


def test_a_training_step_labels_each_image_by_its_split_class():
  """The loss is the cross-entropy over the split's classes (``classes[label]``), not over the episode's 0..way-1."""
  learner = baseline_pp.BaselineLearner(_Flat(), EpisodeShape(3, 1, 1), base_classes=9, optimizer=adam(1e-3))
  state = baseline_pp.init_state(learner, jax.random.key(0), (4, 4, 1))
  rng = np.random.default_rng(2)
  images = rng.integers(0, 256, (6, 4, 4, 1), np.uint8)
  classes = np.array([7, 2, 5], np.int32)  # not 0..2 and not sorted: an episode's labels would differ
  episode = Episode(support_images=jnp.asarray(images[:3]), support_labels=jnp.arange(3, dtype=jnp.int32),
                    query_images=jnp.asarray(images[3:]), query_labels=jnp.asarray([2, 0, 1], jnp.int32),
                    classes=jnp.asarray(classes))
  _, metrics = baseline_pp.train_step(learner, state, episode)
  p = jax.tree.map(np.asarray, state.params)
  z = (images.reshape(6, -1) / 255.0) @ p["backbone"]["Dense_0"]["kernel"] + p["backbone"]["Dense_0"]["bias"]
  logits = _cosine_numpy(p["classifier"]["v"], p["classifier"]["g"], z, baseline_pp.scale(9))
  labels = classes[[0, 1, 2, 2, 0, 1]]
  log_p = logits - logits.max(1, keepdims=True) - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1,
                                                                                                        keepdims=True))
  np.testing.assert_allclose(float(metrics["loss"]), -log_p[np.arange(6), labels].mean(), rtol=1e-5)


def test_its_options_are_its_own():
  assert Config(method="baseline_pp", base_classes=800).finetune_steps == 100
  assert Config(method="baseline_pp", base_classes=800).run_name == "strokes_conv4_Baseline++_5w1s_seed0"
  for options, words in [(dict(base_classes=64), "--base_classes 64 is an option of --method baseline_pp"),
                         (dict(method="baseline_pp"), "pass --base_classes N"),
                         (dict(method="baseline_pp", base_classes=9, head="dr"), "--head dr is an option of --method "
                          "protonet; --method baseline_pp does not use it"),
                         (dict(method="baseline_pp", base_classes=9, inner_steps=2), "--inner_steps 2 is an option")]:
    with pytest.raises(ConfigError, match=words):
      Config(**options)


def test_its_model_embeds_as_its_backbone_and_refuses_what_needs_a_distance_head():
  """Baseline++ tests on one embedding per image from its frozen backbone, so ``embed`` gives it (computed here by
  the backbone itself); ``logits``, Lake's runs and the cached test need a distance head, and MAML embeds nothing
  once.
  """
  import fewshot  # noqa: PLC0415
  from fewshot import backbones  # noqa: PLC0415
  from fewshot.episodic import lake  # noqa: PLC0415

  config = Config(method="baseline_pp", base_classes=9, way=3)
  model = fewshot.build(config)
  images = np.random.default_rng(0).integers(0, 256, (5, 28, 28, 1), np.uint8)
  variables = {"params": model.variables["params"]["backbone"], "batch_stats": model.variables["batch_stats"]}
  by_hand = model.learner.backbone.apply(variables, jnp.asarray(images, jnp.float32) / 255.0,
                                         **backbones.call_options(model.learner.backbone, False))
  np.testing.assert_allclose(np.asarray(model.embed(images)), np.asarray(by_hand), rtol=1e-5, atol=1e-6)
  with pytest.raises(ConfigError, match=r"^logits needs a distance head on one embedding per image; a --method "
                     r"baseline_pp run tests otherwise \(Chen et al\. 2019: .*\): test it with python -m "
                     r"fewshot\.evaluate, embed its images with \.embed, or read its variables\.$"):
    model.logits(images[:3], np.arange(3), images[3:])
  with pytest.raises(ConfigError, match=r"^Lake's runs are scored by a run's distance head .* a --method baseline_pp "
                     r"run tests otherwise \(Chen et al\. 2019: .*\): pass a --method protonet run\.$"):
    lake.check_model(config)
  maml = fewshot.build(Config(method="maml", way=3))
  with pytest.raises(ConfigError, match=r"^embed needs one embedding per image from the trained backbone; a --method "
                     r"maml run tests otherwise \(Finn et al\. 2017: .*\): test it with python -m fewshot\.evaluate, "
                     r"or read its variables\.$"):
    maml.embed(images)


@pytest.mark.slow  # a short strokes run, resumed, grouped, re-tested by the command, and its refusals
def test_baseline_pp_trains_validates_tests_resumes_and_groups_from_the_commands(tmp_path, assert_one_line_error):
  from fewshot.records.rundir import RunDir  # noqa: PLC0415
  from fewshot.train import train, train_group  # noqa: PLC0415

  tiny = dict(method="baseline_pp", base_classes=800, way=3, shot=1, query=2, test_query=2, eval_every=2,
              val_episodes=2, test_episodes=3, finetune_steps=5)
  straight = train(Config(**tiny, episodes=4), tmp_path / "straight", progress=False)
  assert straight["model"] == "Baseline++" and 0 <= straight["test_accuracy"] <= 100
  rows = RunDir(tmp_path / "straight").read_metrics()
  assert [r["episode"] for r in rows] == [2, 4] and all(r["val_accuracy"] is not None for r in rows)
  assert straight["diagnostics"].startswith("not recorded") and not {"alpha", "norm_ratio"} & set(rows[0])
  train(Config(**tiny, episodes=2), tmp_path / "resumed", progress=False)
  resumed = train(Config(**tiny, episodes=4), tmp_path / "resumed", resume=True, progress=False)
  assert {**resumed, "workdir": None} == {**straight, "workdir": None}
  grouped = train_group(Config(**tiny, episodes=4), (0, 1), [tmp_path / "g0", tmp_path / "g1"], progress=False)
  np.testing.assert_allclose([r["train_loss"] for r in RunDir(tmp_path / "g0").read_metrics()],
                             [r["train_loss"] for r in rows], rtol=1e-3)
  assert grouped[0]["test_episodes"] == 3
  run = tmp_path / "straight"
  done = subprocess.run([sys.executable, "-m", "fewshot.evaluate", f"--workdir={run}"], capture_output=True, text=True)
  assert done.returncode == 0, done.stderr
  measured = json.loads(next(run.glob("test_best@*.json")).read_text())
  assert abs(measured["test_accuracy"] - straight["test_accuracy"]) < 1e-4  # the same episodes under the same keys
  assert_one_line_error(subprocess.run([sys.executable, "-m", "fewshot.evaluate", f"--workdir={run}",
                                        "--test_by=cached"], capture_output=True, text=True),
                        "--test_by cached embeds the test split once")
