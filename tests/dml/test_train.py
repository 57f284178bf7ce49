"""Metric-learning training end to end: learning on real Omniglot, the run directory, folds, resume, bad input."""

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from fewshot import convolutions, data
from fewshot.dml import embedding
from fewshot.dml.config import DMLConfig
from fewshot.dml.experiment import Experiment, retrieval
from fewshot.dml.losses import Loss
from fewshot.dml.train import train
from fewshot.errors import ConfigError, RunDirError, TrainingError
from fewshot.records.checkpoints import Checkpoints
from fewshot.records.rundir import RunDir
from fewshot.training.runs import Runs
from fewshot.training.trainer import train_runs

from dataset_fixtures import write_cars196

# 16 classes -> the dml class splits' 8 training classes -> 4 folds of 2 (each fold model trains on 6).
TINY = dict(dataset="cars196", image_size=28, embedding_dim=16, classes=2, per_class=2, steps_per_epoch=2, epochs=2)


@pytest.fixture(scope="module")
def cars_dir(tmp_path_factory):
  root = tmp_path_factory.mktemp("cars196")
  write_cars196(root, classes=16, per_class=6, size=(20, 24))
  # Prepared up front: a CLI run that prepares it prints tfds's progress bars, which the one-line checks would see.
  data.load_splits("cars196", str(root), image_size=TINY["image_size"])
  return root


@pytest.fixture(scope="module")
def four_fold_run(cars_dir, tmp_path_factory):
  config = DMLConfig(data_dir=str(cars_dir), folds=4, **TINY)
  workdir = tmp_path_factory.mktemp("four_folds") / "run"
  return config, workdir, train(config, str(workdir), progress=False)


def _untrained_map_at_r(experiment, split):
  """MAP@R of fold model 0 as the run initialises it (same keys), before any training."""
  learner = experiment.fold_learner(0)
  variables = embedding.model_variables(experiment.initial_state(0))
  return retrieval(embedding.embed_split(learner, variables, split.images), split.labels)["map_at_r"]


@pytest.mark.slow  # real Omniglot learning, as the few-shot run
def test_short_omniglot_run_improves_map_at_r(omniglot_dir, tmp_path):
  config = DMLConfig(dataset="omniglot", data_dir=str(omniglot_dir), backbone="conv4", embedding_dim=64,
                     loss="triplet", miner="semi_hard", steps_per_epoch=60, epochs=2)
  experiment = Experiment(config)  # one load of the data and one compile for before and after
  untrained_val = _untrained_map_at_r(experiment, experiment.folds[0][1])
  untrained_test = _untrained_map_at_r(experiment, experiment.test)
  (results,) = train_runs(experiment, Runs.open(config, None, [str(tmp_path / "run")], resume=False), progress=False)
  rows = RunDir(tmp_path / "run").read_metrics()
  assert [(r["epoch"], r["step"]) for r in rows] == [(1, 60), (2, 120)]
  best = max(rows, key=lambda r: r["val_map_at_r"])
  (fold,) = results["separated"]
  assert fold["best_epoch"] == best["epoch"] and fold["best_val_map_at_r"] == best["val_map_at_r"]
  assert fold["dim"] == 64 and "concatenated" not in results
  # omniglot has its own 'val' characters; held-out test characters: chance MAP@R is about 1/300.
  assert best["val_map_at_r"] > untrained_val + 0.03, (untrained_val, rows)
  assert fold["test"]["map_at_r"] > untrained_test + 0.03, (untrained_test, fold)


def _cli(workdir, *extra, data_dir=None):
  flags = [f"--{k}={v}" for k, v in TINY.items()]
  data = [f"--data_dir={data_dir}"] if data_dir else []
  return [sys.executable, "-m", "fewshot.dml.train", f"--workdir={workdir}", *flags, *data, *extra]


