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


def test_the_loss_rows_are_the_registered_losses_and_the_light_miner_names_the_miners():
  """One registry: each row of fewshot.dml.loss_specs (light, what DMLConfig validates with) is the Loss training
  uses, its function where the row says, its facts the row's.
  """
  from fewshot import choices  # noqa: PLC0415
  from fewshot.dml.loss_specs import SPECS, triplet_losses  # noqa: PLC0415
  from fewshot.dml.losses import LOSSES  # noqa: PLC0415
  from fewshot.dml.miners import MINERS  # noqa: PLC0415

  assert tuple(LOSSES) == tuple(SPECS) and choices.MINERS == tuple(MINERS)
  for name, spec in SPECS.items():
    loss = LOSSES[name]
    assert spec.name == name == loss.name == loss.label
    assert (loss.takes_triplets, loss.per_class, loss.needs) == (spec.takes_triplets, spec.per_class, spec.needs)
    assert f"{loss.fn.__module__}:{loss.fn.__name__}" == spec.fn and (loss.init is None) == (spec.init is None)
    assert LOSSES[name] is loss  # made once: a learner holding it hashes the same at every step
  assert triplet_losses() == ("triplet",)
  assert {name for name, spec in SPECS.items() if spec.per_class} == {
      "nsl", "cosface", "arcface", "sphereface", "proxy_nca", "soft_triple", "dr_proxy"}
  assert all(spec.needs == (() if spec.per_class else ("positives", "negatives")) for spec in SPECS.values())


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
