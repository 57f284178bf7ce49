"""Every registered backbone trains, validates and tests end to end through the command line.

At 28×28 on the embedded strokes in the default suite; at 84×84 (Conv4, ResNet-12) and 224×224 (ResNet-18) on a
CUB fixture in the slow tier. These are the runs that crashed the interpreter before the prototypes were summed by
segment (jaxlib 0.10.2's YNNPACK kernels on embeddings of ~512 dimensions and more: BUILD_NOTES, "A crash").
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from fewshot import choices, convolutions
from fewshot.evaluate import evaluate
from fewshot.records.rundir import RunDir

import dataset_fixtures as fixtures
import tiny_run

TINY = tiny_run.flags(episodes=4)  # conv4's programs are the other tests' tiny run's


def _train(workdir, *flags) -> dict:
  """Train through the command line; the run's results, after checking what it printed and wrote."""
  done = subprocess.run([sys.executable, "-m", "fewshot.train", f"--workdir={workdir}", *TINY, *flags],
                        capture_output=True, text=True)
  assert done.returncode == 0, done.stderr[-3000:]
  results = json.loads((workdir / "results.json").read_text())
  assert f"test accuracy {results['test_accuracy']:.2f}%" in done.stdout
  assert 0.0 <= results["test_accuracy"] <= 100.0 and results["test_episodes"] == 1
  rows = RunDir(workdir).read_metrics()
  assert [row["episode"] for row in rows] == [2, 4]
  assert all(math.isfinite(row["train_loss"]) and 0.0 <= row["val_accuracy"] <= 100.0 for row in rows)
  assert RunDir(workdir).checkpoints.has("best") and RunDir(workdir).checkpoints.has("last")
  # The best checkpoint, tested again in this process, gives the accuracy the run reported.
  assert evaluate(str(workdir))["test_accuracy"] == results["test_accuracy"]
  return results


# The ResNets take half a minute each on two cores: the slow tier, which .ci/run runs after the default suite.
@pytest.mark.parametrize("backbone", [pytest.param(b, marks=() if b == "conv4" else pytest.mark.slow)
                                      for b in choices.BACKBONES])
def test_every_backbone_trains_validates_and_tests_at_28_px(backbone, tmp_path):
  _train(tmp_path / "run", f"--backbone={backbone}")
  record = RunDir(tmp_path / "run").read_config()
  # config.json says which form --conv auto took on this backend (im2col on a CPU), not only "auto".
  assert record["input_shape"] == [28, 28, 1] and record["conv"] == "auto"
  assert record["computation"] == {"conv": convolutions.resolve("auto")}


@pytest.fixture(scope="module")
def cub_dir(tmp_path_factory):
  return str(fixtures.write_cub(tmp_path_factory.mktemp("cub"), classes=8, per_class=6, size=(120, 140)).data_dir)


@pytest.mark.slow
@pytest.mark.parametrize("backbone, size", [("conv4", 84), ("resnet12", 84), ("resnet18", 224)])
def test_every_backbone_trains_validates_and_tests_at_its_paper_size(backbone, size, cub_dir, tmp_path):
  _train(tmp_path / "run", "--dataset=cub", f"--data_dir={cub_dir}", f"--backbone={backbone}", f"--image_size={size}")
  assert RunDir(tmp_path / "run").read_config()["input_shape"] == [size, size, 3]