@pytest.mark.slow  # a whole command run, 16 s; the four-fold run below covers the same path further
def test_cli_run_writes_the_run_directory(cars_dir, tmp_path):
  workdir = tmp_path / "run"
  done = subprocess.run(_cli(workdir, "--loss=triplet", "--miner=semi_hard", data_dir=cars_dir),
                        capture_output=True, text=True)
  assert done.returncode == 0, done.stderr[-2000:]
  assert "map_at_r" in done.stdout and str(workdir) in done.stdout
  config = json.loads((workdir / "config.json").read_text())
  assert config["miner"] == "semi_hard" and config["folds"] == 1 and config["input_shape"] == [28, 28, 3]  # the backbone's input (stored at int(1.15 * 28) = 32)
  rows = RunDir(workdir).read_metrics()
  assert [r["step"] for r in rows] == [2, 4]
  for row in rows:
    assert set(row) == {"epoch", "step", "loss", "val_precision_at_1", "val_r_precision", "val_map_at_r", "seconds"}
  assert RunDir(workdir).checkpoints.step("last") == 4 and RunDir(workdir).checkpoints.step("best") in (2, 4)
  results = RunDir(workdir).read_results()
  (fold,) = results["separated"]
  assert results["test_classes"] == 8 and fold["test"]["num_queries"] == results["test_images"] == 48
  assert all(0.0 <= fold["test"][m] <= 1.0 for m in ("precision_at_1", "r_precision", "map_at_r"))


@pytest.mark.slow
def test_four_folds_give_separated_and_concatenated_results(four_fold_run):
  config, workdir, results = four_fold_run
  assert RunDir(workdir).read_config()["computation"] == {"conv": convolutions.resolve(config.conv)}
  assert [s["fold"] for s in results["separated"]] == [0, 1, 2, 3]
  assert all(s["dim"] == 16 for s in results["separated"])
  assert results["concatenated"]["dim"] == 4 * 16
  assert results["concatenated"]["test"]["num_queries"] == results["test_images"]
  for k in range(4):
    fold = RunDir(workdir / f"fold{k}")
    assert [r["step"] for r in fold.read_metrics()] == [2, 4]
    assert fold.checkpoints.step("last") == 4
  assert RunDir(workdir).read_results() == json.loads(json.dumps(results))


def test_evaluate_retests_a_metric_learning_run_as_its_results_say(four_fold_run, assert_one_line_error):
  """``python -m fewshot.evaluate`` of a metric-learning run: each fold model's best checkpoint again, through the
  experiment's retrieval evaluator, gives the test its results.json holds.
  """
  config, workdir, results = four_fold_run
  done = subprocess.run([sys.executable, "-m", "fewshot.evaluate", f"--workdir={workdir}"], capture_output=True,
                        text=True)
  assert done.returncode == 0, done.stderr
  written = json.loads((workdir / "test_best_retrieval.json").read_text())
  assert written["separated"] == [{k: v for k, v in s.items() if not k.startswith("best")}
                                  for s in json.loads(json.dumps(results["separated"]))]
  assert written["concatenated"] == json.loads(json.dumps(results["concatenated"]))
  assert written["checkpoint_steps"] == [s["best_epoch"] * TINY["steps_per_epoch"] for s in results["separated"]]
  assert "fold models concatenated, 64-d) on 8 test classes: MAP@R" in done.stdout and "MAP@R" in done.stdout
  assert_one_line_error(subprocess.run([sys.executable, "-m", "fewshot.evaluate", f"--workdir={workdir}",
                                        "--test_by=cached"], capture_output=True, text=True),
                        "--test_by choose how a few-shot run is tested; ", "is a metric-learning run")


