"""python -m fewshot.analyze on one arm of seeds, a folder of runs (arms by configuration), a listing, and LaTeX."""

import csv
import io
import json
import pathlib
import re
import subprocess
import sys
import zlib

import numpy as np
import pytest
import scipy.stats

from fewshot import analyze
from fewshot.analysis import arm_tables
from fewshot.analysis.measures import DIAGNOSTICS, LABELS
from fewshot.analysis.tables import latex_escape
from fewshot.config import Config
from fewshot.errors import ConfigError
from fewshot.records.reading import read_runs
from fewshot.records.rundir import RunDir

N = 12  # checkpoints per synthetic run


def write_run(path, head="softmax", seed=0, accuracy=None, scale=1.0, n=N, **config):
  """A few-shot run directory: diagnostics drawn near ``scale`` (seeded by the path), ``accuracy`` in results.json."""
  rng = np.random.default_rng(zlib.crc32(str(path).encode()))
  rundir = RunDir(path)
  rundir.write_config({**dict(dataset="omniglot", backbone="conv4", head=head, classifier="proto", way=5, shot=1,
                              query=16, episodes=100 * N, seed=seed), **config})
  rows = [dict(episode=100 * (i + 1), train_loss=1.0, val_accuracy=60.0 + i,
               **{d.name: float(scale * rng.lognormal(0.0, 0.05)) for d in DIAGNOSTICS}) for i in range(n)]
  rundir.write_metrics(rows)
  if accuracy is not None:
    rundir.write_results({"model": "x", "test_accuracy": accuracy, "test_ci95": 0.5, "test_episodes": 600,
                          "best_episode": 100 * (n - 2)})
  return str(path)


def _command(*args):
  return subprocess.run([sys.executable, "-m", "fewshot.analyze", *map(str, args)], capture_output=True, text=True)


def _csv(text):
  return list(csv.DictReader(io.StringIO(text)))


def test_one_arm_of_seeds_gives_its_t_interval_and_each_seeds_diagnostics(tmp_path):
  accuracies = [90.1, 91.3, 89.7, 90.8]
  paths = [write_run(tmp_path / f"A_seed{s}", "dr", s, a) for s, a in enumerate(accuracies)]
  done = _command(*paths)
  assert done.returncode == 0, done.stderr
  half = scipy.stats.t.ppf(0.975, 3) * np.std(accuracies, ddof=1) / 2
  assert f"{np.mean(accuracies):.2f} ± {half:.2f}" in done.stdout
  assert "0: 90.10, 1: 91.30, 2: 89.70, 3: 90.80" in done.stdout and f"{tmp_path}/A_seed*" in done.stdout
  # Every diagnostic: a column per seed (its geometric mean over the checkpoints), then the median of the seeds.
  (arm,) = arm_tables.arms_of(read_runs(paths, Config.from_dict))
  table = arm_tables.diagnostics_table(arm, "x")
  assert [r[0].text for r in table.rows] == [d.label for d in DIAGNOSTICS]
  assert table.headers == ("diagnostic", "seed 0", "seed 1", "seed 2", "seed 3", "median across seeds")
  means = [scipy.stats.gmean([row["con_div"] for row in RunDir(p).read_metrics()]) for p in paths]
  row = next(r for r in table.rows if r[0].text == LABELS["con_div"])
  assert [c.text for c in row[1:]] == [f"{m:.5f}" for m in means] + [f"{np.median(means):.5f}"]
  assert row[1].text in done.stdout
  # One run is an arm of one seed: its accuracy, no interval.
  one = _command(paths[0])
  row = one.stdout.splitlines()[3]
  assert one.returncode == 0 and "0: 90.10" in row and "±" not in row and "ProtoNet_DR, 1 seed:" in one.stdout


