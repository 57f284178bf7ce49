"""The analysis tools start without the training machinery: no tensorflow_datasets, no Flax."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["fewshot.analyze", "fewshot.plot", "fewshot.rundir", "fewshot.config"])
def test_module_imports_neither_tensorflow_datasets_nor_flax(module):
  code = (f"import sys, {module}\n"
          "print(sorted(m for m in ('tensorflow_datasets', 'flax', 'orbax') if m in sys.modules))")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.strip() == "[]"
