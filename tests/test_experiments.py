"""The paper-reproduction scripts end to end in smoke mode on fixtures: their tables, and resuming a finished grid."""

import json
import re

import jax
import numpy as np
import pytest

from fewshot.analysis import stats
from fewshot.config import Config
from fewshot.errors import RunDirError
from fewshot.records.rundir import RunDir

import dataset_fixtures as fixtures
import omniglot_fixtures
from experiments import grid, omniglot_oneshot, reality_check, reproduce_dr

NUMBER = r"-?\d+\.\d+"
PROTO_MODELS = ("ProtoNet_S", "ProtoNet_DR")
NN_MODELS = ("1-NN_S", "1-NN_DR")  # 5-shot only, as in the paper


def _mtimes(out):
  return {p: p.stat().st_mtime_ns for p in out.glob("*/results.json")}


def _rerun_skips(main, argv, out, expected_runs):
  """A second invocation trains nothing: every results.json is left as it was, and it reprints the summary."""
  before = _mtimes(out)
  assert len(before) == expected_runs
  assert main(argv) == (out / "summary.md").read_text()
  assert _mtimes(out) == before


def _loss_row(summary, loss):
  """A loss's P@1, R-Precision and MAP@R, separated and concatenated, each a percentage."""
  row = next(line for line in summary.splitlines() if line.startswith(f"| {loss} |"))
  values = [float(x) for x in re.findall(NUMBER, row)]
  assert len(values) == 6 and all(0 <= v <= 100 for v in values), row
  return values


def _cars196(tmp_path):
  return fixtures.write_cars196(tmp_path / "cars", classes=16, per_class=6, size=(20, 24)).data_dir


@pytest.mark.slow  # a smoke run of the script, stopped and resumed
def test_reality_check_smoke_table_and_resume(tmp_path, capsys):
  out = tmp_path / "rc"
  argv = ["--dataset", "cars196", "--data_dir", str(_cars196(tmp_path)), "--out", str(out), "--smoke",
          "--losses", "nsl"]
  summary = reality_check.main(argv)
  _loss_row(summary, "nsl")
  assert "MAP@R concat." in summary and "summary.md" in capsys.readouterr().out
  _rerun_skips(reality_check.main, argv, out, 1)
  assert "nsl: done, skipped" in capsys.readouterr().out
  # The run directory is named by the loss alone: a finished run of other options is refused, not reported.
  with pytest.raises(RunDirError, match="differs in --backbone; choose another --out"):
    reality_check.main(argv + ["--backbone", "resnet18"])
  _rerun_skips(reality_check.main, argv, out, 1)


@pytest.mark.slow
def test_reality_check_smoke_compares_all_four_losses(tmp_path):
  summary = reality_check.main(["--data_dir", str(_cars196(tmp_path)), "--out", str(tmp_path / "rc"), "--smoke"])
  for loss in ("contrastive", "triplet", "npair", "nsl"):
    _loss_row(summary, loss)


@pytest.mark.slow
def test_reality_check_smoke_with_resnet18(tmp_path):
  out = tmp_path / "rc"
  argv = ["--dataset", "cars196", "--data_dir", str(_cars196(tmp_path)), "--out", str(out), "--smoke",
          "--losses", "nsl", "--backbone", "resnet18"]
  summary = reality_check.main(argv)
  assert summary.startswith("# cars196, resnet18: test retrieval")
  _loss_row(summary, "nsl")
  rundir = RunDir(out / "nsl")
  assert rundir.read_config()["backbone"] == "resnet18"
  assert [fold["fold"] for fold in rundir.read_results()["separated"]] == [0, 1, 2, 3]
  _rerun_skips(reality_check.main, argv, out, 1)


def _check_dr_grid(summary, out, dataset, backbones, shots):
  """Table 2 and the statistics of a smoke grid, against the runs' own files; returns the number of runs.

  The table has a column per (backbone, shot) and a row per model whose cells are its runs'
  results.json (1-NN at 5-shot only); each run trained the configuration its name says.
  """
  table, statistics = summary.split("# Statistics")
  assert table.startswith(f"# {dataset}: test accuracy")
  columns = [(backbone, shot) for backbone in backbones for shot in shots]
  assert "| Model | " + " | ".join(f"{b} {s}-shot" for b, s in columns) + " |" in table, table
  runs = 0
  for model in PROTO_MODELS + NN_MODELS:
    cells = []
    for backbone, shot in columns:
      if model in NN_MODELS and shot != 5:
        cells.append("–")
        continue
      rundir = RunDir(out / f"{dataset}_{backbone}_{model}_2w{shot}s_seed0")
      assert (rundir.path / "results.json").exists(), rundir.path
      config, results = rundir.read_config(), rundir.read_results()
      assert (config["dataset"], config["backbone"], config["shot"]) == (dataset, backbone, shot)
      assert config["input_shape"] == [28, 28, 3] and results["model"] == model
      assert 0 <= results["test_accuracy"] <= 100 and results["test_ci95"] >= 0, results
      cells.append(f"{results['test_accuracy']:.2f} ± {results['test_ci95']:.2f}")
      runs += 1
    rows = [line for line in table.splitlines() if line.startswith(f"| {model} |")]
    assert rows == ([] if set(cells) == {"–"} else [f"| {model} | " + " | ".join(cells) + " |"]), table
  pairs = [f"{b} {s}-shot {c}" for b, s in columns for c in ("ProtoNet", "1-NN") if c == "ProtoNet" or s == 5]
  assert re.findall(r"^## (.*): S vs DR$", statistics, re.M) == pairs
  for measure in ("norm ratio", "con-alpha", "div-alpha", "con-div"):
    assert statistics.count(f"### {measure}") == len(pairs)
  return runs


