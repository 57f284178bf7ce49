"""python -m fewshot.analyze: the paper's tables of two or more runs, in every format, and bad input."""

import csv
import io
import re
import subprocess
import sys

import numpy as np
import pytest
import scipy.stats

from fewshot import analyze
from fewshot.analysis import stats
from fewshot.config import Config
from fewshot.errors import ConfigError, RunDirError
from fewshot.records.reading import protocol_warning, read_run, run_labels
from fewshot.records.rundir import RunDir

from run_fixtures import N, write_dml_run, write_run


@pytest.fixture
def separated(tmp_path):
  """Run B's norm ratios are all larger than run A's; the other measures overlap."""
  rng = np.random.default_rng(1)
  a = write_run(tmp_path / "A", "softmax", {"norm_ratio": rng.uniform(0.1, 0.3, N)}, seed=2)
  b = write_run(tmp_path / "B", "dr", {"norm_ratio": rng.uniform(0.5, 0.9, N)}, seed=3,
                results={"test_accuracy": 91.234, "test_ci95": 0.567})
  return a, b


def _runs(*paths):
  return [read_run(p, Config.from_dict) for p in paths]


def _csv(text):
  return list(csv.DictReader(io.StringIO(text)))


def _assert_no_nan(text):
  assert not re.search(r"\bnan\b", text, flags=re.IGNORECASE), text


def test_clearly_larger_norm_ratio_is_significant(separated):
  runs = _runs(*separated)
  (pair,) = analyze.compare(runs)
  comparison = pair.comparisons["norm_ratio"]
  assert comparison.mannwhitney_p < 0.05 and comparison.mannwhitney_significant
  assert comparison.geometric_mean_b > comparison.geometric_mean_a
  text = analyze.report(runs, fmt="table")
  assert f"{analyze.format_p(comparison.mannwhitney_p)}*" in text.split("norm ratio\n")[1].split("\n\n")[0]
  assert f"**{analyze.format_p(comparison.mannwhitney_p)}**" in analyze.report(runs, fmt="markdown")
  assert rf"\textbf{{{analyze.format_p(comparison.mannwhitney_p)}}}" in analyze.report(runs, fmt="latex")
  (row,) = [r for r in _csv(analyze.report(runs, fmt="csv")) if r["measure"] == "norm_ratio"]
  assert row["mannwhitney_significant"] == "True" and float(row["mannwhitney_p"]) < 0.05


def test_identical_runs_are_not_significant(tmp_path):
  values = {m: np.random.default_rng(5).lognormal(0.0, 0.05, N) for m in stats.MEASURES}
  runs = _runs(write_run(tmp_path / "A", "softmax", values), write_run(tmp_path / "B", "dr", values))
  (pair,) = analyze.compare(runs)
  for measure, c in pair.comparisons.items():
    assert c.mannwhitney_p == pytest.approx(1.0, abs=0.02) and not c.mannwhitney_significant, measure
    if measure != "norm_ratio":
      assert c.fisher_p == pytest.approx(1.0) and not c.fisher_significant
  assert "*" not in analyze.report(runs, fmt="table").replace("* p < 0.05", "")
  assert "**" not in analyze.report(runs, fmt="markdown")
  assert r"\textbf" not in analyze.report(runs, fmt="latex")


def test_numbers_equal_compare_runs_and_scipy(separated):
  runs = _runs(*separated)
  (pair,) = analyze.compare(runs)
  records = {r["measure"]: r for r in _csv(analyze.report(runs, fmt="csv"))}
  text = analyze.report(runs, fmt="table")
  for measure in stats.MEASURES:
    a, b = runs[0].values(measure), runs[1].values(measure)
    assert pair.comparisons[measure] == stats.compare_runs(a, b, measure)
    # Independently of fewshot.analysis.stats:
    p_mwu = scipy.stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic", use_continuity=True).pvalue
    record = records[measure]
    assert float(record["mannwhitney_p"]) == pytest.approx(p_mwu, rel=1e-12)
    assert float(record["geometric_mean_a"]) == pytest.approx(np.exp(np.mean(np.log(a))), rel=1e-12)
    assert float(record["geometric_mean_b"]) == pytest.approx(np.exp(np.mean(np.log(b))), rel=1e-12)
    assert int(record["n_a"]) == int(record["n_b"]) == N
    assert analyze.format_p(p_mwu) in text
    if measure == "norm_ratio":
      assert record["fisher_p"] == record["proportion_a"] == ""
      continue
    below = lambda x: int(np.sum(x < 1))  # noqa: E731
    p_fisher = scipy.stats.fisher_exact([[below(a), below(b)], [N - below(a), N - below(b)]]).pvalue
    assert float(record["fisher_p"]) == pytest.approx(p_fisher, rel=1e-12)
    properly = (a < 1) if stats.PROPERLY_LEARNED[measure] == "<1" else (a > 1)
    assert float(record["proportion_a"]) == pytest.approx(properly.mean())
    assert analyze.format_proportion(properly.mean()) in text


