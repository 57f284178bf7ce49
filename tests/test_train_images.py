"""Episodic training on the image datasets: end to end on a CUB fixture, augmentation in training only."""

import dataclasses
import functools
import json
import subprocess
import sys

import jax
import numpy as np
import pytest

from fewshot import api
from fewshot.augment import NO_AUGMENTATION, Augmentation
from fewshot.backbones import Conv4
from fewshot.config import Config
from fewshot.data.holdout import every_fourth_class
from fewshot.data.split import Split
from fewshot.episodic import diagnostics, learning
from fewshot.episodic.episodes import EpisodeShape, sample_episode
from fewshot.episodic.experiment import Experiment
from fewshot.episodic.learners import build_augmentation
from fewshot.episodic.learning import EpisodicLearner
from fewshot.evaluate import evaluate
from fewshot.records.rundir import RunDir
from fewshot.training.sources import DeviceSource

import dataset_fixtures as fixtures

# 8 classes: the few-shot parity split gives 4 train, 2 val, 2 test classes of 6 images.
# One head throughout, so the tests' compiled programs are shared through the compilation cache.
TINY = dict(image_size=28, way=2, shot=1, query=2, test_query=2, head="dr")


@pytest.fixture(scope="module")
def cub_dir(tmp_path_factory):
  return str(fixtures.write_cub(tmp_path_factory.mktemp("cub"), classes=8, per_class=6, size=(40, 48)).data_dir)


@pytest.mark.slow
def test_cub_trains_from_the_command_line_and_evaluate_reproduces_it(cub_dir, tmp_path):
  workdir = tmp_path / "run"
  args = dict(dataset="cub", data_dir=cub_dir, episodes=4, eval_every=2, val_episodes=2,
              test_episodes=4, **TINY)
  result = subprocess.run([sys.executable, "-m", "fewshot.train", f"--workdir={workdir}",
                           *[f"--{k}={v}" for k, v in args.items()]], capture_output=True, text=True)
  assert result.returncode == 0, result.stderr[-2000:]
  results = json.loads((workdir / "results.json").read_text())
  saved = RunDir(workdir).read_config()
  assert saved["augment"] is True and saved["class_splits"] == "fewshot" and saved["input_shape"] == [28, 28, 3]
  assert [r["episode"] for r in RunDir(workdir).read_metrics()] == [2, 4]
  assert evaluate(str(workdir))["test_accuracy"] == results["test_accuracy"]

  # The API embeds stored images through the evaluation transform (resize 32 -> crop 28, normalise).
  model = api.load(str(workdir))
  stored = np.random.default_rng(0).integers(0, 256, (3, 32, 32, 3), dtype=np.uint8)
  expected = learning.embed(model.learner, model.variables["params"], model.variables["batch_stats"],
                            Augmentation.paper(28).eval(stored), train=False)[0]
  np.testing.assert_allclose(model.embed(stored), expected, rtol=1e-5, atol=1e-6)
  assert model.probabilities(stored[:2], [0, 1], stored[2:]).shape == (1, 2)


@pytest.mark.slow  # two CUB experiments compiled, with and without augmentation
def test_augmentation_changes_training_not_evaluation(cub_dir):
  built = {augment: Experiment.build(Config(dataset="cub", data_dir=cub_dir, augment=augment, **TINY))
           for augment in (False, True)}
  losses, val = {}, {}
  for augment, experiment in built.items():
    state = experiment.initial_state()
    val[augment] = experiment.accuracies(state, "val", 2)
    _, metrics, _ = learning.train_chunk(experiment.learner, state, experiment.sources["train"],
                                         experiment.keys["train"], 1)
    losses[augment] = float(metrics["loss"][0])
  np.testing.assert_array_equal(val[False], val[True])
  assert losses[False] != losses[True]

  # Without augmentation training sees exactly what evaluation sees, at the model's input size.
  learner = built[False].learner
  key = jax.random.key(3)
  drawn = sample_episode(key, built[False].sources["train"], learner.shape)
  train_episode = learning.augment_training(learner, key, drawn)
  eval_episode = learning._transform(drawn, learner.augmentation.eval, learner.augmentation.enabled)
  assert train_episode.support_images.shape == (2, 28, 28, 3)
  np.testing.assert_array_equal(train_episode.query_images, eval_episode.query_images)
  augmented = learning.augment_training(built[True].learner, key, drawn)
  assert augmented.query_images.shape == (4, 28, 28, 3)
  assert not np.allclose(augmented.query_images, eval_episode.query_images)