def test_a_folder_is_read_at_any_depth_grouped_into_arms_and_two_arms_compared(tmp_path):
  folder = tmp_path / "paperq"
  s = [write_run(folder / "softmax" / f"S_seed{k}", "softmax", k, 90.0 + k, data_dir=f"/data{k}") for k in range(3)]
  dr = [write_run(folder / "deep" / "dr" / f"DR_seed{k}", "dr", k, 93.0 + k) for k in range(3)]
  RunDir(folder / "started").write_config({"dataset": "omniglot", "head": "dr", "seed": 9})  # no metrics row yet
  RunDir(folder / "dml").write_config({"dataset": "strokes", "loss": "triplet", "folds": 4})  # started: no fold rows
  (folder / "notes.txt").write_text("not a run")
  done = _command(folder)
  assert done.returncode == 0, done.stderr
  assert done.stderr.count("\n") == 1 and done.stderr.startswith("warning: left out 2 runs:")
  assert "dml (no metrics row yet)" in done.stderr and "started (no metrics row yet)" in done.stderr
  # The overview names arm A (the default softmax head) and arm B; --data_dir does not split an arm.
  verdict, overview = done.stdout.split("\n\n")[0], done.stdout.split("\n\n")[1].splitlines()
  assert verdict.startswith("Verdict: ")  # two arms: one line answers first
  assert overview[0] == "2 arms: test accuracy across seeds"
  assert overview[3].startswith("A    ProtoNet_S ") and overview[4].startswith("B    ProtoNet_DR")
  # Then exactly what A -- B prints: the same verdict, then the same tables.
  verdict_ab, tables_ab = analyze.analyze_arms(s, dr).split("\n\n", 1)
  assert verdict == verdict_ab and done.stdout.split("\n\n", 2)[2] == tables_ab
  as_csv = _command(folder, "--format=csv")
  assert as_csv.stdout == analyze.analyze_arms(s, dr, fmt="csv")
  # An arm after -- may be a folder of its seeds too.
  assert analyze.analyze_arms([str(folder / "softmax")], [str(folder / "deep")]) == analyze.analyze_arms(s, dr)


def test_more_than_two_arms_list_each_arm_and_its_diagnostics_and_csv_has_a_record_per_run(tmp_path):
  for shot in (1, 5):
    for head in ("softmax", "dr"):
      for k in range(2):
        write_run(tmp_path / "runs" / f"{head}_{shot}s_seed{k}", head, k, 80.0 + 10 * (head == "dr") + shot + k,
                  shot=shot)
  text, warning = analyze.analyze_paths([str(tmp_path / "runs")])
  assert warning is None
  assert text.startswith("4 arms: test accuracy across seeds")
  # Arms in the order of their options: head before shot (the configuration's order), defaults first.
  assert [re.split(r"\s{2,}", line)[1] for line in text.splitlines()[3:7]] == \
      ["ProtoNet_S, shot 1", "ProtoNet_S, shot 5", "ProtoNet_DR, shot 1", "ProtoNet_DR, shot 5"]
  for name in "ABCD":
    assert f"Arm {name}: ProtoNet_" in text
  records = _csv(analyze.analyze_paths([str(tmp_path / "runs")], fmt="csv")[0])
  assert len(records) == 8 and list(records[0])[:5] == ["arm", "configuration", "head", "shot", "seed"]
  first = [r for r in records if r["arm"] == "A"]
  assert [r["seed"] for r in first] == ["0", "1"] and [r["test_accuracy"] for r in first] == ["81.0", "82.0"]
  half = scipy.stats.t.ppf(0.975, 1) * np.std([81.0, 82.0], ddof=1) / np.sqrt(2)
  assert all(float(r["arm_mean_test_accuracy"]) == pytest.approx(81.5) for r in first)
  assert all(float(r["arm_t95_half_width"]) == pytest.approx(half) for r in first)
  assert float(first[0]["geometric_mean_norm_ratio"]) > 0


def test_a_listing_shows_only_the_options_that_vary_and_each_runs_results(tmp_path):
  a = write_run(tmp_path / "a", "softmax", 0, 91.234, learning_rate=1e-3)
  b = write_run(tmp_path / "b", "dr", 1, 92.5, learning_rate=1e-4, data_dir="/elsewhere")
  c = write_run(tmp_path / "c", "dr", 2, None, n=3)  # still training: no test accuracy yet
  text, _ = analyze.analyze_paths([a, b, c], list_runs=True)
  lines = text.splitlines()
  assert lines[1].split() == ["run", "head", "learning_rate", "seed", "test", "accuracy", "(%)", "best", "episode",
                              "episodes", "trained"]
  assert lines[3].split() == [a, "softmax", "0.001", "0", "91.23", "±", "0.50", "1000", "1200"]
  assert lines[5].split() == [c, "dr", "0.001", "2", "—", "—", "300"]
  records = _csv(analyze.analyze_paths([str(tmp_path)], "csv", list_runs=True)[0])
  assert list(records[0]) == ["directory", "measurement", "head", "learning_rate", "seed", "test_accuracy",
                              "test_ci95", "best_episode", "episodes_trained", "test_episodes", "test_way", "shot",
                              "test_query", "test_seed"]
  assert {r["measurement"] for r in records} == {"results.json"}  # no python -m fewshot.evaluate measurement yet
  listing = analyze.analyze_paths([a, b, c], list_runs=True)[0]
  assert "p < 0.05" not in listing and "None" not in listing  # nothing is marked, so no key to the mark
  latex = analyze.analyze_paths([a, b, c], "latex", list_runs=True)[0]
  assert r"\begin{tabular}{llrrrrr}" in latex and r"\toprule" in latex and "significant" not in latex
  assert records[1]["test_accuracy"] == "92.5" and records[2]["test_accuracy"] == "" and records[2]["seed"] == "2"
  for fmt in ("markdown", "latex"):
    assert "91.23" in analyze.analyze_paths([a, b, c], fmt, list_runs=True)[0]


