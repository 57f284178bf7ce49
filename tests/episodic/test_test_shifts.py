"""--test_shifts: evaluation embeds each image as the mean over its whole-pixel translations (Omniglot's recipe)."""

import dataclasses
import json

import jax
import numpy as np
import pytest
import scipy.ndimage

import fewshot
from fewshot.augment.affine import translations
from fewshot.backbones import Conv4
from fewshot.config import Config
from fewshot.episodic import learning
from fewshot.episodic.episodes import EpisodeShape
from fewshot.episodic.learning import EpisodicLearner
from fewshot.errors import ConfigError
from fewshot.evaluate import evaluate
from fewshot.train import train
from fewshot.training import split_embedding

from model_fixtures import moved_variables, random_split


def _shifted(images: np.ndarray, dy: int, dx: int) -> np.ndarray:
  """scipy's whole-pixel shift of ``[B, H, W, C]`` images, zero outside: an independent translation."""
  return scipy.ndimage.shift(images, (0, dy, dx, 0), order=0, mode="constant", cval=0)


def test_translations_are_every_whole_pixel_shift_zero_filled():
  images = np.random.default_rng(0).integers(1, 256, (3, 9, 11, 2), dtype=np.uint8)  # no zeros: fills show
  views = np.asarray(translations(images, 2))
  offsets = [(dy, dx) for dy in range(-2, 3) for dx in range(-2, 3)]
  assert views.shape == (25, 3, 9, 11, 2) and views.dtype == np.uint8
  for view, (dy, dx) in zip(views, offsets):
    np.testing.assert_array_equal(view, _shifted(images, dy, dx))
  np.testing.assert_array_equal(views[12], images)  # the middle view is the image itself


def test_eval_embeddings_are_the_mean_of_the_shifted_images_embeddings():
  split = random_split((16, 16, 1), classes=2, per_class=3)
  plain = EpisodicLearner(Conv4(features=8), EpisodeShape(2, 1, 2))
  variables = moved_variables(plain, (16, 16, 1))
  one = lambda images: np.asarray(learning.embed(plain, variables["params"], variables["batch_stats"], images,
                                                 train=False)[0], np.float64)
  expected = np.mean([one(_shifted(split.images, dy, dx)) for dy in (-1, 0, 1) for dx in (-1, 0, 1)], axis=0)
  np.testing.assert_allclose(learning.eval_embeddings(plain, variables, split.images, 1), expected, rtol=1e-5,
                             atol=1e-6)
  assert not np.allclose(expected, one(split.images), atol=1e-3), "the check needs the shifts to matter"
  # Without shifts it is the plain evaluation-mode embedding, bit for bit (the runs before the option).
  np.testing.assert_array_equal(learning.eval_embeddings(plain, variables, split.images),
                                learning.embed(plain, variables["params"], variables["batch_stats"], split.images,
                                               train=False)[0])
  np.testing.assert_array_equal(split_embedding.embed_batch(learning.view_embeddings, (plain, 1), variables,
                                                            split.images),
                                jax.jit(learning.eval_embeddings, static_argnums=(0, 3))(plain, variables,
                                                                                         split.images, 1))


@pytest.mark.parametrize("fields, fragment", [
    (dict(test_shifts=-1), "--test_shifts must be 0 or more and below half the 28 px side, got -1"),
    (dict(test_shifts=14), "below half the 28 px side, got 14"),
    (dict(dataset="omniglot", image_size=56, test_shifts=28), "below half the 56 px side, got 28"),
    (dict(dataset="cub", test_shifts=2), "strokes and omniglot only, not cub"),
])
def test_bad_test_shifts_are_one_line(fields, fragment):
  with pytest.raises(ConfigError, match=fragment) as raised:
    Config(**fields)
  assert "\n" not in str(raised.value)


def test_a_config_from_before_the_option_evaluates_one_view():
  old = {k: v for k, v in dataclasses.asdict(Config()).items() if k != "test_shifts"}
  assert Config.from_dict(old).test_shifts == 0
  assert Config(dataset="omniglot", test_shifts=13).test_shifts == 13


@pytest.mark.slow  # two training runs, with and without the flag
def test_a_run_with_test_shifts_trains_and_validates_as_without_and_tests_the_mean_embedding(tmp_path):
  tiny = dict(dataset="strokes", way=3, shot=1, query=2, test_query=3, episodes=4, eval_every=2, val_episodes=3,
              test_episodes=4)
  plain = train(Config(**tiny), tmp_path / "plain", progress=False)
  shifted = train(Config(**tiny, test_shifts=2), tmp_path / "shifted", progress=False)
  read = lambda run, name: (tmp_path / run / name).read_text()
  rows = lambda run: [{k: v for k, v in json.loads(line).items() if k != "seconds"}
                      for line in read(run, "metrics.jsonl").splitlines()]
  assert len(rows("plain")) == 2 and rows("plain") == rows("shifted")  # same steps, same validation
  for kind in ("best", "last"):
    same = jax.tree.map(np.array_equal, fewshot.load(str(tmp_path / "plain"), kind).variables,
                        fewshot.load(str(tmp_path / "shifted"), kind).variables)
    assert all(jax.tree.leaves(same))
  assert json.loads(read("shifted", "config.json"))["test_shifts"] == 2
  # The test episodes are scored on the mean embeddings: as evaluating the plain run with the shifts.
  assert shifted["test_accuracy"] == evaluate(str(tmp_path / "plain"), test_shifts=2)["test_accuracy"]
  assert plain["test_accuracy"] == evaluate(str(tmp_path / "shifted"), test_shifts=0)["test_accuracy"]
  assert shifted["test_accuracy"] != plain["test_accuracy"], "the check needs the shifts to change a decision"
