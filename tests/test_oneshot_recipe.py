"""The Omniglot one-shot recipe's options (issue 13): --class_splits all_characters, --test_way, --distort, and
--image_size above 28 with Lake's runs read at the same size.
"""

import dataclasses
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fewshot
from fewshot import data
from fewshot.augment import Augmentation, to_float
from fewshot.augment.affine import Distortion, distort
from fewshot.config import Config
from fewshot.data import omniglot
from fewshot.episodic import experiment, lake, learners, learning
from fewshot.episodic.episodes import Episode, EpisodeShape
from fewshot.errors import ConfigError, DataError
from fewshot.train import train

import omniglot_fixtures
from experiments import omniglot_oneshot
from tiny_run import TINY


@pytest.fixture(scope="module")
def omniglot_folder(tmp_path_factory):
  """Two training alphabets (9 + 7 characters) as an extracted folder, and 20-way runs of a held-out one."""
  root = tmp_path_factory.mktemp("oneshot")
  chars = omniglot_fixtures.characters({"Alpha": 9, "Beta": 7, "Held": 20})
  omniglot_oneshot.write_training_folder(chars, ("Held",), root / "train")
  omniglot_oneshot.write_runs(chars, ("Held",), root / "runs", runs_per_alphabet=2)
  return root / "train", root / "runs", chars


def test_all_characters_holds_every_background_character_once_a_quarter_in_val():
  background = [f"{a}/character{c:02d}" for a, n in (("Latin", 26), ("Korean", 40), ("Tagalog", 17)) for c in range(n)]
  evaluation = [f"Tengwar/character{c:02d}" for c in range(5)]
  for names, test in ((background, None), (background + evaluation, evaluation)):
    splits = omniglot.character_splits(names[::-1], "all_characters")
    assert sorted(splits["train"] + splits["val"]) == sorted(background)  # each exactly once, none evaluated
    assert not set(splits["train"]) & set(splits["val"])
    assert len(splits["val"]) == len(background) // 4
    # Every alphabet is in both: the held-out quarter is every fourth character, not whole alphabets.
    assert {n.split("/")[0] for n in splits["val"]} == {n.split("/")[0] for n in splits["train"]}
    assert splits["test"] == (splits["val"] if test is None else sorted(test))
  with pytest.raises(DataError, match="leaves split 'val' without characters"):
    omniglot.character_splits(["Latin/a", "Latin/b", "Latin/c"], "all_characters")


def test_all_characters_loads_with_rotations(omniglot_folder, tmp_path):
  train_dir, _, chars = omniglot_folder
  splits = data.load_splits("omniglot", str(train_dir), str(tmp_path), class_splits="all_characters", rotations=True)
  names = {split: sorted({n.rsplit("/", 1)[0] for n in s.class_names}) for split, s in splits.items()}
  assert len(names["train"]) == 12 and len(names["val"]) == 4 and names["test"] == names["val"]
  assert sorted(names["train"] + names["val"]) == sorted(f"{a}/{c}" for a in ("Alpha", "Beta") for c in chars[a])
  assert splits["train"].num_classes == 4 * 12 and splits["train"].images.shape == (4 * 12 * 3, 28, 28, 1)


def test_test_way_sets_validation_and_test_episodes_and_defaults_to_way(monkeypatch):
  config = Config(way=10, test_way=3, query=4, test_query=2)
  assert learners.train_shape(config) == EpisodeShape(10, 1, 4)
  assert learners.val_shape(config) == EpisodeShape(3, 1, 4) and learners.test_shape(config) == EpisodeShape(3, 1, 2)
  old = {k: v for k, v in dataclasses.asdict(Config(way=7)).items() if k != "test_way"}  # a config.json before it
  assert Config.from_dict(old).test_way == 7 == learners.test_shape(Config.from_dict(old)).way
  with pytest.raises(ConfigError, match="--test_way must be a positive integer"):
    Config(test_way=0)
  built = experiment.Experiment.build(config, splits=("val", "test"))
  shapes = {}
  monkeypatch.setattr(learning, "model_variables", lambda state: state)
  monkeypatch.setattr(learning, "episode_accuracies", lambda learner, v, source, key, n, shape, shifts, progress=None: shapes.setdefault(n, shape))
  built.accuracies({}, "val", 11), built.accuracies({}, "test", 12)
  assert shapes == {11: EpisodeShape(3, 1, 4), 12: EpisodeShape(3, 1, 2)} and built.learner.shape.way == 10
  with pytest.raises(DataError, match="--test_way 1000 is larger than"):
    experiment.Experiment.build(dataclasses.replace(config, test_way=1000), splits=("test",))