def test_runs_of_their_own_configurations_still_compare_in_pairs_and_pairs_of_arms_are_refused(tmp_path):
  a, b = write_run(tmp_path / "a", "softmax"), write_run(tmp_path / "b", "dr")
  assert analyze.analyze_paths([a, b])[0] == analyze.analyze([a, b])[0]
  assert analyze.analyze_paths([a, b], pairing="all")[0] == analyze.analyze([a, b], "all")[0]
  seeds = [write_run(tmp_path / f"s{k}", "softmax", k) for k in range(2)]
  with pytest.raises(ConfigError, match="--pairs compares runs named one by one"):
    analyze.analyze_paths(seeds, pairing="first")
  with pytest.raises(ConfigError, match="pass one of them"):
    analyze.analyze_paths([a, b], pairing="all", list_runs=True)
  copy = write_run(tmp_path / "copy" / "s0", "softmax", 0)
  with pytest.raises(ConfigError, match="are two runs of one configuration and seed whose records differ"):
    analyze.analyze_paths([*seeds, copy])


@pytest.mark.parametrize("args, fragments", [
    (["A", "--", "B", "--format", "csv"], ["--format csv comes after --", "put flags before --"]),
    (["A", "--", "B", "--out=x.csv"], ["--out=x.csv comes after --"]),
    (["empty_folder"], ["holds no run directory"]),
    (["A", "--list", "--", "B"], ["--list and --pairs apply to runs named without --"]),
])
def test_bad_command_lines_are_one_line_errors(tmp_path, args, fragments, assert_one_line_error):
  write_run(tmp_path / "A", "softmax")
  write_run(tmp_path / "B", "dr")
  (tmp_path / "empty_folder" / "sub").mkdir(parents=True)
  (tmp_path / "empty_folder" / "sub" / "notes.txt").write_text("x")
  paths = [str(tmp_path / a) if a in ("A", "B", "empty_folder") else a for a in args]
  assert_one_line_error(_command(*paths), *fragments)


def _unescaped(line: str) -> list[str]:
  """pdflatex's special characters in a line that are not escaped or inside $...$ or a command's braces."""
  text = re.sub(r"\$[^$]*\$", "", line.replace(r"\$", ""))
  text = re.sub(r"\\(textbackslash|textasciitilde|textasciicircum|textbar|textbf|ldots)\{\}?", "", text)
  text = re.sub(r"\\[&%#_{}]", "", text)
  text = re.sub(r"\\([`'^~=u.\"rHvck])\{[A-Za-z]\}", "", text)  # an accented letter
  text = re.sub(r"\\(begin|end|caption|textbf)\{", "{", text).replace(r"\\", "")
  text = re.sub(r"\\(toprule|midrule|bottomrule)", "", text)
  text = text.replace(r"\centering", "")
  return re.findall(r"[%#_^~$\\]", text)