@pytest.mark.slow  # 12 s of the default tier's 5 minutes
def test_diagnostics_re_embed_the_same_augmented_images():
  rng = np.random.default_rng(0)
  labels = np.repeat(np.arange(6), 5).astype(np.int32)
  images = rng.integers(0, 256, (len(labels), 18, 18, 3), dtype=np.uint8)
  source = DeviceSource.from_split(Split(images, labels, tuple(f"c{i}" for i in range(6))))
  shape = EpisodeShape(3, 1, 2)
  learner = EpisodicLearner(Conv4(features=8), shape, head="dr", augmentation=Augmentation.paper(16))
  key = jax.random.key(1)
  start = learning.init_state(learner, jax.random.key(0), (16, 16, 3))

  # Compiled once each: op-by-op dispatch of a backward pass takes minutes on a loaded CPU.
  step = jax.jit(functools.partial(learning.train_step, learner))
  embed = jax.jit(functools.partial(learning.episode_embeddings, learner), static_argnums=3)
  training_episode = jax.jit(lambda key: learning.augment_training(learner, key, sample_episode(key, source, shape)))
  episode = training_episode(jax.random.fold_in(key, 0))
  state, _, before = step(start, episode)
  # The diagnostics' X is the update's own forward pass; re-embedding the same augmented
  # images with the pre-update parameters gives it again, so X and Y share their images.
  again_s, again_q, _ = embed(start.params, start.batch_stats, episode, True)
  np.testing.assert_allclose(again_s, before[0], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(again_q, before[1], rtol=1e-5, atol=1e-5)
  after_s, after_q, _ = embed(state.params, start.batch_stats, episode, True)
  expected = diagnostics.episode_diagnostics(*before, after_s, after_q, episode.support_labels,
                                             episode.query_labels, 3, classifier="proto")

  _, _, diagnosed = learning.train_chunk(learner, jax.tree.map(lambda x: x.copy(), start), source, key, 1)
  for name in diagnostics.FIELDS:
    assert np.isfinite(diagnosed[name]), name
    np.testing.assert_allclose(diagnosed[name], expected[name], rtol=2e-3, err_msg=name)
  # An episode's augmentation is a function of its key: a resumed run replays it.
  other = training_episode(jax.random.fold_in(key, 0))
  np.testing.assert_array_equal(other.query_images, episode.query_images)


def test_defaults_keep_strokes_and_omniglot_as_they_were():
  for dataset, class_splits in (("strokes", None), ("omniglot", "default")):
    config = Config(dataset=dataset)
    assert (config.image_size, config.augment, config.class_splits, config.rotations) == (28, False, class_splits, False)
    # A run saved before omniglot had class splits (null) resumes as the same run.
    assert Config.from_dict({**config.to_dict(), "protocol": None}).differences(config) == []
    assert build_augmentation(config) is NO_AUGMENTATION
    assert config.run_name == f"{dataset}_conv4_ProtoNet_S_5w1s_seed0"
  assert Config(dataset="cub").image_size == 84 and Config(dataset="cub", backbone="resnet18").image_size == 224
  assert Config(dataset="sop").class_splits == "dml" and Config(dataset="cub").augment is True
  # 28x28 data augmented: evaluation is still the identity on the stored images.
  augmented = build_augmentation(dataclasses.replace(Config(dataset="omniglot"), augment=True))
  images = np.random.default_rng(0).integers(0, 256, (2, 28, 28, 1), dtype=np.uint8)
  np.testing.assert_array_equal(augmented.eval(images), NO_AUGMENTATION.eval(images))


def test_dml_protocol_validates_on_held_out_training_classes():
  labels = np.repeat(np.arange(8), 2).astype(np.int32)
  split = Split(np.arange(16, dtype=np.uint8).reshape(16, 1, 1, 1), labels, tuple(f"c{i}" for i in range(8)))
  train, val = every_fourth_class(split)
  assert train.class_names == ("c0", "c1", "c2", "c4", "c5", "c6") and val.class_names == ("c3", "c7")
  np.testing.assert_array_equal(val.images.ravel(), [6, 7, 14, 15])
  np.testing.assert_array_equal(val.labels, [0, 0, 1, 1])


@pytest.mark.parametrize(
    "flags, fragment",
    [
        (["--dataset=cub", "--image_size=0"], "--image_size must be at least 8"),
        (["--dataset=mini_imagenet", "--class_splits=dml"], "--class_splits dml is not defined for mini_imagenet"),
        (["--dataset=strokes", "--augment", "--image_size=32"], "strokes images are 28x28"),
        (["--dataset=omniglot", "--image_size=20"], "--image_size of omniglot must be an integer of at least 28"),
    ],
)
def test_bad_image_options_exit_2_and_write_nothing(tmp_path, flags, fragment, assert_one_line_error):
  result = subprocess.run([sys.executable, "-m", "fewshot.train", *flags, f"--workdir={tmp_path / 'run'}"],
                          capture_output=True, text=True)
  assert_one_line_error(result, fragment)
  assert not (tmp_path / "run").exists()
