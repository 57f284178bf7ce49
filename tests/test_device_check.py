"""The accelerator benchmarks' arithmetic (benchmarks/flops.py) and the one-command device check
(benchmarks/device_check.py): FLOPs from layer shapes against the closed form and XLA's own count, and the page.
"""

import jax
import jax.numpy as jnp
import pytest

from fewshot.backbones import Conv4
from fewshot.episodic import learning
from fewshot.episodic.episodes import EpisodeShape
from fewshot.training import seed_groups

from benchmarks import device_check, flops


def conv4_forward_flops(size: int, channels: int) -> int:
  """2 × 3×3 window × input × output channels × output pixels, per layer (padding SAME, 2×2 pools floor)."""
  total, features = 0, channels
  for _ in range(4):
    total += 2 * 9 * features * 64 * size * size
    features, size = 64, size // 2
  return total


@pytest.mark.parametrize("size, channels", [(28, 1), (84, 3)])
def test_a_forward_pass_counts_its_layers_flops_exactly(size, channels):
  model = Conv4(conv="lax")
  images = jax.ShapeDtypeStruct((3, size, size, channels), jnp.float32)
  variables = jax.eval_shape(lambda x: model.init(jax.random.key(0), x, train=False), images)  # shapes: nothing runs
  lowered = jax.jit(lambda v, x: model.apply(v, x, train=False)).lower(variables, images)
  assert flops.program_flops(lowered) == 3 * conv4_forward_flops(size, channels)
  assert conv4_forward_flops(84, 3) == pytest.approx(194.3e6, rel=1e-3)  # issue 28's "about 194 MFLOP per image"


def test_a_training_step_counts_the_same_with_either_convolution_and_near_xlas_count_on_the_cpu():
  counts = {}
  for conv in ("lax", "im2col"):
    learner = learning.EpisodicLearner(Conv4(conv=conv), EpisodeShape(5, 1, 16), head="dr")
    lowered = learning.lowered_step(learner, (28, 28, 1), (28, 28, 1))
    counts[conv] = flops.program_flops(lowered)
  assert counts["lax"] == counts["im2col"]
  # Forward, the input's and the kernel's gradients (none for the images): 3 forward passes less layer 1's input one.
  per_image = conv4_forward_flops(28, 1)
  assert counts["im2col"] == pytest.approx(85 * (3 * per_image - 2 * 9 * 64 * 28 * 28), rel=0.01)
  xla = seed_groups.program_cost(lowered)["flops"]  # of the program as lowered, by the CPU's XLA on every backend
  # XLA also counts the elementwise work (BatchNorm, ReLU, Adam).
  assert counts["im2col"] <= xla <= 1.1 * counts["im2col"]


def test_the_page_says_what_an_accelerator_must_show_and_whether_it_did():
  runs = [{"size": 84, "conv": conv, "runs": r, "group_episodes_per_s": 300.0 * r, "sequential_episodes_per_s": 150.0,
           "group_vs_sequential": gain, "group_gflops": 1e4, "group_peak_fraction": 0.2}
          for conv, r, gain in (("lax", 8, 1.3), ("im2col", 32, 2.4))]
  found = {"provenance": {"devices": "gpu: 1 device (NVIDIA H100)", "backend": "gpu"}, "numerics": "419 passed in 60s",
           "main": {"accuracy": 95.8, "ci95": 0.4, "seconds": 25.0}, "episodes": None, "runs": runs}
  results = {"numerics tests": {"status": 0, "seconds": 60.0}}
  page = device_check.summary(found, results)
  assert "| the numerics-sensitive tests pass on this backend | 419 passed in 60s (met) |" in page
  assert "best 2.40× (32 runs, conv im2col; met)" in page and "95.80% ± 0.40% in 25 s" in page
  failed = {**found, "numerics": "3 failed, 416 passed in 61s", "runs": runs[:1]}
  verdicts = dict(device_check.verdicts(failed, "gpu"))
  assert ["NOT met" in v for v in verdicts.values()] == [True, True]
  assert "a CPU is not held to it" in dict(device_check.verdicts({**found, "runs": []}, "cpu")).popitem()[1]


def test_auto_s_form_is_the_largest_group_s_fastest_where_it_beats_lax_by_the_margin():
  """Injected timings: at 84 px im2col's group of 32 is 1.2× lax's (chosen); at 28 px map's is 1.03× (within the
  margin: lax kept); tensorfloat32 rows and smaller groups do not decide.
  """
  rows = [{"size": size, "precision": precision, "runs": runs, "conv": conv, "group_episodes_per_s": speed}
          for size, precision, runs, conv, speed in (
              (84, "float32", 8, "im2col", 10.0), (84, "float32", 8, "auto (lax)", 50.0),
              (84, "float32", 32, "auto (lax)", 100.0), (84, "float32", 32, "map", 103.0),
              (84, "float32", 32, "im2col", 120.0), (28, "float32", 32, "lax", 300.0),
              (28, "float32", 32, "map", 309.0), (28, "tensorfloat32", 32, "im2col", 900.0))]
  assert device_check.form_winners(rows) == {28: ("lax", 1.0), 84: ("im2col", 1.2)}
  assert device_check.form_winners(rows, "tensorfloat32") == {}  # no lax group measured there: nothing to say
  found = {"provenance": {"backend": "gpu"}, "numerics": None, "main": None, "episodes": None, "runs": [
      {**r, "sequential_episodes_per_s": 1.0, "group_vs_sequential": 1.0, "group_gflops": 1.0,
       "group_peak_fraction": 0.1} for r in rows]}
  page = device_check.summary(found, {})
  assert "`--conv auto` on gpu by this run's groups at float32" in page
  assert "28×28: lax (1.00× lax's group), 84×84: im2col (1.20× lax's group); AUTO now says lax (not measured" in page


@pytest.mark.slow  # every step, small: about 3 minutes on 2 CPU cores
def test_the_device_check_runs_end_to_end_on_the_cpu(tmp_path):
  assert device_check.main(["--out", str(tmp_path), "--smoke"]) == 0
  page = (tmp_path / "device_check.md").read_text()
  assert "Backend: cpu" in page and "(met)" in page and "a CPU is not held to it" in page
  assert (tmp_path / "device_check.json").exists() and (tmp_path / "bench_runs.json").exists()


def test_ctrl_c_during_a_step_is_one_line_naming_it_and_writes_no_report(tmp_path, monkeypatch, capsys):
  ran = []

  def interrupted_at_the_second(name, command, out, timeout):
    if ran:
      raise KeyboardInterrupt
    ran.append(name)
    return {"command": command, "status": 0, "seconds": 1.0, "tail": ""}

  monkeypatch.setattr(device_check, "run_step", interrupted_at_the_second)
  assert device_check.main(["--out", str(tmp_path), "--smoke"]) == 130
  names = list(device_check.steps(tmp_path, True))
  assert capsys.readouterr().err.splitlines() == [
      f"interrupted: device_check stopped in its step '{names[1]}' (1 of {len(names)} done) and wrote no report; the "
      f"logs of the steps done are in {tmp_path}; run the same command again."]
  assert not (tmp_path / "device_check.md").exists() and not (tmp_path / "device_check.json").exists()