def _cub(tmp_path):
  return fixtures.write_cub(tmp_path / "cub", classes=8, per_class=8, size=(40, 48)).data_dir


@pytest.mark.slow
def test_reproduce_dr_smoke_grid_tables_and_resume(tmp_path):
  out = tmp_path / "dr"
  argv = ["--dataset", "cub", "--data_dir", str(_cub(tmp_path)), "--out", str(out), "--smoke"]
  runs = _check_dr_grid(reproduce_dr.main(argv), out, "cub", ["conv4"], [1, 5])
  assert runs == 6
  _rerun_skips(reproduce_dr.main, argv, out, runs)


@pytest.mark.slow
def test_reproduce_dr_smoke_on_mini_imagenet(tmp_path):
  # 4 train, 2 val, 2 test classes from the csv partition, 8 images each: enough for 2-way 5-shot + 2 queries.
  mini = fixtures.write_mini_imagenet(tmp_path / "mini", classes=(4, 2, 2), per_class=8, size=(40, 48)).data_dir
  out = tmp_path / "dr"
  argv = ["--dataset", "mini_imagenet", "--data_dir", str(mini), "--out", str(out), "--smoke"]
  runs = _check_dr_grid(reproduce_dr.main(argv), out, "mini_imagenet", ["conv4"], [1, 5])
  assert runs == 6
  _rerun_skips(reproduce_dr.main, argv, out, runs)


@pytest.mark.slow
def test_reproduce_dr_smoke_with_resnet18(tmp_path):
  out = tmp_path / "dr"
  argv = ["--dataset", "cub", "--data_dir", str(_cub(tmp_path)), "--out", str(out), "--smoke",
          "--backbones", "resnet18", "--shots", "1"]
  runs = _check_dr_grid(reproduce_dr.main(argv), out, "cub", ["resnet18"], [1])
  assert runs == 2
  _rerun_skips(reproduce_dr.main, argv, out, runs)


@pytest.mark.slow
def test_reproduce_dr_smoke_with_seed_groups(tmp_path, capsys):
  out = tmp_path / "dr"
  argv = ["--dataset", "cub", "--data_dir", str(_cub(tmp_path)), "--out", str(out), "--smoke", "--shots", "1",
          "--seeds", "0-2"]
  summary = reproduce_dr.main(argv)
  runs = sorted(p.name for p in out.iterdir() if p.is_dir())
  assert len(runs) == 6 and all(any(r.endswith(f"_seed{k}") for r in runs) for k in range(3))
  for model in ("ProtoNet_S", "ProtoNet_DR"):
    accuracies = [RunDir(out / r).read_results()["test_accuracy"] for r in runs if f"_{model}_" in r]
    mean, half = stats.t_interval(accuracies)
    assert f"| {model} | {mean:.2f} ± {half:.2f} (3 seeds) |" in summary
  assert "Test accuracy across seeds" in summary and "ProtoNet_S seed 2" in summary
  capsys.readouterr()
  reproduce_dr.main(argv)  # a finished grid of groups is read back, not retrained
  assert capsys.readouterr().out.count("done, skipped") == 2


def test_a_grid_drops_each_configuration_s_compiled_programs(tmp_path):
  """A grid of many configurations in one process would otherwise keep every one's programs (XLA:CPU's memory maps
  per process are limited: BUILD_NOTES, "Test suite"); a finished run's records are read back, not retrained.
  """
  step = jax.jit(lambda x: x + 1)
  cached = []

  def train(config, workdir, resume, progress):
    cached.append(step._cache_size())
    step(np.float32(config.seed))
    return {"test_accuracy": 0.5}

  configs = {seed: (f"run{seed}", Config(dataset="strokes", seed=seed)) for seed in range(2)}
  assert grid.run_all(configs, tmp_path, train) == {0: {"test_accuracy": 0.5}, 1: {"test_accuracy": 0.5}}
  assert grid.run_groups([Config(dataset="strokes")], (0, 1), tmp_path / "groups",
                         lambda config, seeds, dirs, resume, progress: [train(config, d, resume, progress)
                                                                        for d in dirs])
  assert cached == [0, 0, 0, 1] and step._cache_size() == 0  # a group's runs share one configuration's programs


