"""python -m fewshot.analyze of metric-learning runs: one run's rows and test retrieval, a folder's arms, --list
beside few-shot runs, and a mix of the two kinds refused (issue 40, item 4).
"""

import csv
import io
import json
import re
import subprocess
import sys

import numpy as np
import pytest
import scipy.stats

from fewshot import analyze, kinds
from fewshot.analysis import retrieval_runs
from fewshot.analysis.tables import render_text
from fewshot.errors import ConfigError
from fewshot.records.rundir import RunDir

from run_fixtures import write_dml_run, write_run


def _command(*args):
  return subprocess.run([sys.executable, "-m", "fewshot.analyze", *map(str, args)], capture_output=True, text=True)


def _csv(text):
  return list(csv.DictReader(io.StringIO(text)))


def _texts(table):
  return [[cell.text for cell in row] for row in table.rows]


@pytest.mark.parametrize("folds", [1, 4])
def test_one_run_shows_each_fold_models_checkpoints_and_its_test_retrieval(tmp_path, folds):
  path = write_dml_run(tmp_path / "run", "contrastive", folds=folds, map_at_r=0.4)
  text, warning = analyze.analyze_paths([path])
  (run,) = kinds.read_runs_of([path], "dml")
  checkpoints, test = retrieval_runs.checkpoints_table(run), retrieval_runs.test_table(run)
  assert warning is None and text == render_text([checkpoints, test])
  # A row per checkpoint of each fold model, as its metrics.jsonl holds it; the tested (best) one marked.
  results = RunDir(path).read_results()
  expected = []
  for k, fold in enumerate(RunDir(path).folds(folds)):
    for row in fold.read_metrics():
      tested = "best" if row["epoch"] == results["separated"][k]["best_epoch"] else ""
      expected.append([*[str(k)] * (folds > 1), str(row["epoch"]), str(row["step"]), f"{row['loss']:.4f}",
                       *(f"{100 * row[f'val_{m}']:.2f}" for m in ("map_at_r", "r_precision", "precision_at_1")),
                       tested])
  assert _texts(checkpoints) == expected and len(expected) == 3 * folds
  # Each fold model's test retrieval, and with several their mean and their concatenated embeddings.
  metrics = ("map_at_r", "r_precision", "precision_at_1")
  rows = [[f"fold {k}" if folds > 1 else "model", "128", str(s["best_epoch"]), *(f"{100 * s['test'][m]:.2f}"
                                                                             for m in metrics)]
          for k, s in enumerate(results["separated"])]
  if folds > 1:
    rows += [["separated mean", "128", "—", *(f"{100 * results['separated_mean'][m]:.2f}" for m in metrics)],
             ["concatenated", "512", "—", "40.00", "50.00", "70.00"]]
  assert _texts(test) == rows and test.title == "Test retrieval (%) of the best checkpoints, 200 test classes"


def test_a_run_not_yet_tested_says_so(tmp_path):
  path = write_dml_run(tmp_path / "run")
  (RunDir(path).path / "results.json").unlink()
  text, _ = analyze.analyze_paths([path])
  assert "not tested yet (no results.json)" in text and "best" not in text.split("\n\n")[0]