def test_latex_output_is_ascii_and_escapes_what_pdflatex_reads_as_commands(tmp_path):
  a = [write_run(tmp_path / "S_100%#&" / f"s_{k}", "softmax", k, 90.0 + k) for k in range(3)]
  b = [write_run(tmp_path / "DR~é^" / f"d_{k}", "dr", k, 93.0 + k) for k in range(3)]
  reports = [analyze.analyze_arms(a, b, fmt="latex"), analyze.analyze_paths([str(tmp_path)], "latex")[0],
             analyze.analyze_paths(a, "latex")[0], analyze.analyze_paths([*a, *b], "latex", list_runs=True)[0]]
  for latex in reports:
    assert all(ord(ch) < 128 for ch in latex), [ch for ch in latex if ord(ch) >= 128]
    assert latex.startswith("% needs \\usepackage{booktabs}\n")
    for line in latex.splitlines():
      assert line.startswith("%") or not _unescaped(line), line
    for block in latex.split(r"\begin{tabular}{")[1:]:  # every row has the columns' count of unescaped &
      spec, body = block.split("}", 1)
      rows = [line for line in body.split(r"\end{tabular}")[0].splitlines() if line.endswith(r"\\")]
      assert rows and all(len(re.findall(r"(?<!\\)&", line)) == len(spec) - 1 for line in rows)
  joined = "\n".join(reports)
  for expected in (r"B $-$ A $\pm$ 95\% Welch", r"Procrustes $\hat\alpha$", r"$\psi$ con", r"S\_100\%\#\&",
                   r"DR\textasciitilde{}\'{e}\textasciicircum{}", r"$\pm$"):
    assert expected in joined, expected
  assert latex_escape("α̂ — x − y ± ψ") == r"$\hat\alpha$ -- x $-$ y $\pm$ $\psi$"
  assert latex_escape("a|b<c>d\\") == r"a\textbar{}b$<$c$>$d\textbackslash{}"
  # Other characters by their code points, so that two paths stay two labels (both had read "runs/??").
  assert latex_escape("runs/运行") == "runs/[U+8FD0][U+884C]" != latex_escape("runs/试验")
  assert latex_escape("Åsa ñ") == r"\r{A}sa \~{n}"


def test_a_folder_is_read_not_written_and_out_holds_the_whole_output(tmp_path):
  run = write_run(tmp_path / "runs" / "x_seed0", "dr", 0, 90.0)
  before = {p.name: p.read_bytes() for p in (tmp_path / "runs" / "x_seed0").iterdir()}
  out = tmp_path / "out" / "arms.csv"
  done = _command(tmp_path / "runs", "--format=csv", f"--out={out}")
  assert done.returncode == 0 and done.stdout == f"wrote {out}\n"
  assert {p.name: p.read_bytes() for p in (tmp_path / "runs" / "x_seed0").iterdir()} == before
  assert [r["directory"] for r in _csv(out.read_text())] == [run]


def test_arms_trained_in_different_precisions_are_compared_with_a_warning(tmp_path):
  gpu = {"provenance": {"backend": "gpu"}}
  exact = [write_run(tmp_path / "exact" / f"s{k}", "softmax", k, 90.0 + k, **gpu) for k in range(2)]
  tf32 = [write_run(tmp_path / "tf32" / f"s{k}", "dr", k, 91.0 + k, precision="tensorfloat32", **gpu)
          for k in range(2)]
  text, warning = analyze.analyze_arms_warned(exact, tf32)
  assert text == analyze.analyze_arms(exact, tf32)
  assert warning == ("warning: the runs' backbones were computed in different precisions (float32 vs tensorfloat32 "
                     "on gpu; docs/numerics.md), so their embeddings differ beyond seed noise; comparing them anyway.")
  assert analyze.analyze_paths([str(tmp_path)])[1] == warning
  assert analyze.analyze_paths([exact[0], tf32[0]])[1] == warning
  # On a CPU every name computes float32, and a run from before the option (no precision, no provenance) ran there.
  cpu = [write_run(tmp_path / "cpu" / f"s{k}", "dr", k, 91.0 + k, precision="tensorfloat32",
                   provenance={"backend": "cpu"}) for k in range(2)]
  old = [write_run(tmp_path / "old" / f"s{k}", "softmax", k, 90.0 + k) for k in range(2)]
  assert analyze.analyze_arms_warned(exact, cpu)[1] is None and analyze.analyze_arms_warned(old, cpu)[1] is None