@pytest.mark.slow  # a seed group trained by python -m fewshot.train in a subprocess: 14 s idle, 35 s under load
def test_omniglot_oneshot_smoke_scores_held_out_runs_and_resumes(tmp_path, capsys):
  chars = omniglot_fixtures.characters({"Alpha": 12, "Beta": 12, "Held": 20})
  data_dir = omniglot_fixtures.write_background_zip(chars, tmp_path / "omniglot")
  out = tmp_path / "oneshot"
  argv = ["--data_dir", str(data_dir), "--out", str(out), "--options", "distort", "--seeds", "0-1", "--held_out",
          "Held", "--runs_per_alphabet", "2", "--smoke"]
  summary = omniglot_oneshot.main(argv)
  assert "--distort" in capsys.readouterr().out and "--resume" not in summary
  assert sorted(p.name for p in (out / "heldout_runs").iterdir()) == ["run01", "run02"]
  assert sorted(p.name for p in (out / "train_characters").iterdir()) == ["Alpha", "Beta"]
  scores = [json.loads((out / "distort" / f"omniglot_conv4_ProtoNet_S_5w1s_seed{s}" / "lake_runs.json").read_text())
            for s in (0, 1)]
  accuracies = [score["rules"]["head"]["accuracy"] for score in scores]
  assert all(score["items"] == 40 for score in scores)
  mean, half = stats.t_interval(accuracies)
  row = f"| distort | 2 | {accuracies[0]:.2f}, {accuracies[1]:.2f} | {mean:.2f} ± {half:.2f} |"
  assert row in summary
  results = sorted(out.glob("distort/*/results.json"))
  before = [p.stat().st_mtime_ns for p in results]
  assert f"{row} read back |" in omniglot_oneshot.main(argv)  # a finished group is read back, not retrained
  assert "distort: done, skipped" in capsys.readouterr().out
  assert [p.stat().st_mtime_ns for p in results] == before
  # Scored again over shifted views: nothing retrained, each run's lake_runs.json says how it was scored.
  assert "mean over shifts by up to 1 px" in omniglot_oneshot.main([*argv, "--test_shifts", "1"])
  assert [p.stat().st_mtime_ns for p in results] == before
  for s in (0, 1):
    assert json.loads((out / "distort" / f"omniglot_conv4_ProtoNet_S_5w1s_seed{s}" / "lake_runs.json").read_text())[
        "test_shifts"] == 1


def test_embedding_spread_is_pairwise_distances_and_the_nearest_neighbour_as_scipy_finds_them():
  import scipy.spatial.distance

  from experiments import embedding_spread

  rng = np.random.default_rng(0)
  labels = np.repeat(np.arange(4), 6)
  z = rng.normal(size=(24, 5)) + 2.0 * rng.normal(size=(4, 5))[labels]
  z[0, :2] = 0.0  # zero entries count as inactive
  got = embedding_spread.spread(z.astype(np.float32), labels)
  d2 = scipy.spatial.distance.pdist(z.astype(np.float32).astype(np.float64), "sqeuclidean")
  pair_same = scipy.spatial.distance.pdist(labels[:, None], lambda a, b: float(a[0] == b[0])).astype(bool)
  assert got["same"] == pytest.approx(d2[pair_same].mean()) and got["other"] == pytest.approx(d2[~pair_same].mean())
  square = scipy.spatial.distance.squareform(d2) + np.diag(np.full(24, np.inf))
  assert got["nn_accuracy"] == pytest.approx(np.mean(labels[square.argmin(1)] == labels))
  assert got["active"] == pytest.approx(1 - 2 / z.size)
  assert got["norm_mean"] == pytest.approx(np.linalg.norm(z, axis=1).mean(), rel=1e-6)


@pytest.mark.slow
def test_embedding_spread_reads_a_trained_run(tmp_path, capsys):
  from fewshot.train import train

  from experiments import embedding_spread

  workdir = tmp_path / "run"
  train(Config(episodes=2, eval_every=2, val_episodes=1, test_episodes=2), str(workdir))
  [line] = embedding_spread.main([str(workdir), "--images", "40"])
  assert line.startswith(f"{workdir}: ProtoNet_S, 40 val images of 200 classes: norm ") and "1-NN accuracy" in line
  assert line in capsys.readouterr().out