def test_evaluate_tests_a_metric_learning_run_s_embedder_on_few_shot_episodes(four_fold_run, assert_one_line_error):
  """With an episode's shape given, each fold model's embedding (and their concatenation) is tested as a few-shot
  learner is: the command's numbers are the evaluator's on the restored checkpoint, under the run's test key.
  """
  from fewshot.dml import evaluators
  from fewshot.training.class_draws import ClassLayout
  from fewshot.training.train_state import run_keys

  config, workdir, _ = four_fold_run
  command = [sys.executable, "-m", "fewshot.evaluate", f"--workdir={workdir}", "--test_way=3", "--shot=1",
             "--test_query=4", "--test_episodes=30"]
  done = subprocess.run(command, capture_output=True, text=True)
  assert done.returncode == 0, done.stderr
  written = json.loads((workdir / f"test_best_episodes_3w1s4q_30ep_seed{config.seed}.json").read_text())
  assert written["options"] == {"way": 3, "shot": 1, "query": 4, "episodes": 30, "seed": config.seed}
  assert [s["fold"] for s in written["separated"]] == [0, 1, 2, 3] and written["concatenated"]["dim"] == 64
  assert all(s["test"]["test_episodes"] == 30 for s in [*written["separated"], written["concatenated"]])
  assert "3-way 1-shot 4-query episodes of 8 test classes: test accuracy" in done.stdout
  experiment = Experiment(config)
  state = RunDir(workdir / "fold1").checkpoints.restore("best", experiment.initial_state(1))
  [embedded] = experiment.embed(1, state, experiment.test)
  accuracies = evaluators.prototype_accuracies(embedded, ClassLayout.from_split(experiment.test),
                                               run_keys(config.seed)["test"], 30, 3, 1, 4)
  assert written["separated"][1]["test"] == json.loads(json.dumps(evaluators.episodes_summary(accuracies)))
  listed = subprocess.run([sys.executable, "-m", "fewshot.analyze", "--list", str(workdir)], capture_output=True,
                          text=True)
  row = listed.stdout.split("Few-shot episodes python -m fewshot.evaluate tested the runs on")[1].splitlines()[3]
  concatenated = written["concatenated"]["test"]
  assert row.split()[1:] == [f"test_best_episodes_3w1s4q_30ep_seed{config.seed}.json", "best", "3-way", "1-shot",
                             "4-query,", "seed", str(config.seed), "30", f"{concatenated['test_accuracy']:.2f}", "±",
                             f"{concatenated['test_ci95']:.2f}"], listed.stdout
  assert_one_line_error(subprocess.run([*command[:4], "--test_way=1"], capture_output=True, text=True),
                        "--test_way 1 is not a whole number of at least 2")


def test_analyze_and_plot_read_a_four_fold_run_as_it_was_written(four_fold_run, tmp_path):
  """The records analyze and plot read (each fold model's rows in its fold<k>/) are the ones training writes; the
  fixtures of tests/analysis/test_retrieval_runs.py and tests/test_plot.py copy this layout.
  """
  from fewshot import analyze, kinds, plot  # noqa: PLC0415
  from fewshot.analysis import retrieval_runs  # noqa: PLC0415
  from fewshot.analysis.tables import render_text  # noqa: PLC0415

  config, workdir, results = four_fold_run
  text, warning = analyze.analyze_paths([str(workdir)])
  (run,) = kinds.read_runs_of([str(workdir)], "dml")
  assert warning is None and text == render_text([retrieval_runs.checkpoints_table(run), retrieval_runs.test_table(run)])
  assert [(row["fold"], row["epoch"], row["val_map_at_r"]) for row in run.rows] == [
      (k, row["epoch"], row["val_map_at_r"]) for k in range(4) for row in RunDir(workdir / f"fold{k}").read_metrics()]
  assert f"concatenated    64          —           {100 * results['concatenated']['test']['map_at_r']:.2f}" in text
  written, _ = plot.plot([str(workdir)], str(tmp_path / "figs"))
  assert sorted(p.name for p in (tmp_path / "figs").iterdir()) == ["loss.png", "val_map_at_r.png"]


def _comparable(rows):
  return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


