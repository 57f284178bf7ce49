"""Seed groups: the runs of a group train like the same runs alone (sharded over devices and processes:
``tests/training/test_distributed.py``).
"""

import dataclasses
import subprocess
import sys

import jax
import numpy as np
import pytest

from fewshot.config import Config
from fewshot.episodic import learning
from fewshot.episodic.experiment import Experiment, load_data
from fewshot.errors import ConfigError, RunDirError
from fewshot.records.rundir import RunDir
from fewshot.train import train, train_group
from fewshot.training import run_flags, seed_groups
from fewshot.training.sources import HostSource
from fewshot.training.train_state import run_keys

TINY = dict(dataset="strokes", head="dr", way=3, shot=1, query=2, test_query=2, episodes=4, eval_every=2,
            val_episodes=3, test_episodes=4)


@pytest.mark.parametrize("text, seeds", [("0-3", (0, 1, 2, 3)), ("0,3,5", (0, 3, 5)), ("7", (7,)),
                                         ("2-4,9", (2, 3, 4, 9)), (" 1, 2 ", (1, 2))])
def test_parse_seeds(text, seeds):
  assert run_flags.parse_seeds(text) == seeds


@pytest.mark.parametrize("text, fragment", [("", "not a list"), ("5-2", "backwards"), ("1,1", "twice"),
                                            ("0-3,2", "twice"), ("-1", "not a list"), ("a-b", "not a list"),
                                            ("1,,2", "not a list")])
def test_bad_seeds_are_one_line_errors(text, fragment):
  with pytest.raises(ConfigError, match=fragment) as info:
    run_flags.parse_seeds(text)
  assert "\n" not in str(info.value)


def test_padding_fills_the_devices_and_is_never_a_run():
  group = seed_groups.SeedGroup.over(3, devices=jax.devices()[:1] * 1)
  assert group.size == 3 and group.local_runs() == [0, 1, 2]
  assert group.pad(["a", "b", "c"]) == ["a", "b", "c"]


@pytest.mark.slow  # a group and its runs alone trained, 16 s (the default suite's margin under 5 minutes)
def test_a_group_draws_the_episodes_of_its_runs_alone():
  config = Config(**TINY)
  seeds = (0, 5)
  group = Experiment.build(config, splits=("train",), seeds=seeds)
  alone = Experiment.build(config, splits=("train",))
  _, group_metrics, _ = learning.train_chunk(group.learner, group.initial_state(), group.sources["train"],
                                             group.keys["train"], 3)
  for i, seed in enumerate(seeds):
    keys = run_keys(seed)
    state = learning.init_state(alone.learner, keys["init"], alone.input_shape)
    _, metrics, _ = learning.train_chunk(alone.learner, state, alone.sources["train"], keys["train"], 3)
    got, want = np.asarray(group_metrics["loss"][i]), np.asarray(metrics["loss"])
    # The first episode is the same draw through the same model, batched over the runs: equal to float
    # rounding (bit for bit on the development machine). After an update the batched gradient rounds
    # differently (~1e-6 relative), which training then carries.
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-4)
    np.testing.assert_array_equal(np.asarray(group_metrics["accuracy"][i])[:1], np.asarray(metrics["accuracy"])[:1])


def test_a_streamed_group_draws_each_run_s_own_blocks():
  val = load_data(Config(**TINY), ("val",))["val"]
  host = HostSource(val, block_bytes=2 * 3 * 3 * val.images[0].nbytes)  # two draws of one run per block
  keys = jax.numpy.stack([jax.random.key(1), jax.random.key(2)])
  stacked = list(host.blocks(keys, 5, 4, 3, 3))
  assert [b.classes.shape[:2] for b in stacked] == [(2, 1)] * 4  # a group's step holds two runs' draws
  joined = lambda blocks, field, axis: np.concatenate([np.asarray(getattr(b, field)) for b in blocks], axis=axis)
  np.testing.assert_array_equal(joined(stacked, "steps", 0), np.arange(5, 9))
  for r in range(2):
    alone = list(host.blocks(keys[r], 5, 4, 3, 3))
    for field in ("classes", "images"):
      np.testing.assert_array_equal(joined(stacked, field, 1)[r], joined(alone, field, 0))