def test_the_csv_of_two_arms_carries_their_test_accuracy_and_per_seed_diagnostics(tmp_path):
  s = [write_run(tmp_path / f"S_seed{k}", "softmax", k, 90.0 + k) for k in range(3)]
  dr = [write_run(tmp_path / f"DR_seed{k}", "dr", k, 92.5 + 2 * k) for k in range(3)]
  records = {r["measure"]: r for r in _csv(analyze.analyze_arms(s, dr, fmt="csv"))}
  accuracy = records["test_accuracy"]
  assert accuracy["values_a"] == "0: 90.0; 1: 91.0; 2: 92.0" and accuracy["values_b"] == "0: 92.5; 1: 94.5; 2: 96.5"
  t = scipy.stats.t.ppf(0.975, 2)
  assert float(accuracy["mean_a"]) == pytest.approx(91.0) and float(accuracy["ci95_a"]) == pytest.approx(t / 3 ** 0.5)
  welch = scipy.stats.ttest_ind([92.5, 94.5, 96.5], [90.0, 91.0, 92.0], equal_var=False)
  assert float(accuracy["difference"]) == pytest.approx(3.5)
  assert float(accuracy["difference_ci95"]) == pytest.approx(welch.confidence_interval().high - 3.5)
  assert float(accuracy["mannwhitney_p"]) == pytest.approx(
      scipy.stats.mannwhitneyu([90.0, 91.0, 92.0], [92.5, 94.5, 96.5], method="exact").pvalue)
  geometric = lambda path: np.exp(np.mean(np.log([row["norm_ratio"] for row in RunDir(path).read_metrics()])))
  per_seed = [float(v.split(": ")[1]) for v in records["norm_ratio_seed_means"]["values_a"].split("; ")]
  np.testing.assert_allclose(per_seed, [geometric(p) for p in s], rtol=1e-12)
  assert {"norm_ratio", "con_alpha"} <= set(records)  # the per-checkpoint comparisons follow, as before


def test_a_listing_shows_what_evaluate_measured_beside_each_runs_results(tmp_path):
  run = write_run(tmp_path / "x_seed0", "dr", 0, 90.0)
  options = {"checkpoint": "best", "test_way": 5, "shot": 5, "test_query": 15, "seed": 0}
  (tmp_path / "x_seed0" / "test_best@1000_600ep_shot5.json").write_text(
      '{"model": "ProtoNet_DR", "test_accuracy": 97.5, "test_ci95": 0.2, "test_episodes": 600, "options": %s}'
      % str(options).replace("'", '"'))
  text = analyze.analyze_paths([run], list_runs=True)[0]
  assert "Measurements python -m fewshot.evaluate recorded in the runs" in text
  row = [line for line in text.splitlines() if "test_best@1000_600ep_shot5.json" in line][0]
  assert row.split()[2:] == ["best", "checkpoint,", "5-way", "5-shot", "15-query,", "seed", "0", "600", "97.50", "±",
                             "0.20"]
  records = _csv(analyze.analyze_paths([run], "csv", list_runs=True)[0])
  assert [(r["measurement"], r["test_accuracy"], r["shot"]) for r in records] == [
      ("results.json", "90.0", ""), ("test_best@1000_600ep_shot5.json", "97.5", "5")]


def test_arms_are_compared_by_an_evaluate_measurement_when_asked(tmp_path):
  def measure(run, step, accuracy):
    record = {"model": "x", "test_accuracy": accuracy, "test_ci95": 0.3, "test_episodes": 600,
              "options": {"checkpoint": "best", "test_way": 5, "shot": 5, "test_query": 15, "seed": 0}}
    (pathlib.Path(run) / f"test_best@{step}_600ep_shot5.json").write_text(json.dumps(record))

  s = [write_run(tmp_path / f"S_seed{k}", "softmax", k, 90.0 + k) for k in range(3)]
  dr = [write_run(tmp_path / f"DR_seed{k}", "dr", k, 92.5 + k) for k in range(3)]
  for k, run in enumerate(s + dr):
    measure(run, 1000 + 100 * k, 97.0 + k)  # each run's best checkpoint at its own episode
  records = {r["measurement"] if "measurement" in r else r["measure"]: r for r in _csv(
      analyze.analyze_arms(s, dr, fmt="csv", measurement="test_best@*_600ep_shot5.json"))}
  assert records["test_accuracy"]["values_a"] == "0: 97.0; 1: 98.0; 2: 99.0"
  assert records["test_accuracy"]["values_b"] == "0: 100.0; 1: 101.0; 2: 102.0"
  with pytest.raises(ConfigError, match=r"--measurement test_best@\*_10ep.json matches 0 of .*S_seed0's evaluate"):
    analyze.analyze_arms(s, dr, measurement="test_best@*_10ep.json")
  with pytest.raises(ConfigError, match="pass one of them"):
    analyze.analyze_paths([str(tmp_path)], list_runs=True, measurement="test_best@*_600ep_shot5.json")


