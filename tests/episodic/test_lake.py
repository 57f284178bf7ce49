"""Lake et al.'s one-shot runs: read from a folder or a zip in the release's layout, scored by a run's head and 1-NN."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import fewshot
from fewshot.config import Config
from fewshot.data.omniglot import decode
from fewshot.episodic import lake, lake_design
from fewshot.errors import DataError
from fewshot.train import train

from omniglot_fixtures import RUNS, WAY, characters, write_background_zip, write_lake_runs, zip_runs
from tiny_run import TINY


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  root = tmp_path_factory.mktemp("lake")
  labels = write_lake_runs(root / "all_runs")
  return root / "all_runs", zip_runs(root / "all_runs", root / "all_runs.zip"), labels


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("run") / "run"
  train(Config(dataset="strokes", **TINY), workdir, progress=False)
  return workdir


def test_runs_are_read_alike_from_a_folder_and_a_zip_and_decoded_as_omniglot(runs):
  folder, archive, labels = runs
  read = {"folder": lake.read_runs(folder), "zip": lake.read_runs(archive)}
  for got in read.values():
    assert [run.name for run in got] == list(labels)
    for run in got:
      assert run.class_files == tuple(f"{run.name}/training/class{c + 1:02d}.png" for c in range(WAY))
      assert run.item_files == tuple(f"{run.name}/test/item{i + 1:02d}.png" for i in range(WAY))
      np.testing.assert_array_equal(run.labels, labels[run.name])
      assert run.support.shape == run.queries.shape == (WAY, 28, 28, 1) and run.support.dtype == np.uint8
      # The Omniglot training data's decoder: ink 255 on 0, 28x28.
      png = (folder / run.class_files[2]).read_bytes()
      np.testing.assert_array_equal(run.support[2], decode(png, "x"))
      assert run.support[2].max() == 255 and run.support[2][0, 0, 0] == 0
  for a, b in zip(read["folder"], read["zip"]):
    np.testing.assert_array_equal(a.support, b.support)
    np.testing.assert_array_equal(a.queries, b.queries)



def test_a_zip_is_read_whatever_its_name_and_anything_else_is_refused(runs, tmp_path):
  _, archive, _ = runs
  renamed = tmp_path / "all_runs.bin"
  renamed.write_bytes(archive.read_bytes())
  for a, b in zip(lake.read_runs(renamed), lake.read_runs(archive)):
    assert a.item_files == b.item_files
    np.testing.assert_array_equal(a.queries, b.queries)
  (tmp_path / "notes.txt").write_text("not runs")
  (tmp_path / "cut.zip").write_bytes(archive.read_bytes()[:archive.stat().st_size // 2])
  for path, fragment in [(tmp_path / "none", "do not exist"), (tmp_path / "notes.txt", "neither a folder nor a zip"),
                         (tmp_path / "cut.zip", "not a readable zip"), (tmp_path, "found no runNN/class_labels.txt")]:
    with pytest.raises(DataError, match=fragment) as raised:
      lake.read_runs(path)
    assert "\n" not in str(raised.value)


def _numpy_scores(model, runs):
  """The 1-NN rule in float64 numpy on the model's embeddings: predictions per run."""
  predictions = []
  for run in runs:
    support = np.asarray(model.embed(run.support), np.float64)
    queries = np.asarray(model.embed(run.queries), np.float64)
    predictions.append(((queries[:, None, :] - support[None, :, :]) ** 2).sum(-1).argmin(1))
  return predictions


@pytest.mark.parametrize("classifier, head", [("proto", "softmax"), ("nn", "dr")])
def test_scores_equal_an_independent_numpy_computation(runs, classifier, head):
  folder, archive, labels = runs
  model = fewshot.build(Config(dataset="strokes", classifier=classifier, head=head))
  results = lake.score_runs(model, folder)
  assert results["runs"] == RUNS and results["items"] == RUNS * WAY
  expected = _numpy_scores(model, lake.read_runs(folder))
  correct = [prediction == labels[run] for prediction, run in zip(expected, labels)]
  assert 0 < sum(c.sum() for c in correct) < RUNS * WAY, "the check needs both right and wrong answers"
  for row, prediction, hits in zip(results["per_run"], expected, correct):
    # One support image per class: every head decides by the distance to it, as 1-NN does.
    assert row["head_predicted"] == row["nn_predicted"] == prediction.tolist()
    assert row["nn_correct"] == hits.sum() and row["nn_accuracy"] == pytest.approx(100 * hits.mean())
  run_accuracies = [100 * c.mean() for c in correct]
  for rule in ("head", "nn"):
    summary = results["rules"][rule]
    assert summary["accuracy"] == pytest.approx(100 * np.concatenate(correct).mean())
    assert summary["run_mean"] == pytest.approx(np.mean(run_accuracies))
    assert summary["run_ci95"] == pytest.approx(1.96 * np.std(run_accuracies) / np.sqrt(RUNS))
  assert results["rules"]["head"]["name"] == model.config.model_name
  from_zip = lake.score_runs(model, archive)
  assert {**from_zip, "lake_runs": None} == {**results, "lake_runs": None}


