"""A seed group's training command ends with one line: its test score's mean ± 95% t-interval across the seeds."""

import subprocess
import sys
import textwrap

import numpy as np
import scipy.stats

from fewshot import train as fewshot_train
from fewshot.analysis import tables
from fewshot.config import Config
from fewshot.dml import train as dml_train
from fewshot.dml.config import DMLConfig


def _t(values):
  values = np.asarray(values, np.float64)
  return values.mean(), scipy.stats.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / np.sqrt(values.size)


def test_the_few_shot_line_is_the_t_interval_of_the_seeds_test_accuracies():
  accuracies = [90.1, 91.3, 89.7, 90.8]
  results = [{"test_accuracy": a} for a in accuracies]
  mean, half = _t(accuracies)
  assert fewshot_train.format_group(Config(), (0, 1, 2, 3), results) == \
      f"seed group of 4 seeds: test accuracy {mean:.2f}% ± {half:.2f}% (mean ± 95% t-interval)"
  # A process holding some of the group's runs says so; one seed has no interval.
  assert "(1 of them this process's): test accuracy 90.10% (mean" in fewshot_train.format_group(
      Config(), (0, 1), results[:1])


def _dml_results(map_at_r, concatenated=None):
  out = {"separated_mean": {"map_at_r": map_at_r}}
  if concatenated is not None:
    out["concatenated"] = {"test": {"map_at_r": concatenated}}
  return out


def test_the_metric_learning_line_is_map_at_r_of_the_models_the_results_hold():
  separated, concatenated = [0.412, 0.398, 0.431], [0.455, 0.449, 0.470]
  mean_s, half_s = _t(100 * np.array(separated))
  mean_c, half_c = _t(100 * np.array(concatenated))
  four = dml_train.format_group(DMLConfig(), (0, 1, 2), [_dml_results(s, c) for s, c in zip(separated, concatenated)])
  assert four == (f"seed group of 3 seeds: test MAP@R concatenated {mean_c:.2f}% ± {half_c:.2f}%, separated mean "
                  f"{mean_s:.2f}% ± {half_s:.2f}% (mean ± 95% t-interval)")
  one = dml_train.format_group(DMLConfig(), (0, 1, 2), [_dml_results(s) for s in separated])
  assert one == f"seed group of 3 seeds: test MAP@R {mean_s:.2f}% ± {half_s:.2f}% (mean ± 95% t-interval)"
  # An undefined MAP@R (null in results.json) is left out of the interval, not counted as 0.
  mean, half = _t(100 * np.array(separated[:2]))
  assert f"{mean:.2f}% ± {half:.2f}%" in dml_train.format_group(
      DMLConfig(), (0, 1, 2), [_dml_results(s) for s in separated[:2]] + [_dml_results(None)])
  assert tables.group_line((0, 1), 2, {"x": [None, None]}) == "seed group of 2 seeds: x — (mean ± 95% t-interval)"


# The command's main with its train_group replaced: what it prints after the group's runs (no JAX, nothing trained).
FAKE_GROUP = textwrap.dedent("""
    import importlib
    import sys
    from fewshot import runner
    from fewshot.analysis import tables

    command = importlib.import_module("fewshot.{module}")

    def train_group(config, seeds, workdirs, **kwargs):
      return [{results}[k] for k in range(len(seeds))]

    command.define_flags()
    command.train_group = train_group
    sys.argv = ["train", "--seeds=0-2", "--workdir=unused"] + {flags}
    runner.run(command.main)
""")


def _fake(module, results, flags):
  script = FAKE_GROUP.format(module=module, results=results, flags=flags)
  return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)


def test_the_training_commands_print_the_line_after_the_seeds_results():
  results = [{"model": "ProtoNet_DR", "test_accuracy": a, "test_ci95": 1.0, "test_episodes": 600, "best_episode": 100}
             for a in (90.0, 92.0, 94.0)]
  done = _fake("train", results, ["--head=dr"])
  assert done.returncode == 0, done.stderr
  lines = done.stdout.splitlines()
  assert lines[0].startswith("seed 0 [unused/") and lines[-1] == \
      "seed group of 3 seeds: test accuracy 92.00% ± 4.97% (mean ± 95% t-interval)"
  dml = [{"test_classes": 50, "separated": [{"fold": 0, "dim": 128, "best_epoch": 3, "test": m}],
          "separated_mean": m} for m in ({"precision_at_1": 0.5, "r_precision": 0.3, "map_at_r": x} for x in
                                         (0.20, 0.22, 0.24))]
  done = _fake("dml.train", dml, [])
  assert done.returncode == 0, done.stderr
  assert done.stdout.splitlines()[-1] == "seed group of 3 seeds: test MAP@R 22.00% ± 4.97% (mean ± 95% t-interval)"