def test_a_copied_run_is_refused_wherever_arms_are_formed(tmp_path):
  """Before, ``analyze A A' -- B C`` counted a ``cp -r`` copy as a second seed (issue 29, case 6)."""
  import shutil  # noqa: PLC0415

  from fewshot import plot  # noqa: PLC0415

  a = write_run(tmp_path / "A_seed0", "softmax", 0, 90.0)
  shutil.copytree(a, tmp_path / "copy")
  b = [write_run(tmp_path / f"B_seed{k}", "dr", k, 92.0 + k) for k in range(2)]
  fragment = f"{tmp_path / 'copy'} holds the same run as {a} (the same options, seed and records: a copy)"
  with pytest.raises(ConfigError, match=re.escape(fragment)):
    analyze.analyze_arms([a, str(tmp_path / "copy")], b)
  with pytest.raises(ConfigError, match="a copy"):
    analyze.analyze_paths([str(tmp_path)])
  with pytest.raises(ConfigError, match="a copy"):
    plot.plot([a, str(tmp_path / "copy")], str(tmp_path / "figs"))
  assert not (tmp_path / "figs").exists()


def test_a_seed_trained_twice_is_refused_everywhere_and_exclude_leaves_one_out(tmp_path):
  """Issue 42, item 4: two runs of one configuration and seed whose records differ were counted as two seeds by
  ``analyze A -- B`` and ``plot``; ``analyze runs/`` refused them with no way to leave one out.
  """
  from fewshot import plot  # noqa: PLC0415

  a = [write_run(tmp_path / "runs" / f"A_seed{k}", "softmax", k, 90.0 + k) for k in range(2)]
  again = write_run(tmp_path / "runs" / "old" / "A_seed0", "softmax", 0, 95.0)  # seed 0 trained again: other rows
  b = [write_run(tmp_path / "runs" / f"B_seed{k}", "dr", k, 92.0 + k) for k in range(2)]
  fragment = "are two runs of one configuration and seed whose records differ"
  for call in (lambda: analyze.analyze_arms([*a, again], b), lambda: analyze.analyze_paths([str(tmp_path / "runs")]),
               lambda: plot.plot([*a, again], str(tmp_path / "figs"))):
    with pytest.raises(ConfigError, match=fragment):
      call()
  text, warning = analyze.analyze_paths([str(tmp_path / "runs")], exclude=(str(tmp_path / "runs" / "old" / "*"),))
  assert "left out 1 runs" in warning and "old/A_seed0 (--exclude)" in warning
  text_b, warning_b = analyze.analyze_arms_warned([*a, again], b, exclude=(again,))
  assert "(--exclude)" in warning_b and text_b == analyze.analyze_arms(a, b)
  with pytest.raises(ConfigError, match="--exclude nowhere/\\* matches none of the runs named"):
    analyze.analyze_paths([str(tmp_path / "runs")], exclude=("nowhere/*",))
  done = _command("--exclude", str(tmp_path / "runs" / "old" / "*"), str(tmp_path / "runs"))
  assert done.returncode == 0, done.stderr


def _sign_flip_by_hand(d):
  import itertools  # noqa: PLC0415

  d = np.asarray(d)
  means = [abs(np.mean(np.array(s) * d)) for s in itertools.product((1, -1), repeat=d.size)]
  return float(np.mean(np.array(means) >= abs(d.mean()) * (1 - 1e-12)))


