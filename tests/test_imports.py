"""The analysis tools start without the training machinery: no tensorflow_datasets, no Flax."""

import os
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


def test_a_script_beside_a_clone_named_fewshot_imports_the_installed_package(tmp_path):
  """A clone folder named ``fewshot`` beside a user's script had Python import it as an empty namespace package
  ahead of an editable install's finder (``module 'fewshot' has no attribute 'load'``); the README's install puts the
  checkout on the path itself (``editable_mode=compat``), where a regular package beats a namespace folder.
  """
  import importlib.metadata

  try:
    importlib.metadata.distribution("fewshot")
  except importlib.metadata.PackageNotFoundError:
    pytest.skip("fewshot is not installed here (the tests import the checkout)")
  (tmp_path / "fewshot" / "fewshot").mkdir(parents=True)  # the clone, as a user's home folder holds it
  (tmp_path / "script.py").write_text("import fewshot\nprint(fewshot.load.__module__)\n")
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  result = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, capture_output=True, text=True, env=env)
  assert result.returncode == 0, ("install with the README's command (pip install -e \".[dev]\" --config-settings "
                                  "editable_mode=compat): " + result.stderr[-500:])
  assert result.stdout.strip() == "fewshot.api"
