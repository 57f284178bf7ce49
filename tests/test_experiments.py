"""The paper-reproduction scripts end to end in smoke mode on fixtures: their tables, and resuming a finished grid."""

import re

import pytest

import dataset_fixtures as fixtures
from experiments import reality_check, reproduce_dr

NUMBER = r"-?\d+\.\d+"


def _mtimes(out):
  return {p: p.stat().st_mtime_ns for p in out.glob("*/results.json")}


def _rerun_skips(main, argv, out, expected_runs):
  """A second invocation trains nothing: every results.json is left as it was, and it reprints the summary."""
  before = _mtimes(out)
  assert len(before) == expected_runs
  assert main(argv) == (out / "summary.md").read_text()
  assert _mtimes(out) == before


def test_reality_check_smoke_table_and_resume(tmp_path, capsys):
  cars = fixtures.write_cars196(tmp_path / "cars", classes=16, per_class=6, size=(20, 24)).data_dir
  out = tmp_path / "rc"
  argv = ["--dataset", "cars196", "--data_dir", str(cars), "--out", str(out), "--smoke", "--losses", "nsl"]
  summary = reality_check.main(argv)
  row = next(line for line in summary.splitlines() if line.startswith("| nsl |"))
  assert len(re.findall(NUMBER, row)) == 6, row  # P@1, R-Precision, MAP@R: separated and concatenated
  assert "MAP@R concat." in summary and "summary.md" in capsys.readouterr().out
  _rerun_skips(reality_check.main, argv, out, 1)
  assert "nsl: done, skipped" in capsys.readouterr().out


@pytest.mark.slow
def test_reality_check_smoke_compares_all_four_losses(tmp_path):
  cars = fixtures.write_cars196(tmp_path / "cars", classes=16, per_class=6, size=(20, 24)).data_dir
  summary = reality_check.main(["--data_dir", str(cars), "--out", str(tmp_path / "rc"), "--smoke"])
  for loss in ("contrastive", "triplet", "npair", "nsl"):
    row = next(line for line in summary.splitlines() if line.startswith(f"| {loss} |"))
    assert len(re.findall(NUMBER, row)) == 6, row


@pytest.mark.slow
def test_reproduce_dr_smoke_grid_tables_and_resume(tmp_path):
  cub = fixtures.write_cub(tmp_path / "cub", classes=8, per_class=8, size=(40, 48)).data_dir
  out = tmp_path / "dr"
  argv = ["--dataset", "cub", "--data_dir", str(cub), "--out", str(out), "--smoke"]
  summary = reproduce_dr.main(argv)
  table = summary.split("# Statistics")[0]
  assert "| Model | conv4 1-shot | conv4 5-shot |" in table
  for model in ("ProtoNet_S", "ProtoNet_DR"):
    row = next(line for line in table.splitlines() if line.startswith(f"| {model} |"))
    assert len(re.findall(rf"{NUMBER} ± {NUMBER}", row)) == 2, row
  for model in ("1-NN_S", "1-NN_DR"):  # 5-shot only, as in the paper
    row = next(line for line in table.splitlines() if line.startswith(f"| {model} |"))
    assert re.fullmatch(rf"\| {model} \| – \| {NUMBER} ± {NUMBER} \|", row), row
  for pair in ("conv4 1-shot ProtoNet", "conv4 5-shot ProtoNet", "conv4 5-shot 1-NN"):
    assert f"## {pair}: S vs DR" in summary
  for measure in ("norm ratio", "con-alpha", "div-alpha", "con-div"):
    assert summary.count(f"### {measure}") == 3
  _rerun_skips(reproduce_dr.main, argv, out, 6)