def test_a_folder_of_metric_learning_runs_is_read_as_its_arms_and_two_arms_compared(tmp_path):
  folder = tmp_path / "runs"
  a_values, b_values = [0.30, 0.33, 0.31], [0.36, 0.38, 0.35]
  a = [write_dml_run(folder / f"triplet_seed{k}", "triplet", k, v, folds=4) for k, v in enumerate(a_values)]
  b = [write_dml_run(folder / "contrastive" / f"seed{k}", "contrastive", k, v, folds=4)
       for k, v in enumerate(b_values)]
  RunDir(folder / "started").write_config(RunDir(a[0]).read_config())  # no fold model's row yet
  done = _command(folder)
  assert done.returncode == 0, done.stderr
  assert done.stderr == f"warning: left out 1 runs: {folder / 'started'} (no metrics row yet).\n"
  verdict, overview, compared = done.stdout.split("\n\n")[:3]
  assert (verdict, compared) == tuple(analyze.analyze_arms(a, b).split("\n\n")[:2])  # what A -- B prints
  lines = overview.splitlines()
  assert lines[0] == "2 arms: test retrieval across seeds (the fold models concatenated where a run has several)"
  half = scipy.stats.t.ppf(0.975, 2) * np.std(100 * np.array(a_values), ddof=1) / np.sqrt(3)
  cells = [re.split(r"\s{2,}", line) for line in lines[3:]]
  mean = f"{100 * np.mean(a_values):.2f} ± {half:.2f}"
  assert cells[0][:5] == ["A", "triplet", "3", "0: 30.00, 1: 33.00, 2: 31.00", mean]
  assert cells[1][:4] == ["B", "contrastive", "3", "0: 36.00, 1: 38.00, 2: 35.00"]
  assert [c[-1] for c in cells] == [f"{folder}/triplet_seed*", f"{folder}/contrastive/seed*"]  # its runs
  assert analyze.analyze_paths([str(folder)], fmt="csv")[0] == analyze.analyze_arms(a, b, fmt="csv")
  # Three arms: a row each, and in CSV a record per run with its arm's mean beside it.
  c = [write_dml_run(folder / f"ms_seed{k}", "multi_similarity", k, 0.5, folds=4) for k in range(2)]
  text, warning = analyze.analyze_paths([str(folder)])
  assert text.startswith("3 arms: test retrieval") and "C    multi_similarity  2" in text and "Verdict" not in text
  records = _csv(analyze.analyze_paths([str(folder)], fmt="csv")[0])
  assert [(r["arm"], r["loss"], r["seed"], r["directory"]) for r in records] == (
      [("A", "triplet", str(k), p) for k, p in enumerate(a)] + [("B", "contrastive", str(k), p) for k, p in enumerate(b)]
      + [("C", "multi_similarity", str(k), p) for k, p in enumerate(c)])
  assert float(records[0]["test_map_at_r"]) == pytest.approx(30.0)
  assert float(records[0]["arm_mean_test_map_at_r"]) == pytest.approx(100 * np.mean(a_values))


def test_list_lists_metric_learning_runs_beside_few_shot_ones(tmp_path):
  few = [write_run(tmp_path / f"fewshot_seed{k}", "dr", run_seed=k, results={"test_accuracy": 90.0 + k, "test_ci95": 1.0})
         for k in range(2)]
  metric = [write_dml_run(tmp_path / "dml" / name, name, 0, v) for name, v in (("triplet", 0.3), ("arcface", 0.45))]
  text, _ = analyze.analyze_paths([str(tmp_path)], list_runs=True)
  fewshot_table, dml_table = text.split("\n\n")
  assert fewshot_table.startswith("2 runs: the options in which they differ") and few[1] in fewshot_table
  lines = dml_table.splitlines()
  assert lines[0].startswith("2 metric-learning runs: the options in which they differ, and their test retrieval")
  assert lines[1].split()[:3] == ["run", "loss", "classes"]  # arcface's batch differs too (32 x 1)
  assert lines[3].startswith(f"{metric[1]}  arcface  32") and "45.00" in lines[3] and "75.00" in lines[3]
  assert lines[4].startswith(f"{metric[0]}  triplet  8") and "30.00" in lines[4]
  records = _csv(analyze.analyze_paths([str(tmp_path)], "csv", list_runs=True)[0])
  assert [r["directory"] for r in records] == [*few, metric[1], metric[0]]
  assert records[0]["test_accuracy"] == "90.0" and records[0]["test_map_at_r"] == ""
  assert float(records[2]["test_map_at_r"]) == pytest.approx(45.0) and records[2]["test_accuracy"] == ""


def test_list_shows_the_re_tests_evaluate_recorded_in_metric_learning_runs(tmp_path):
  """A re-test's record holds each fold model's test and, with several, their concatenation; with one, its own."""
  runs = [write_dml_run(tmp_path / "one", "triplet", 0, 0.3), write_dml_run(tmp_path / "four", "triplet", 1, 0.4,
                                                                          folds=4)]
  one = {"map_at_r": 0.31, "r_precision": 0.42, "precision_at_1": 0.63}
  (tmp_path / "one" / "test_best_retrieval.json").write_text(json.dumps(
      {"separated": [{"fold": 0, "dim": 64, "test": one}], "checkpoint": "best", "checkpoint_steps": [20]}))
  (tmp_path / "four" / "test_last_retrieval.json").write_text(json.dumps(
      {"separated": [{"fold": k, "dim": 64, "test": one} for k in range(4)], "checkpoint": "last",
       "checkpoint_steps": [30, 30, 30, 30], "concatenated": {"dim": 256, "test": {**one, "map_at_r": 0.5}}}))
  text, _ = analyze.analyze_paths([str(tmp_path)], list_runs=True)
  retests = text.split("\n\n")[-1].splitlines()
  assert retests[0].startswith("Re-tests python -m fewshot.evaluate recorded in the runs")
  assert retests[3].split() == [runs[1], "test_last_retrieval.json", "last", "30,", "30,", "30,", "30", "50.00",
                                "42.00", "63.00"]
  assert retests[4].split() == [runs[0], "test_best_retrieval.json", "best", "20", "31.00", "42.00", "63.00"]
  records = _csv(analyze.analyze_paths([str(tmp_path)], "csv", list_runs=True)[0])
  assert [(r["directory"], r["measurement"]) for r in records] == [
      (runs[1], "results.json"), (runs[0], "results.json"), (runs[1], "test_last_retrieval.json"),
      (runs[0], "test_best_retrieval.json")]
  assert float(records[3]["test_r_precision"]) == pytest.approx(42.0) and records[3]["best_epoch"] == ""


