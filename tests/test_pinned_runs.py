"""The pinned short runs (tests/pinned_runs.py) give exactly their recorded records.

Recorded before the training substrate was restructured (issue 10): a refactoring that
changes any float of a run's metrics.jsonl or results.json fails here. Exact on the
machine and JAX build of the recording; skipped elsewhere, where XLA may round differently.
"""

import json

import pytest

import pinned_runs


# The few-shot DR pin runs by default; the streamed and the 4-fold DML pins (a minute and a half
# of the suite) with -m slow.
@pytest.mark.parametrize("name", [pytest.param(name, marks=() if name == "fewshot_dr" else pytest.mark.slow)
                                  for name in pinned_runs.RUNS])
def test_run_reproduces_its_pinned_records_bit_for_bit(name, tmp_path):
  pin = json.loads((pinned_runs.PINS / f"{name}.json").read_text())
  assert pin["command"] == pinned_runs.RUNS[name], "the pinned command changed: record the pin again, on purpose"
  if pin["fingerprint"] != pinned_runs.fingerprint():
    pytest.skip(f"pinned on {pin['fingerprint']}, this is {pinned_runs.fingerprint()}: floats may round differently")
  got = pinned_runs.run(name, tmp_path / "run")
  assert got.keys() == pin["records"].keys()
  for path, expected in pin["records"].items():
    assert got[path] == expected, f"{name}: {path} differs from its pin"