@pytest.mark.slow
def test_resume_after_interruption_matches_uninterrupted_run(four_fold_run, tmp_path, monkeypatch):
  config, straight, straight_results = four_fold_run
  workdir = tmp_path / "run"
  save = Checkpoints.save

  def dies_before_last_checkpoint_of_fold1_epoch2(self, kind, step, state):
    # The hardest moment: epoch 2's metrics row is written (and maybe its best checkpoint), its last is not.
    if self.folder.parent.name == "fold1" and kind == "last" and step == 4:
      raise KeyboardInterrupt
    return save(self, kind, step, state)

  monkeypatch.setattr(Checkpoints, "save", dies_before_last_checkpoint_of_fold1_epoch2)
  with pytest.raises(KeyboardInterrupt):
    train(config, str(workdir), progress=False)
  monkeypatch.setattr(Checkpoints, "save", save)
  assert not (workdir / "results.json").exists() and not (workdir / "fold2").exists()
  assert len(RunDir(workdir / "fold1").read_metrics()) == 2 and RunDir(workdir / "fold1").checkpoints.step("last") == 2

  with pytest.raises(RunDirError, match="--resume"):
    train(config, str(workdir), progress=False)
  resumed = train(config, str(workdir), resume=True, progress=False)
  for k in range(4):
    assert _comparable(RunDir(workdir / f"fold{k}").read_metrics()) == _comparable(
        RunDir(straight / f"fold{k}").read_metrics())
  assert {k: v for k, v in resumed.items() if k != "workdir"} == {
      k: v for k, v in straight_results.items() if k != "workdir"}
  experiment = Experiment(config)
  for k in range(4):
    a = RunDir(workdir / f"fold{k}").checkpoints.restore("last", experiment.initial_state(k))
    b = RunDir(straight / f"fold{k}").checkpoints.restore("last", experiment.initial_state(k))
    jax.tree.map(np.testing.assert_array_equal, a.params, b.params)


def test_the_loss_learning_rate_defaults_to_the_model_s_and_old_configs_resume():
  config = DMLConfig(learning_rate=3e-4)
  assert config.loss_learning_rate == 3e-4
  saved = {k: v for k, v in config.to_dict().items() if k != "loss_learning_rate"}  # a run from before the flag
  assert DMLConfig.from_dict(saved).differences(config) == []
  assert DMLConfig(loss_learning_rate=1e-2).differences(config) == ["learning_rate", "loss_learning_rate"]


def _finish(running: dict) -> dict:
  out = {}
  for name, process in running.items():
    stdout, stderr = process.communicate(timeout=120)
    out[name] = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
  return out


def test_bad_input_fails_with_one_line_and_writes_nothing(cars_dir, tmp_path, assert_one_line_error):
  cases = {
      "unknown_loss": (["--loss=nope"], ["--loss", "nope"]),
      "unknown_miner": (["--miner=hardest"], ["--miner", "hardest"]),
      "unknown_dataset": (["--dataset=mnist"], ["--dataset", "mnist"]),
      "miner_without_triplets": (["--loss=contrastive", "--miner=semi_hard"], ["contrastive", "--miner none"]),
      "folds": (["--folds=3"], ["--folds"]),
      "loss_learning_rate": (["--loss=nsl", "--loss_learning_rate=-1"], ["--loss_learning_rate must be positive"]),
      "placement": (["--placement=gpu"], ["--placement"]),
      "custom_loss": (["--loss=custom:mine"], ["custom:mine", "from Python"]),
      "too_many_classes": ([f"--data_dir={cars_dir}", "--classes=7"], ["--classes 6"]),
      "class_pool_too_large": ([f"--data_dir={cars_dir}", "--classes=2", "--class_pool=7"], ["--class_pool 6"]),
      "class_pool_not_larger": (["--class_pool=2"], ["--class_pool 2 must be larger than --classes 2"]),
      # Batches a loss cannot learn from: before, they trained every epoch with a loss of exactly 0 (or half of it).
      "one_class": (["--classes=1"], ["triplet", "--classes 1 gives no negatives"]),
      "one_per_class": (["--per_class=1"], ["triplet", "--per_class 1 gives no positive pair"]),
      "npair_one_per_class": (["--loss=npair", "--per_class=1"], ["npair", "--per_class 1 gives no positive pair"]),
      "contrastive_one_per_class": (["--loss=contrastive", "--per_class=1"], ["contrastive", "no positive pair"]),
  }
  # Started together: each pays the interpreter's and jax's start-up, the slow part of a refusal.
  results = _finish({name: subprocess.Popen(_cli(tmp_path / name, *extra), stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True) for name, (extra, _) in cases.items()})
  for name, result in results.items():
    assert_one_line_error(result, *cases[name][1])
    assert not (tmp_path / name).exists(), name


