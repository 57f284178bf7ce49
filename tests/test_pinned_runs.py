"""The pinned short runs (tests/pinned_runs.py) give exactly their recorded records.

Recorded before the training substrate was restructured (issue 10): a refactoring that
changes any float of a run's metrics.jsonl or results.json fails here. Exact on the
machine and JAX build of the recording; skipped elsewhere, where XLA may round differently.
"""

import json

import pytest

import pinned_runs


# Every pin runs with -m slow (and `python tests/pinned_runs.py`): the few-shot DR pin alone took 20 s of the
# default tier's 5 minutes; the default tier keeps the same-seed checks of the steps, chunks and groups.
@pytest.mark.slow
@pytest.mark.parametrize("name", list(pinned_runs.RUNS))
def test_run_reproduces_its_pinned_records_bit_for_bit(name, tmp_path):
  pin = json.loads((pinned_runs.PINS / f"{name}.json").read_text())
  assert pin["command"] == pinned_runs.RUNS[name], "the pinned command changed: record the pin again, on purpose"
  if pin["fingerprint"] != pinned_runs.fingerprint():
    pytest.skip(f"pinned on {pin['fingerprint']}, this is {pinned_runs.fingerprint()}: floats may round differently")
  got = pinned_runs.run(name, tmp_path / "run")
  assert got.keys() == pin["records"].keys()
  for path, expected in pin["records"].items():
    assert got[path] == expected, f"{name}: {path} differs from its pin"
