"""One quote and docstring style across the package, its tests and experiments (the ruff rules in pyproject.toml)."""

import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_ruff_finds_no_style_violations():
  ruff = shutil.which("ruff")
  if ruff is None:
    pytest.skip("ruff is not installed (pip install -e '.[dev]' installs it)")
  folders = ["fewshot", "tests", "experiments", "examples"]
  result = subprocess.run([ruff, "check", *folders], cwd=REPO, capture_output=True, text=True)
  assert result.returncode == 0, result.stdout[-3000:]
