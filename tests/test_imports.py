"""The analysis tools start without the training machinery: no tensorflow_datasets, no Flax."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["fewshot.analyze", "fewshot.plot", "fewshot.records.rundir", "fewshot.config"])
def test_module_imports_neither_tensorflow_datasets_nor_flax(module):
  code = (f"import sys, {module}\n"
          "print(sorted(m for m in ('tensorflow_datasets', 'flax', 'orbax') if m in sys.modules))")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.strip() == "[]"


def test_the_light_loss_and_miner_names_are_the_registries():
  from fewshot import choices  # noqa: PLC0415
  from fewshot.dml.losses import LOSSES  # noqa: PLC0415
  from fewshot.dml.miners import MINERS  # noqa: PLC0415

  assert choices.LOSSES == tuple(LOSSES) and choices.MINERS == tuple(MINERS)
  assert choices.TRIPLET_LOSSES == tuple(name for name, spec in LOSSES.items() if spec.takes_triplets)
  assert choices.PROXY_LOSSES == tuple(name for name, spec in LOSSES.items() if spec.per_class)
  assert choices.BATCH_NEEDS == {name: spec.needs for name, spec in LOSSES.items() if spec.needs}


def test_the_metric_learning_command_refuses_a_bad_flag_before_loading_jax():
  code = ("import sys\nfrom fewshot.dml.config import DMLConfig\nfrom fewshot.dml import train\n"
          "print(sorted(m for m in ('jax', 'flax', 'tensorflow_datasets') if m in sys.modules))")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.strip() == "[]"