@pytest.mark.slow
def test_workdir_of_another_run_is_refused(cars_dir, assert_one_line_error, four_fold_run):
  _, other_run, _ = four_fold_run
  before = sorted(p.relative_to(other_run) for p in other_run.rglob("*"))
  result = _finish({"another_run": subprocess.Popen(
      _cli(other_run, "--folds=4", "--seed=1", "--resume", data_dir=cars_dir),
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)})["another_run"]
  assert_one_line_error(result, "different run", "--seed")
  assert sorted(p.relative_to(other_run) for p in other_run.rglob("*")) == before


def _hand_written_nsl(embeddings, labels, proxies):
  """The registered nsl's formula written out (scale 10): cross-entropy of cosines to normalised proxies."""
  unit = lambda v: v * jax.lax.rsqrt(jnp.maximum(jnp.sum(v * v, axis=1, keepdims=True), 1e-24))  # noqa: E731
  logits = 10.0 * (unit(embeddings) @ unit(proxies).T)
  return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))


def _init_hand_written_nsl(key, num_classes, dim):
  return {"proxies": jax.random.normal(key, (num_classes, dim)) / jnp.sqrt(dim)}


@pytest.mark.slow  # two runs on the Cars196 fixture
def test_a_user_written_loss_trains_like_the_registered_one(cars_dir, tmp_path):
  mine = Loss(_hand_written_nsl, _init_hand_written_nsl, per_class=True, name="my_nsl")
  ours = train(DMLConfig(data_dir=str(cars_dir), loss="nsl", **TINY), str(tmp_path / "nsl"), progress=False)
  theirs = train(DMLConfig(data_dir=str(cars_dir), **TINY), str(tmp_path / "mine"), progress=False, loss=mine)
  assert theirs["loss"] == "custom:my_nsl" == RunDir(tmp_path / "mine").read_config()["loss"]
  rows = [_comparable(RunDir(tmp_path / name).read_metrics()) for name in ("nsl", "mine")]
  assert len(rows[0]) == len(rows[1]) == 2
  for row, expected in zip(rows[1], rows[0]):  # the loss's proxies trained alike: the losses agree
    assert row == pytest.approx(expected, rel=1e-4, abs=1e-6)
  assert theirs["separated"][0]["test"] == pytest.approx(ours["separated"][0]["test"], rel=1e-4, abs=1e-6)

  saved = DMLConfig.from_dict(RunDir(tmp_path / "mine").read_config())  # the record, without the function
  for config in (saved, DMLConfig(data_dir=str(cars_dir), **TINY)):
    with pytest.raises(ConfigError, match="--loss custom:my_nsl names a loss passed as a value from Python.*resume=True, loss=") as refused:
      train(config, str(tmp_path / "mine"), resume=True, progress=False)
    assert "\n" not in str(refused.value)
  with pytest.raises(ConfigError, match="--loss custom:my_nsl names a loss passed as a value from Python"):
    train(saved, str(tmp_path / "another"), progress=False)


