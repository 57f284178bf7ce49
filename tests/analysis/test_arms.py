"""Two arms of seed groups: accuracy across seeds, per-seed geometric means, pooled and per-seed tables."""

import subprocess
import sys

import numpy as np
import pytest
import scipy.stats

from fewshot import analyze
from fewshot.analysis import arms, stats
from fewshot.config import Config
from fewshot.errors import ConfigError
from fewshot.records.reading import read_run

from run_fixtures import write_run


def _arm(tmp_path, name, head, accuracies, norm_ratio_scale, **config):
  paths = []
  for seed, accuracy in enumerate(accuracies):
    rng = np.random.default_rng(100 * seed + len(name))
    values = {"norm_ratio": norm_ratio_scale * rng.uniform(0.9, 1.1, 20)}
    paths.append(write_run(tmp_path / f"{name}_seed{seed}", head, values, seed=seed,
                           results={"test_accuracy": accuracy, "test_ci95": 0.5}, run_seed=seed, **config))
  return paths


def test_arms_compare_per_seed_accuracies_and_geometric_means_against_scipy(tmp_path):
  acc_a, acc_b = [90.1, 91.3, 89.7, 90.8], [92.4, 93.0, 91.9, 92.7, 93.3]
  a = _arm(tmp_path, "A", "softmax", acc_a, 0.5)
  b = _arm(tmp_path, "B", "dr", acc_b, 0.8)
  text = analyze.analyze_arms(a, b)
  # Accuracy: t-interval of each arm, Welch interval of the difference, Mann-Whitney U on the seeds' accuracies.
  t = scipy.stats.t.ppf(0.975, 3) * np.std(acc_a, ddof=1) / 2
  assert f"{np.mean(acc_a):.2f} ± {t:.2f}" in text
  welch = scipy.stats.ttest_ind(acc_b, acc_a, equal_var=False).confidence_interval(0.95)
  assert f"{np.mean(acc_b) - np.mean(acc_a):+.2f} ± {(welch.high - welch.low) / 2:.2f}" in text
  # A few seeds without ties: the exact distribution (scipy's "exact"), and the table says so.
  p = scipy.stats.mannwhitneyu(acc_a, acc_b, alternative="two-sided", method="exact").pvalue
  assert p == 2 / scipy.special.comb(9, 4)  # every B seed beats every A seed: 2 of the C(9, 4) rank splits
  assert f"{analyze.format_p(p)}*" in text and "Mann-Whitney U: exact distribution" in text
  # The 4 seeds both arms have, paired: every sign pattern of their differences (B's seed 4 has no partner).
  differences = np.subtract(acc_b[:4], acc_a)
  patterns = np.array(np.meshgrid(*[[1.0, -1.0]] * 4)).reshape(4, -1)
  paired_p = np.mean(np.abs(differences @ patterns) >= abs(differences.sum()) * (1 - 1e-12))
  runs = [[read_run(x, Config.from_dict) for x in arm] for arm in (a, b)]
  b_row = arms.accuracy_table(*runs).rows[1]
  assert paired_p == 2 / 16 and b_row[-1].text == analyze.format_p(paired_p) and not b_row[-1].significant
  assert arms.csv_records(*runs)[0]["paired_p"] == paired_p  # the CSV carries what the table shows
  # Per-seed geometric means of the norm ratio, compared across seeds.
  runs_a = [read_run(x, Config.from_dict) for x in a]
  runs_b = [read_run(x, Config.from_dict) for x in b]
  gm_a = [scipy.stats.gmean(r.values("norm_ratio")) for r in runs_a]
  gm_b = [scipy.stats.gmean(r.values("norm_ratio")) for r in runs_b]
  np.testing.assert_allclose(arms.seed_means(runs_a, "norm_ratio"), gm_a, rtol=1e-12)
  p_gm = scipy.stats.mannwhitneyu(gm_a, gm_b, alternative="two-sided", method="exact").pvalue
  table = arms.seed_means_table(runs_a, runs_b)
  row = next(r for r in table.rows if r[0].text == "norm ratio")
  assert row[5].text == analyze.format_p(p_gm) and row[5].significant and row[6].text == "exact distribution"
  # Pooled: every checkpoint of an arm; then seed by seed for the 4 seeds both arms have.
  pairs = analyze.compare_arms(runs_a, runs_b)
  assert [x.label_a for x in pairs] == ["ProtoNet_S (pooled)"] + [f"ProtoNet_S seed {s}" for s in range(4)]
  pooled = stats.compare_runs(np.concatenate([r.values("norm_ratio") for r in runs_a]),
                              np.concatenate([r.values("norm_ratio") for r in runs_b]), "norm_ratio")
  assert pairs[0].comparisons["norm_ratio"] == pooled and pooled.n_a == 80 and pooled.n_b == 100


def test_arms_of_different_shapes_or_an_empty_arm_are_refused(tmp_path):
  a = _arm(tmp_path, "A", "softmax", [90.0, 91.0], 1.0)
  b = _arm(tmp_path, "B", "dr", [92.0, 93.0], 1.0, shot=5)
  with pytest.raises(ConfigError, match="differ in --shot"):
    analyze.analyze_arms(a, b)
  with pytest.raises(ConfigError, match="arm B has no runs"):
    analyze.analyze_arms(a, [])


def test_the_command_line_splits_arms_at_the_double_dash(tmp_path, assert_one_line_error):
  a = _arm(tmp_path, "A", "softmax", [90.0, 91.0, 92.0], 1.0)
  b = _arm(tmp_path, "B", "dr", [93.0, 94.0, 95.0], 1.0)
  done = subprocess.run([sys.executable, "-m", "fewshot.analyze", "--format=markdown", *a, "--", *b],
                        capture_output=True, text=True)
  assert done.returncode == 0, done.stderr
  assert "### Test accuracy across seeds" in done.stdout and "ProtoNet_DR seed 2" in done.stdout
  one = subprocess.run([sys.executable, "-m", "fewshot.analyze", *a, "--"], capture_output=True, text=True)
  assert_one_line_error(one, "arm B has no runs")