def _episode(seed: int = 0) -> Episode:
  images = jax.random.randint(jax.random.key(seed), (10, 28, 28, 1), 0, 256).astype(jnp.uint8)
  images = images * (jnp.arange(28)[None, :, None, None] % 7 < 3)  # ink in bands on a 0 background
  labels = jnp.repeat(jnp.arange(5, dtype=jnp.int32), 1)
  return Episode(support_images=images[:5], support_labels=labels, query_images=images[5:], query_labels=labels,
                 classes=jnp.arange(5, dtype=jnp.int32))


def test_distort_changes_training_images_deterministically_and_leaves_evaluation(tmp_path):
  plain, distorted = (learners.build_learner(Config(distort=d)) for d in (False, True))
  episode, key = _episode(), jax.random.key(3)
  augment_training = jax.jit(learning.augment_training, static_argnums=0)  # eagerly, the warp is op by op: slow
  trained = augment_training(distorted, key, episode)
  stored = to_float(episode.support_images)
  assert not np.allclose(trained.support_images, stored) and trained.support_images.dtype == jnp.float32
  np.testing.assert_array_equal(trained.query_images, augment_training(distorted, key, episode).query_images)
  other = augment_training(distorted, jax.random.key(4), episode)
  assert not np.allclose(other.support_images, trained.support_images)
  assert learning.augment_training(plain, key, episode) is episode  # no distortion: as stored
  # Evaluation is untouched: the same accuracy bits from the same variables with or without --distort.
  variables = learning.model_variables(learning.init_state(plain, jax.random.key(0), (28, 28, 1)))
  accuracy = jax.jit(learning.episode_accuracy, static_argnums=0)
  assert accuracy(distorted, variables, episode) == accuracy(plain, variables, episode)
  # With the 28x28 augmentation too, its draws are those of a run without --distort, distorted after.
  augmented = Augmentation.for_dataset(28, 1, False, True, Distortion())
  without = Augmentation.for_dataset(28, 1, False, True)
  images = jnp.concatenate([episode.support_images, episode.query_images])
  np.testing.assert_array_equal(jax.jit(augmented.train)(key, images), jax.jit(
      lambda k, x: distort(jax.random.fold_in(k, 1), without.train(k, x), Distortion()))(key, images))
  with pytest.raises(ConfigError, match="--distort .* not cub"):
    Config(dataset="cub", distort=True)


@pytest.mark.slow  # 5 s: a second stored size prepared
def test_image_size_56_is_read_alike_for_training_and_lake_runs(omniglot_folder):
  train_dir, runs_dir, chars = omniglot_folder
  with pytest.raises(ConfigError, match="at least 28"):
    Config(dataset="omniglot", image_size=20)
  with pytest.raises(ConfigError, match="strokes images are 28x28"):
    Config(dataset="strokes", image_size=56)
  # The same box filter from the 105 px originals for the training data and for Lake's runs.
  stored = data.load_split("omniglot", "train", str(train_dir), image_size=56, class_splits="all_characters")
  assert stored.images.shape[1:] == (56, 56, 1) and stored.class_names[0] == "Alpha/character01"
  decoded = [omniglot.decode(png, "x", 56).tobytes() for png in chars["Alpha"]["character01"]]
  assert sorted(image.tobytes() for image in stored.images[stored.labels == 0]) == sorted(decoded)
  runs = lake.read_runs(runs_dir, 56)
  class01 = (runs_dir / "run01" / "training" / "class01.png").read_bytes()
  np.testing.assert_array_equal(runs[0].support[0], omniglot.decode(class01, "x", 56))
  model = fewshot.build(Config(dataset="omniglot", image_size=56))
  assert model.embed(runs[0].support).shape == (20, 3 * 3 * 64)  # Conv4: 56 -> 28 -> 14 -> 7 -> 3
  scored = lake.score_runs(model, runs_dir)
  assert scored["runs"] == 2 and scored["items"] == 40
  assert scored == {**lake.score_runs(model, runs), "lake_runs": scored["lake_runs"]}
  with pytest.raises(ConfigError, match="read at 28 px but the model reads 56 px"):
    lake.score_runs(model, lake.read_runs(runs_dir))


@pytest.mark.slow  # a run at 56 px, then scored
def test_image_size_56_trains_and_its_run_is_scored_on_lake_runs(omniglot_folder, tmp_path):
  train_dir, runs_dir, _ = omniglot_folder
  config = Config(dataset="omniglot", data_dir=str(train_dir), class_splits="all_characters", image_size=56, **TINY)
  assert train(config, tmp_path / "run", progress=False)["test_episodes"] == 1
  assert json.loads((tmp_path / "run" / "config.json").read_text())["input_shape"] == [56, 56, 1]
  assert lake.score_runs(fewshot.load(str(tmp_path / "run")), runs_dir)["items"] == 40