def _rows(workdir):
  return [{k: v for k, v in r.items() if k != "seconds"} for r in RunDir(workdir).read_metrics()]


@pytest.mark.slow  # trained, stopped and resumed
def test_group_runs_are_written_like_single_runs_and_resume(tmp_path):
  config = Config(**TINY)
  seeds = (0, 1)
  dirs = [str(tmp_path / f"seed{s}") for s in seeds]
  results = train_group(config, seeds, dirs, progress=False)
  alone = train(Config(**{**TINY, "seed": 1}), str(tmp_path / "alone1"), progress=False)
  for seed, workdir, result in zip(seeds, dirs, results):
    saved = RunDir(workdir)
    assert Config.from_dict(saved.read_config()).seed == seed
    assert [r["episode"] for r in saved.read_metrics()] == [2, 4]
    assert saved.read_results() == result and saved.checkpoints.step("best") in (2, 4)
  a, b = _rows(dirs[1]), _rows(tmp_path / "alone1")
  assert a[0].keys() == b[0].keys()
  # Four episodes: the group's run 1 and the run alone agree to what the batched gradient's rounding leaves.
  for x, y in zip(a, b):
    np.testing.assert_allclose(x["train_loss"], y["train_loss"], rtol=1e-3)
    np.testing.assert_allclose(x["theta"], y["theta"], rtol=1e-4)
  assert abs(results[1]["test_accuracy"] - alone["test_accuracy"]) < 10.0
  # Resuming a finished group is a no-op that reports the same results; refused without --resume.
  assert train_group(config, seeds, dirs, resume=True, progress=False) == results
  with pytest.raises(RunDirError, match="pass --resume"):
    train_group(config, seeds, dirs, progress=False)


@pytest.mark.slow  # a run trained, then a group resumed over it
def test_a_group_at_different_checkpoints_or_with_another_run_is_refused_whole(tmp_path):
  config = Config(**TINY)
  done = str(tmp_path / "done")
  train(Config(**{**TINY, "seed": 0}), done, progress=False)
  fresh = str(tmp_path / "fresh")
  before = sorted(p.name for p in tmp_path.iterdir())
  with pytest.raises(RunDirError, match="different checkpoints") as info:
    train_group(config, (0, 1), [done, fresh], resume=True, progress=False)
  assert "\n" not in str(info.value)
  with pytest.raises(RunDirError, match="differs in --seed"):
    train_group(config, (3, 1), [done, fresh], resume=True, progress=False)
  assert sorted(p.name for p in tmp_path.iterdir()) == before and not (tmp_path / "fresh").exists()


def test_a_group_too_large_for_the_device_memory_is_refused_with_the_estimate(monkeypatch):
  monkeypatch.setattr(seed_groups, "device_memory_limit", lambda device: 64 << 20)  # a 64 MiB accelerator
  with pytest.raises(ConfigError, match=r"a group of 16 runs needs about .* GiB .* use at most \d+ seeds") as info:
    Experiment.build(Config(**TINY), splits=("train",), seeds=tuple(range(16)))
  assert "\n" not in str(info.value)
  fits = int(str(info.value).split("use at most ")[1].split(" ")[0])
  assert 0 < fits < 16
  Experiment.build(Config(**TINY), splits=("train",), seeds=tuple(range(fits)))  # the size it names does fit


def test_a_group_whose_bound_fits_the_device_memory_is_not_compiled_to_be_measured(monkeypatch):
  monkeypatch.setattr(seed_groups, "device_memory_limit", lambda device: 1 << 40)  # a 1 TiB accelerator

  def compiled(lowered):
    raise AssertionError("the step was compiled although its bound fits")

  monkeypatch.setattr(seed_groups, "step_bytes", compiled)
  Experiment.build(Config(**TINY), splits=("train",), seeds=(0, 1))