@pytest.mark.slow  # a whole run (~20 s); the mined step itself is replayed by hand by default (tests/dml/test_embedding.py)
def test_hard_negative_class_mining_trains_validates_and_tests_and_names_its_arm(cars_dir, tmp_path):
  config = DMLConfig(data_dir=str(cars_dir), loss="npair", class_pool=4, **TINY)
  results = train(config, str(tmp_path / "mined"), progress=False)
  recorded = DMLConfig.from_dict(RunDir(tmp_path / "mined").read_config())
  assert recorded.class_pool == 4 and recorded.model_name == "npair (hard classes of 4)"
  assert np.isfinite([row["loss"] for row in RunDir(tmp_path / "mined").read_metrics() if "loss" in row]).all()
  assert 0 <= results["separated"][0]["test"]["map_at_r"] <= 1
  assert DMLConfig(loss="npair").model_name == "npair" and DMLConfig(miner="semi_hard").model_name == "triplet (semi_hard)"


def test_a_loss_that_returns_no_scalar_is_refused_before_training(cars_dir, tmp_path):
  per_example = Loss(lambda embeddings, labels: jnp.sum(embeddings, axis=1), name="per_example")
  with pytest.raises(ConfigError, match=r"the loss custom:per_example returned shape \(4,\)") as refused:
    train(DMLConfig(data_dir=str(cars_dir), **TINY), str(tmp_path / "run"), progress=False, loss=per_example)
  assert "\n" not in str(refused.value)
  assert not (tmp_path / "run" / "config.json").exists() and not (tmp_path / "run" / "checkpoints").exists()


def test_a_user_loss_states_what_its_batches_need_and_is_refused_a_batch_without_it():
  from fewshot.backbones import Conv4  # noqa: PLC0415
  from fewshot.dml.embedding import Embedder, MetricLearner  # noqa: PLC0415
  from fewshot.dml.samplers import BatchShape  # noqa: PLC0415

  pairs = Loss(lambda embeddings, labels: jnp.mean(embeddings), name="pairs", needs=("positives",))
  model = Embedder(Conv4(features=4), embedding_dim=4)
  assert MetricLearner(model, BatchShape(1, 2), loss=pairs).loss.needs == ("positives",)  # one class: no negatives needed
  with pytest.raises(ConfigError, match=r"the custom:pairs loss .* --per_class 1 gives no positive pair") as refused:
    MetricLearner(model, BatchShape(8, 1), loss=pairs)
  assert "\n" not in str(refused.value)
  with pytest.raises(ConfigError, match="'positives' and/or 'negatives'"):
    Loss(pairs.fn, name="typo", needs=("positive",))


def test_a_run_whose_batch_does_not_fit_the_host_is_refused_naming_the_batch(monkeypatch, on_the_cpu):
  """Before, ``--per_class 1000`` ran out of memory after half a minute with a traceback, its directory left behind."""
  from fewshot.training import seed_groups

  config = DMLConfig(dataset="strokes", folds=1, classes=8, per_class=4)
  with monkeypatch.context() as patched:
    patched.setattr(seed_groups, "host_memory_available", lambda: 1 << 20)  # a host with 1 MiB free
    with pytest.raises(ConfigError, match=r"^the run needs about .* GiB of host memory .* but the host has 0\.0 GiB "
                       r"available; use a smaller batch than --classes 8 x --per_class 4\.$") as info:
      Experiment(config)
  assert "\n" not in str(info.value)
  assert Experiment(config).group is None  # the same run fits this machine


@pytest.mark.slow  # a compiled DML run, about 6 s
def test_a_diverging_run_stops_in_one_line_keeping_no_non_finite_checkpoint(cars_dir, tmp_path):
  """Its validation had met non-finite embeddings first: a ValueError traceback from the retrieval metrics."""
  config = DMLConfig(data_dir=str(cars_dir), folds=1, **{**TINY, "learning_rate": 1e38})
  workdir = tmp_path / "run"
  with pytest.raises(TrainingError, match=r"^training stopped: the training loss at step 2 of .* is not finite: "
                     r"the run diverged; no checkpoint was saved; lower --learning_rate"):
    train(config, str(workdir), progress=False)
  assert not (workdir / "checkpoints").exists()
  assert [row["loss"] for row in RunDir(workdir).read_metrics()] == [None]