def test_list_shows_the_tests_on_few_shot_episodes_evaluate_recorded_in_metric_learning_runs(tmp_path):
  """A test on episodes reads as the concatenation's where a run has several fold models, else as its one model's;
  without such records the listing keeps its columns.
  """
  runs = [write_dml_run(tmp_path / "one", "triplet", 0, 0.3), write_dml_run(tmp_path / "four", "triplet", 1, 0.4,
                                                                          folds=4)]
  before = _csv(analyze.analyze_paths([str(tmp_path)], "csv", list_runs=True)[0])
  test = lambda accuracy: {"test_accuracy": accuracy, "test_ci95": 1.5, "test_episodes": 30}  # noqa: E731
  options = {"way": 3, "shot": 1, "query": 4, "episodes": 30, "seed": 7}
  (tmp_path / "one" / "test_best_episodes_3w1s4q_30ep_seed7.json").write_text(json.dumps(
      {"separated": [{"fold": 0, "dim": 64, "test": test(61.0)}], "checkpoint": "best", "options": options}))
  (tmp_path / "four" / "test_last_episodes_3w1s4q_30ep_seed7.json").write_text(json.dumps(
      {"separated": [{"fold": k, "dim": 64, "test": test(50.0)} for k in range(4)], "checkpoint": "last",
       "concatenated": {"dim": 256, "test": test(72.25)}, "options": options}))
  text, _ = analyze.analyze_paths([str(tmp_path)], list_runs=True)
  lines = text.split("\n\n")[-1].splitlines()
  assert lines[0].startswith("Few-shot episodes python -m fewshot.evaluate tested the runs on")
  shape = ["3-way", "1-shot", "4-query,", "seed", "7", "30"]
  assert lines[3].split() == [runs[1], "test_last_episodes_3w1s4q_30ep_seed7.json", "last", *shape, "72.25", "±", "1.50"]
  assert lines[4].split() == [runs[0], "test_best_episodes_3w1s4q_30ep_seed7.json", "best", *shape, "61.00", "±", "1.50"]
  records = _csv(analyze.analyze_paths([str(tmp_path)], "csv", list_runs=True)[0])
  assert records[:2] == [{**r, "test_accuracy": "", "test_ci95": "", "test_episodes": "", "test_way": "", "shot": "",
                          "test_query": "", "test_seed": ""} for r in before]
  assert [(r["directory"], r["measurement"], r["test_accuracy"], r["test_way"], r["test_seed"]) for r in records[2:]] == [
      (runs[1], "test_last_episodes_3w1s4q_30ep_seed7.json", "72.25", "3", "7"),
      (runs[0], "test_best_episodes_3w1s4q_30ep_seed7.json", "61.0", "3", "7")]


def test_a_mix_of_the_two_kinds_is_refused_in_one_line(tmp_path, assert_one_line_error):
  few = write_run(tmp_path / "runs" / "fewshot", "dr", results={"test_accuracy": 90.0, "test_ci95": 1.0})
  metric = write_dml_run(tmp_path / "runs" / "metric")
  fragments = (f"{few} is a few-shot run and {metric} a metric-learning one", "analyze or plot each kind's runs apart")
  assert_one_line_error(_command(tmp_path / "runs"), *fragments)
  assert_one_line_error(_command(few, "--", metric), *fragments)
  assert_one_line_error(subprocess.run([sys.executable, "-m", "fewshot.plot", tmp_path / "runs", "--out",
                                        tmp_path / "figs"], capture_output=True, text=True), *fragments)
  assert not (tmp_path / "figs").exists()


def test_what_metric_learning_runs_cannot_use_is_refused(tmp_path):
  runs = [write_dml_run(tmp_path / f"{loss}", loss) for loss in ("triplet", "contrastive")]
  with pytest.raises(ConfigError, match="--pairs compares few-shot runs .*: leave it out"):
    analyze.analyze_paths(runs, pairing="all")
  with pytest.raises(ConfigError, match="--measurement chooses a python -m fewshot.evaluate record; metric-learning"):
    analyze.analyze_paths(runs, measurement="test_*.json")