def test_items_identical_to_their_class_image_are_all_right(tmp_path):
  write_lake_runs(tmp_path / "all_runs", identical=True, seed=3)
  results = lake.score_runs(fewshot.build(Config(dataset="strokes", head="dr")), tmp_path / "all_runs")
  for rule in ("head", "nn"):
    assert results["rules"][rule]["accuracy"] == 100.0 and results["rules"][rule]["run_ci95"] == 0.0


def _evaluate_cli(*args):
  return subprocess.run([sys.executable, "-m", "fewshot.evaluate", *args], capture_output=True, text=True)


def test_cli_scores_the_runs_and_writes_lake_runs_json(runs, trained_run):
  _, archive, _ = runs
  result = _evaluate_cli(f"--workdir={trained_run}", f"--lake_runs={archive}")
  assert result.returncode == 0, result.stderr[-2000:]
  written = json.loads((trained_run / "lake_runs.json").read_text())
  expected = lake.score_runs(fewshot.load(str(trained_run)), archive)
  assert written["rules"] == expected["rules"] and written["per_run"] == expected["per_run"]
  assert written["checkpoint"] == "best" and written["lake_runs"] == str(archive)
  assert len(result.stdout.splitlines()) == 1 + 1 + RUNS + 2 + 1  # title, header, runs, the two rules, wrote
  assert f"{written['rules']['nn']['accuracy']:.2f}% of {RUNS * WAY} items" in result.stdout
  (trained_run / "lake_runs.json").unlink()


def _break(root: pathlib.Path, defect: str) -> str:
  """Break a written copy of the runs one way; returns a fragment the error must name."""
  if defect == "missing_run":
    for path in sorted((root / "run02").rglob("*"), reverse=True):
      path.unlink() if path.is_file() else path.rmdir()
    (root / "run02").rmdir()
    return "no run02"
  if defect == "missing_image":
    (root / "run01" / "test" / "item03.png").unlink()
    return "run01/test/item03.png, which is missing"
  if defect == "not_png":
    (root / "run03" / "training" / "class02.png").write_bytes(b"GIF89a not a png at all")
    return "class02.png"
  with (root / "run02" / "class_labels.txt").open("a") as labels:
    labels.write("run02/test/item01.png\n")
  return "line 6"


DEFECTS = ("missing_run", "missing_image", "not_png", "malformed_line")


@pytest.mark.parametrize("defect", DEFECTS)
def test_bad_runs_exit_2_with_one_line_and_write_nothing(tmp_path, trained_run, defect, assert_one_line_error):
  write_lake_runs(tmp_path / "all_runs")
  fragment = _break(tmp_path / "all_runs", defect)
  before = sorted(p.relative_to(trained_run) for p in trained_run.rglob("*"))
  result = _evaluate_cli(f"--workdir={trained_run}", f"--lake_runs={tmp_path / 'all_runs'}")
  assert_one_line_error(result, fragment)
  assert sorted(p.relative_to(trained_run) for p in trained_run.rglob("*")) == before
  # The same defect inside a zip is refused alike.
  with pytest.raises(DataError, match=fragment.split(",")[0].split("/")[-1]) as raised:
    lake.read_runs(zip_runs(tmp_path / "all_runs", tmp_path / "all_runs.zip"))
  assert "\n" not in str(raised.value)


def test_lake_runs_refuse_test_split_options(runs, trained_run, assert_one_line_error):
  result = _evaluate_cli(f"--workdir={trained_run}", f"--lake_runs={runs[0]}", "--test_episodes=10")
  assert_one_line_error(result, "--test_episodes", "--lake_runs")
  assert not (trained_run / "lake_runs.json").exists()


