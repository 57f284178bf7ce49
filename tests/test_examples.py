"""The scripts in examples/, each run in its smoke mode as a user would run it."""

import json
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow  # ~40 s: two DML runs compiled; the user-loss path itself is in test_dml_train
def test_custom_loss_example_trains_its_loss_beside_the_built_in_one(tmp_path):
  done = subprocess.run([sys.executable, str(REPO / "examples" / "custom_loss.py"), "--smoke", "--workdir",
                         str(tmp_path)], capture_output=True, text=True, cwd=REPO)
  assert done.returncode == 0, done.stderr[-2000:]
  recorded = {name: json.loads((tmp_path / name / "config.json").read_text())["loss"] for name in ("soft_nn", "triplet")}
  assert recorded == {"soft_nn": "custom:soft_nn", "triplet": "triplet"}
  table = {line.split(" (")[0]: [float(v) for v in line.split(")")[1].split()] for line in done.stdout.splitlines()[1:]}
  assert set(table) == {"soft_nn", "triplet"} and all(0 <= v <= 100 for row in table.values() for v in row)
  assert table["soft_nn"] != table["triplet"]  # two losses, two models: not the built-in one under another name


def _run_example(name: str, workdir: pathlib.Path) -> str:
  done = subprocess.run([sys.executable, str(REPO / "examples" / name), "--smoke", "--workdir", str(workdir)],
                        capture_output=True, text=True, cwd=REPO)
  assert done.returncode == 0, done.stderr[-2000:]
  return done.stdout


@pytest.mark.slow  # ~35 s: two runs compiled; the README runs the same head in the default suite
def test_custom_head_example_trains_its_head_and_analyses_it_against_protonet_dr(tmp_path):
  table = _run_example("custom_head.py", tmp_path)
  config = json.loads((tmp_path / "cosine_temperature" / "config.json").read_text())
  assert config["head"] == "custom:cosine_temperature"
  rows = [json.loads(line) for line in (tmp_path / "cosine_temperature" / "metrics.jsonl").read_text().splitlines()]
  assert rows and rows[-1]["con_div"] is not None  # the head's class distance gives the diagnostics
  results = json.loads((tmp_path / "cosine_temperature" / "results.json").read_text())
  assert results["model"] == "cosine_temperature"
  # Every measure's table compares the two arms.
  assert table.count("ProtoNet_DR  cosine_temperature") == 4, table


@pytest.mark.slow  # two runs of the example: twenty seconds
def test_custom_backbone_example_trains_its_module_and_analyses_it_against_conv4(tmp_path):
  table = _run_example("custom_backbone.py", tmp_path)
  config = json.loads((tmp_path / "tinynet" / "config.json").read_text())
  assert (config["backbone"], config["head"]) == ("custom:TinyNet", "dr")
  assert (tmp_path / "tinynet" / "results.json").exists()
  assert "custom:TinyNet" in table and table.count("ProtoNet_DR [conv4]  ProtoNet_DR [tinynet]") == 4, table