def test_two_arms_lead_with_one_verdict_line_from_the_primary_test(tmp_path):
  """Issue 42: ``analyze A -- B`` showed a Welch interval excluding 0 beside a Mann-Whitney p of 1/3, with nothing
  saying 1/3 is the smallest p 2 against 2 seeds can give, and starred pooled-checkpoint tests.
  """
  two = ([write_run(tmp_path / f"A{k}", "softmax", k, 90.0 + k) for k in range(2)],
         [write_run(tmp_path / f"B{k}", "dr", k, 93.0 + k) for k in range(2)])
  text = analyze.analyze_arms(*two)
  assert text.splitlines()[0].startswith("Verdict: too few seeds to say: paired by seed (2 shared seeds)")
  assert "cannot give p below 0.5" in text.splitlines()[0]
  assert "*" not in "".join(line for line in text.splitlines() if "pooled" in line)  # pooled rows never starred
  lifts = [1.2, 0.8, 1.1, -0.2, 0.9, 1.4, 0.7]
  a = [write_run(tmp_path / f"C{k}", "softmax", k, 90.0 + 2 * k) for k in range(7)]
  b = [write_run(tmp_path / f"D{k}", "dr", k, 90.0 + 2 * k + lift) for k, lift in enumerate(lifts)]
  line = analyze.analyze_arms(a, b).splitlines()[0]
  p = _sign_flip_by_hand(lifts)
  half = scipy.stats.t.ppf(0.975, 6) * np.std(lifts, ddof=1) / np.sqrt(7)
  assert line == (f"Verdict: B higher than A: paired by seed (7 shared seeds), exact sign-flip p = {p:.4f} (its "
                  f"floor {2 / 2 ** 7:.3g}); B − A {np.mean(lifts):+.2f} ± {half:.2f} points (t-interval of the paired "
                  "differences).")
  other = [write_run(tmp_path / f"E{k}", "dr", 10 + k, 91.0 + k) for k in range(4)]  # no seed shared
  line = analyze.analyze_arms(a[:4], other).splitlines()[0]
  u = scipy.stats.mannwhitneyu([90.0, 92.0, 94.0, 96.0], [91.0, 92.0, 93.0, 94.0], method="exact")
  assert "unpaired (4 and 4 seeds, none shared), Mann-Whitney U" in line and "floor 0.0286" in line
  assert "no difference detected" in line and u.pvalue > 0.05


def test_a_listing_shows_an_unset_option_as_missing_not_none(tmp_path):
  """Issue 42, item 9: ``None`` in ``analyze --list`` where one run had an option unset (an older run, say)."""
  a = write_run(tmp_path / "a", "softmax", 0, 90.0, lr_halve_every=2000)
  b = write_run(tmp_path / "b", "softmax", 1, 91.0)
  text, _ = analyze.analyze_paths([a, b], list_runs=True)
  assert "None" not in text and "2000" in text and "—" in text


def test_a_seed_groups_folder_given_to_resume_names_the_seeds_that_continue_it(tmp_path):
  from fewshot.errors import RunDirError  # noqa: PLC0415
  from fewshot.records.reuse import check_for_training  # noqa: PLC0415

  for seed in (3, 5):
    RunDir(tmp_path / "group" / f"run_seed{seed}").write_config({**Config().to_dict(), "seed": seed})
  with pytest.raises(RunDirError, match=r"holds no run but a folder of 2 \(a seed group's\); continue them with "
                                        r"--seeds 3,5 --workdir .*group --resume"):
    check_for_training(tmp_path / "group", Config(), resume=True)


def test_runs_on_different_data_pooled_in_an_arm_or_compared_across_arms_are_named_in_a_warning(tmp_path):
  """Issue 56 item 4: 242-character runs and a 1,663-class run were pooled in one 4-seed arm without a word."""
  small = {"data": {"train": {"classes": 145, "images": 2900}, "test": {"classes": 48, "images": 960},
                    "files": ["images_background_small1.zip"], "not_read": ["all_runs.zip"]}}
  full = {"data": {"train": {"classes": 964, "images": 19280}, "test": {"classes": 659, "images": 13180},
                   "files": ["images_background.zip", "images_evaluation.zip"]}}
  same = {"data": {**small["data"], "not_read": []}}  # what the folder held beside the data is no difference
  a = [write_run(tmp_path / "a" / f"s{k}", "softmax", k, 90.0 + k, **(full if k == 3 else small)) for k in range(4)]
  b = [write_run(tmp_path / "b" / f"s{k}", "dr", k, 91.0 + k, **same) for k in range(4)]
  warning = analyze.analyze_arms_warned(a, b)[1]
  assert warning == (f"warning: arm A pools runs that read different data (train 145 classes / 2900 images in "
                     f"{a[0]} vs 964 classes / 19280 images in {a[3]}); comparing them anyway.")
  assert "arm A pools runs that read different data" in analyze.analyze_paths([str(tmp_path / "a"),
                                                                               str(tmp_path / "b")])[1]
  assert analyze.analyze_arms_warned(a[:3], b)[1] is None
  across = analyze.analyze_arms_warned(a[:3], [write_run(tmp_path / "c" / f"s{k}", "dr", k, 91.0, **full)
                                               for k in range(3)])[1]
  assert across.startswith("warning: the arms read different data (train 145 classes / 2900 images in ")