def test_within_alphabet_draws_each_training_episode_from_one_alphabet_and_leaves_evaluation(omniglot_folder, tmp_path):
  from fewshot.episodic import episodes  # noqa: PLC0415

  train_dir, _, _ = omniglot_folder
  config = Config(dataset="omniglot", data_dir=str(train_dir), tfds_dir=str(tmp_path), class_splits="all_characters",
                  rotations=True, within_alphabet=True, **{**TINY, "way": 5})
  built = experiment.Experiment.build(config)
  train_split = experiment.load_data(config, ("train",))["train"]
  alphabet = np.array([name.split("/")[0] for name in train_split.class_names])
  assert sorted(set(alphabet)) == ["Alpha", "Beta"] and train_split.class_names[0].endswith("/rot000")
  keys = jax.random.split(jax.random.key(0), 64)
  classes = np.stack([np.asarray(episodes.sample_episode(k, built.sources["train"], EpisodeShape(5, 1, 1)).classes)
                      for k in keys])
  assert all(len(set(alphabet[c])) == 1 for c in classes) and len(set(alphabet[classes[:, 0]])) == 2
  assert built.sources["val"].layout.superclasses is None and built.sources["test"].layout.superclasses is None
  with pytest.raises(ConfigError, match="one Omniglot alphabet; strokes has none"):
    Config(dataset="strokes", within_alphabet=True)
  with pytest.raises(DataError, match="--way 28 or less"):  # the larger alphabet trains 7 characters x 4 rotations
    experiment.Experiment.build(dataclasses.replace(config, way=29, test_way=2))


def test_the_readme_recipe_is_the_measured_option_at_the_held_out_runs_shape():
  """The guide's one command (docs/training.md) trains what experiments/omniglot_oneshot.py measured, so the number it
  quotes holds.
  """
  from absl import flags

  from fewshot import options

  guide = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "training.md").read_text()
  commands = [line.split() for line in guide.splitlines()
              if line.startswith("python -m fewshot.train --dataset omniglot") and "--class_splits all_characters" in line]
  assert len(commands) == 1
  values = flags.FlagValues()
  options.define_flags(Config, values)
  values(["prog", *commands[0][3:]])  # the command's own flags, parsed as fewshot.train parses them
  shape = {k: omniglot_oneshot.BASE[k] for k in ("class_splits", "test_way", "test_query")}
  assert options.from_flags(Config, values) == Config(dataset="omniglot", data_dir="DIR", **shape,
                                                      **omniglot_oneshot.RECIPE)


def test_the_data_record_says_where_the_test_split_is_the_validation_split():
  from fewshot.data.split import Split  # noqa: PLC0415
  from fewshot.training import provenance  # noqa: PLC0415

  split = lambda names: Split(np.zeros((len(names), 2, 2, 1), np.uint8), np.arange(len(names)), tuple(names))  # noqa: E731
  same = provenance.data_record({"train": split("ab"), "val": split("cd"), "test": split("cd")})
  held = provenance.data_record({"train": split("ab"), "val": split("cd"), "test": split("ef")})
  assert same["test_is_val"] is True and "test_is_val" not in held
  assert "the test split is the validation split" in provenance.describe_data("omniglot", same)
  assert "validation split" not in provenance.describe_data("omniglot", held)


@pytest.mark.slow  # two runs
def test_on_background_only_data_the_test_of_the_validation_classes_is_said_on_every_line_and_record(
    omniglot_folder, tmp_path, capsys):
  """Issue 56 item 4: the recipe on the background-small zips tested on its 60 validation characters and printed
  "test accuracy 89.51%" with nothing on the line or in the record saying so.
  """
  from fewshot.config import Config  # noqa: PLC0415
  from fewshot.train import format_results, train  # noqa: PLC0415

  train_dir, _, _ = omniglot_folder
  config = Config(dataset="omniglot", data_dir=str(train_dir), tfds_dir=str(tmp_path / "tfds"),
                  class_splits="all_characters", way=2, shot=1, query=2, test_query=2, episodes=2, eval_every=2,
                  val_episodes=1, test_episodes=2)
  results = train(config, tmp_path / "run", progress=True)
  said = capsys.readouterr().err
  assert "(the test split is the validation split: the data hold no classes beyond it)" in said
  assert "on 2 test episodes of the validation classes (the data hold no others)" in said
  assert results["tested_on"] == "val" and "tested on the validation classes" in format_results(config, results)
  record = json.loads((tmp_path / "run" / "config.json").read_text())["data"]
  assert record["test_is_val"] is True
  held = train(dataclasses.replace(config, class_splits="default"), tmp_path / "held", progress=False)
  assert "tested_on" not in held and "tested on" not in format_results(config, held)