def test_a_backend_with_no_uncompiled_cost_analysis_is_bounded_by_the_cpus(monkeypatch):
  """A GPU's plugin raises NotImplementedError for ``Lowered.cost_analysis`` (seen on an H100): the bound comes from
  the CPU's analysis of the same module, so a group that fits is still not compiled to be measured.
  """
  lowered = jax.jit(lambda x, w: jax.numpy.tanh(x @ w).sum()).lower(np.ones((64, 32), np.float32),
                                                                    np.ones((32, 16), np.float32))
  native = seed_groups.program_cost(lowered)

  def unavailable():
    raise NotImplementedError("Lowered.cost_analysis not implemented on platform 'cuda'")

  monkeypatch.setattr(lowered, "cost_analysis", unavailable)
  assert seed_groups.program_cost(lowered) == native and native["flops"] >= 2 * 64 * 32 * 16
  assert seed_groups.step_bytes_bound(lowered) == int(native["bytes accessed"])


def test_bad_seeds_on_the_command_line_exit_2_and_write_nothing(tmp_path, assert_one_line_error):
  cases = {"backwards": (["--seeds=5-2"], "backwards"), "both": (["--seeds=0-3", "--seed=2"], "pass one of them"),
           "empty": (["--seeds="], "not a list")}
  running = {name: subprocess.Popen([sys.executable, "-m", "fewshot.train", *flags, f"--workdir={tmp_path / name}"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, (flags, _) in cases.items()}
  for name, process in running.items():
    stdout, stderr = process.communicate(timeout=120)
    assert_one_line_error(subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr), cases[name][1])
    assert not (tmp_path / name).exists()


@pytest.mark.slow  # a group and each of its runs trained alone: half a minute
def test_a_metric_learning_group_trains_its_runs_like_alone_and_writes_each(tmp_path):
  from fewshot.dml import embedding  # noqa: PLC0415
  from fewshot.dml import train as dml_train  # noqa: PLC0415
  from fewshot.dml.config import DMLConfig  # noqa: PLC0415
  from fewshot.dml.experiment import Experiment  # noqa: PLC0415
  from fewshot.training.sources import place  # noqa: PLC0415

  config = DMLConfig(dataset="strokes", folds=1, embedding_dim=8, classes=3, per_class=2, steps_per_epoch=3, epochs=1,
                     loss="contrastive")
  seeds = (0, 4)
  group = Experiment(config, seeds=seeds)
  train_split = group.folds[0][0]
  source = place(train_split, device=group.group.replicated, run_sharding=group.group.runs)
  keys = group.train_keys(0)
  _, losses = embedding.train_chunk(group.fold_learner(0), group.initial_state(0), source, keys, 3)
  alone = Experiment(dataclasses.replace(config, seed=4))
  _, alone_losses = embedding.train_chunk(alone.fold_learner(0), alone.initial_state(0),
                                          place(train_split), alone.train_keys(0), 3)
  np.testing.assert_allclose(np.asarray(losses[1])[0], np.asarray(alone_losses)[0], rtol=1e-6)
  np.testing.assert_allclose(np.asarray(losses[1]), np.asarray(alone_losses), rtol=1e-4)
  dirs = [str(tmp_path / f"seed{s}") for s in seeds]
  results = dml_train.train_group(config, seeds, dirs, progress=False)
  for seed, workdir, result in zip(seeds, dirs, results):
    saved = RunDir(workdir)
    assert DMLConfig.from_dict(saved.read_config()).seed == seed and saved.read_results() == result
    assert [r["step"] for r in saved.read_metrics()] == [3]


def test_a_large_group_opens_its_runs_without_validating_each_configuration_or_checking_each_folder(tmp_path,
                                                                                                  monkeypatch):
  """A group of 100,000 seeds is refused for its memory in seconds: what is built per seed before that is cheap."""
  from fewshot.options import RunOptions
  from fewshot.records import reuse
  from fewshot.training.runs import Runs

  config, checked, validated = Config(**TINY), [], []
  seed7 = dataclasses.replace(config, seed=7)
  monkeypatch.setattr(reuse, "check_writable", lambda path, flag: checked.append(path))
  monkeypatch.setattr(RunOptions, "check_fields", lambda self: validated.append(self))
  seeds = tuple(range(20_000))
  runs = Runs.open(config, seeds, [str(tmp_path / "runs" / f"seed{s}") for s in seeds], resume=False)
  assert [c.seed for c in runs.configs] == list(seeds) and runs.configs[7] == seed7
  assert checked == [str(tmp_path / "runs")] and validated == []
  assert runs.dirs[5].path == (tmp_path / "runs" / "seed5").resolve() and not (tmp_path / "runs").exists()