@pytest.mark.slow  # the command scoring with and without shifts
def test_cli_test_shifts_score_the_mean_of_shifted_embeddings_and_are_recorded(runs, trained_run,
                                                                               assert_one_line_error):
  folder = runs[0]
  result = _evaluate_cli(f"--workdir={trained_run}", f"--lake_runs={folder}", "--test_shifts=2")
  assert result.returncode == 0, result.stderr[-2000:]
  assert "mean over shifts by up to 2 px" in result.stdout.splitlines()[0]
  written = json.loads((trained_run / "lake_runs.json").read_text())
  shifted = fewshot.load(str(trained_run), test_shifts=2)
  assert written["test_shifts"] == 2 == shifted.config.test_shifts
  expected = _numpy_scores(shifted, lake.read_runs(folder))
  assert [row["nn_predicted"] for row in written["per_run"]] == [p.tolist() for p in expected]
  # The run's own (one view) and the shifted model embed differently: the flag reached the model.
  assert not np.allclose(fewshot.load(str(trained_run)).embed(lake.read_runs(folder)[0].support),
                         shifted.embed(lake.read_runs(folder)[0].support), atol=1e-4)
  (trained_run / "lake_runs.json").unlink()
  result = _evaluate_cli(f"--workdir={trained_run}", f"--lake_runs={folder}", "--test_shifts=14")
  assert_one_line_error(result, "--test_shifts must be 0 or more and below half the 28 px side, got 14")
  assert not (trained_run / "lake_runs.json").exists()


def test_scoring_a_run_opens_it_once_and_reads_its_config_once(runs, trained_run, monkeypatch):
  """It opened the run directory twice and read config.json three times (issue 30, item 5)."""
  from fewshot import evaluate  # noqa: PLC0415
  from fewshot.records.rundir import RunDir  # noqa: PLC0415

  opened, reads, read_bytes = [], [], pathlib.Path.read_bytes
  monkeypatch.setattr(pathlib.Path, "read_bytes", lambda p: (reads.append(p) if p.name == "config.json" else None)
                      or read_bytes(p))
  init = RunDir.__init__
  monkeypatch.setattr(RunDir, "__init__", lambda self, *a, **k: opened.append(a[0]) or init(self, *a, **k))
  results = evaluate.evaluate_lake(str(trained_run), str(runs[1]), record=False)
  assert not (trained_run / "lake_runs.json").exists()  # record=False writes nothing (it once wrote anyway)
  assert len(reads) == 1 and len(opened) == 1 and results["rules"] == lake.score_runs(fewshot.load(str(trained_run)), runs[1])["rules"]


def test_cli_scores_random_runs_of_lake_s_design_and_names_the_record_by_them(tmp_path, trained_run,
                                                                            assert_one_line_error):
  """``--lake_design N`` draws N runs of Lake's design from the images in --data_dir (his 10 alphabets, here 2
  characters each, drawers 1-8) with --test_way and --seed, and scores them as the official runs are scored (the
  same runs drawn and scored here through ``lake.score_runs``); the per-run table is left out of what it prints.
  """
  data = write_background_zip(characters({a: 2 for a in lake_design.ALPHABETS}, drawers=8), tmp_path / "omniglot",
                              "images_evaluation")
  result = _evaluate_cli(f"--workdir={trained_run}", "--lake_design=12", "--test_way=2", "--seed=3",
                         f"--data_dir={data}")
  assert result.returncode == 0, result.stderr[-2000:]
  record = trained_run / "lake_design_12runs_2way_seed3.json"
  written = json.loads(record.read_text())
  drawn = lake_design.design_runs(str(data), 12, way=2, seed=3)
  expected = lake.score_runs(fewshot.load(str(trained_run)), drawn)
  assert written["rules"] == expected["rules"] and written["runs"] == 12 and written["items"] == 24
  assert written["design"] == {"runs": 12, "way": 2, "seed": 3} and written["lake_runs"] == str(data.resolve())
  assert [row["run"] for row in written["per_run"]] == [run.name for run in drawn]
  assert len(result.stdout.splitlines()) == 1 + 2 + 1  # title, the two rules, wrote
  record.unlink()
  for args, fragment in ((["--lake_runs=all_runs.zip"], "give one of the two"),
                         (["--test_episodes=10"], "--test_episodes")):
    refused = _evaluate_cli(f"--workdir={trained_run}", "--lake_design=12", f"--data_dir={data}", *args)
    assert_one_line_error(refused, fragment)
  assert not list(trained_run.glob("lake_design_*.json"))