def _markdown_tables(text):
  """The cells of each markdown table (runs of lines starting with ``|``), split on unescaped bars."""
  tables, in_table = [], False
  for line in text.splitlines():
    if line.startswith("|") and not in_table:
      tables.append([])
    in_table = line.startswith("|")
    if in_table:
      tables[-1].append(re.split(r"(?<!\\)\|", line.strip())[1:-1])
  return tables


def test_every_format_parses(separated):
  runs = _runs(*separated)
  records = _csv(analyze.report(runs, fmt="csv"))
  assert [r["measure"] for r in records] == list(stats.MEASURES)
  assert set(records[0]) == set(analyze.CSV_FIELDS)

  tables = _markdown_tables(analyze.report(runs, fmt="markdown"))
  assert len(tables) == 1 + len(stats.MEASURES)
  # Runs table: 11 columns; norm ratio: 10 (no proportions); the alpha ratios: 13.
  assert [len(t[0]) for t in tables] == [11, 10, 13, 13, 13]
  for table in tables:
    assert all(len(row) == len(table[0]) for row in table) and len(table) == 2 + len(runs) - (table is not tables[0])
    assert set("".join(table[1])) <= set("-")

  latex = analyze.report(runs, fmt="latex")
  assert latex.count(r"\begin{tabular}") == latex.count(r"\end{tabular}") == 1 + len(stats.MEASURES)
  for block in latex.split(r"\begin{tabular}{")[1:]:
    spec, body = block.split("}", 1)
    rows = [line for line in body.split(r"\end{tabular}")[0].splitlines() if line.endswith(r"\\")]
    assert rows and all(line.count(" & ") == len(spec) - 1 for line in rows)
  assert "ProtoNet\\_DR" in latex and "91.23 $\\pm$ 0.57" in latex

  text = analyze.report(runs, fmt="table")
  assert "91.23 ± 0.57" in text and "ProtoNet_S" in text and "ProtoNet_DR" in text


def test_null_diagnostics_are_excluded_and_counted(tmp_path):
  con = list(np.random.default_rng(7).lognormal(0.0, 0.02, N))
  for i in (0, 4, 9):
    con[i] = None
  a = write_run(tmp_path / "A", "softmax", seed=1)
  b = write_run(tmp_path / "B", "dr", {"con_alpha": con}, seed=2)
  runs = _runs(a, b)
  c = analyze.compare(runs)[0].comparisons["con_alpha"]
  defined = np.array([v for v in con if v is not None])
  assert (c.n_a, c.n_b, c.n_undefined_a, c.n_undefined_b) == (N, N - 3, 0, 3)
  assert c.geometric_mean_b == pytest.approx(np.exp(np.mean(np.log(defined))), rel=1e-12)
  assert c.proportion_b == pytest.approx(np.mean(defined < 1))
  (record,) = [r for r in _csv(analyze.report(runs, fmt="csv")) if r["measure"] == "con_alpha"]
  assert (record["n_b"], record["n_undefined_b"]) == (str(N - 3), "3")


def test_too_few_checkpoints_say_so_and_never_nan(tmp_path):
  a = write_run(tmp_path / "A", "softmax", n=1)
  b = write_run(tmp_path / "B", "dr", {m: [None] * 3 for m in stats.MEASURES}, n=3)
  runs = _runs(a, b)
  for comparison in analyze.compare(runs)[0].comparisons.values():
    assert "too few values for a test" in comparison.note and comparison.mannwhitney_p is None
  for fmt in analyze.FORMATS:
    text = analyze.report(runs, fmt=fmt)
    _assert_no_nan(text)
    assert text.count("too few values for a test") == len(stats.MEASURES)


def test_pairs_first_against_each_or_all(tmp_path):
  paths = [write_run(tmp_path / name, head, seed=i) for i, (name, head) in enumerate([("A", "softmax"), ("B", "dr"), ("C", "dr")])]
  runs = _runs(*paths)
  assert [(p.path_a, p.path_b) for p in analyze.compare(runs, "first")] == [(paths[0], paths[1]), (paths[0], paths[2])]
  assert len(analyze.compare(runs, "all")) == 3
  # Two ProtoNet_DR runs are told apart by their directories.
  assert run_labels(runs) == ["ProtoNet_S", "ProtoNet_DR [B]", "ProtoNet_DR [C]"]
  with pytest.raises(ConfigError, match="--pairs"):
    analyze.compare(runs, "some")


def test_different_protocols_warn_but_still_compare(tmp_path):
  a = write_run(tmp_path / "A", "softmax")
  b = write_run(tmp_path / "B", "dr", shot=5, dataset="strokes")
  out = tmp_path / "out" / "table.csv"
  result = subprocess.run([sys.executable, "-m", "fewshot.analyze", a, b, "--format=csv", f"--out={out}"],
                          capture_output=True, text=True)
  assert result.returncode == 0, result.stderr
  warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
  assert len(warnings) == 1 and "dataset omniglot vs strokes" in warnings[0] and "shot 1 vs 5" in warnings[0]
  assert f"wrote {out}" in result.stdout
  assert len(_csv(out.read_text())) == len(stats.MEASURES)
  assert protocol_warning(_runs(a, write_run(tmp_path / "C", "dr"))) is None



@pytest.mark.parametrize("which, fragment", [("missing", "does not exist"), ("empty", "is empty")])
def test_missing_or_empty_run_directory_exits_2(tmp_path, which, fragment, assert_one_line_error):
  a = write_run(tmp_path / "A", "softmax")
  bad = tmp_path / which
  if which == "empty":
    bad.mkdir()
  result = subprocess.run([sys.executable, "-m", "fewshot.analyze", a, str(bad)], capture_output=True, text=True)
  assert_one_line_error(result, fragment, str(bad))


def test_other_bad_runs_are_run_directory_errors(tmp_path):
  a = write_run(tmp_path / "A", "softmax")
  no_metrics = tmp_path / "no_metrics"
  RunDir(no_metrics).write_config({"dataset": "omniglot"})
  (tmp_path / "no_config").mkdir()
  (tmp_path / "no_config" / "notes.txt").write_text("x")
  broken = write_run(tmp_path / "broken", "dr")
  with open(f"{broken}/metrics.jsonl", "a") as f:
    f.write("{not json\n")
  for path, message in [(no_metrics, "has no metrics"), (tmp_path / "no_config", "no config.json"),
                        (broken, "is not JSON")]:
    with pytest.raises(RunDirError, match=message):
      analyze.analyze([a, str(path)])
  with pytest.raises(ConfigError, match="at least two run directories"):
    analyze.analyze([a])


def _dml_run(path, loss: str, seed: int, map_at_r: float, folds: int = 1):
  """A metric-learning run's records as fewshot.dml.train leaves them (no JAX)."""
  return write_dml_run(path, loss, seed, map_at_r, folds)


@pytest.mark.parametrize("folds", [1, 4])
def test_two_arms_of_metric_learning_runs_are_compared_by_their_test_retrieval(tmp_path, folds):
  """Issue 40, item 4: analyze refused every metric-learning run. MAP@R is the primary measure; a run of several
  fold models is judged by its concatenated embedding, as Musgrave et al. report it.
  """
  import scipy.stats  # noqa: PLC0415

  a_values, b_values = [0.30, 0.32, 0.31], [0.33, 0.36, 0.32]
  a = [_dml_run(tmp_path / f"triplet_{k}", "triplet", k, v, folds) for k, v in enumerate(a_values)]
  b = [_dml_run(tmp_path / f"contrastive_{k}", "contrastive", k, v, folds) for k, v in enumerate(b_values)]
  text = analyze.analyze_arms(a, b)
  differences = 100 * (np.array(b_values) - np.array(a_values))
  half = scipy.stats.t.ppf(0.975, 2) * differences.std(ddof=1) / np.sqrt(3)
  assert text.splitlines()[0] == (
      "Verdict: too few seeds to say: paired by seed (3 shared seeds), exact sign-flip cannot give p below 0.25 at "
      f"this n (level 0.05); B − A {differences.mean():+.2f} ± {half:.2f} points of test MAP@R (t-interval of the "
      "paired differences).")
  mann_whitney = scipy.stats.mannwhitneyu(a_values, b_values, alternative="two-sided", method="exact").pvalue
  assert "0: 30.00, 1: 32.00, 2: 31.00" in text and f"{mann_whitney:.4f}" in text and "0.2500" in text
  assert "precision@1" in text and "0: 63.00, 1: 66.00, 2: 62.00" in text


def test_metric_learning_arms_refuse_what_they_cannot_use(tmp_path):
  a = [_dml_run(tmp_path / "a", "triplet", 0, 0.3)]
  with pytest.raises(ConfigError, match="--measurement chooses a python -m fewshot.evaluate record; metric-learning"):
    analyze.analyze_arms(a, [_dml_run(tmp_path / "b", "contrastive", 0, 0.3)], measurement="test_*")
  # A mix of the two kinds is refused in one line naming a run of each.
  with pytest.raises(ConfigError, match=f"{tmp_path / 'fewshot_seed0'} is a few-shot run and {tmp_path / 'a'} a "
                     "metric-learning one"):
    analyze.analyze_arms(a, [write_run(tmp_path / "fewshot_seed0", "dr", seed=0)])


def test_an_arm_of_a_method_without_diagnostics_says_so_instead_of_a_table_of_dashes(tmp_path):
  from fewshot.analysis import arm_tables  # noqa: PLC0415

  path = write_run(tmp_path / "maml_seed0", "softmax", seed=0, results={
      "test_accuracy": 90.0, "test_ci95": 1.0, "diagnostics": "not recorded: MAML adapts per episode"})
  table = arm_tables.diagnostics_table(analyze.read_runs([path], Config.from_dict), "MAML, 1 seed")
  assert [[c.text for c in row] for row in table.rows] == [["not recorded: MAML adapts per episode"]]
