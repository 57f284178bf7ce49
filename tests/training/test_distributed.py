"""A seed group over two processes (``jax.distributed`` on the CPU, gloo): each process trains and writes its own
runs, and the group trains exactly as in one process with the same devices, and as on one device within tolerance.
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from fewshot.config import Config
from fewshot.evaluate import evaluate
from fewshot.records import local_checkpoints
from fewshot.records.rundir import RunDir

TINY = ["--dataset=strokes", "--head=dr", "--way=3", "--shot=1", "--query=2", "--test_query=2", "--episodes=4",
        "--eval_every=2", "--val_episodes=3", "--test_episodes=4"]
SEEDS = (0, 1, 2)  # over 2 processes x 2 devices: process 0 holds runs 0 and 1, process 1 run 2 and the padding
TWO_DEVICES = "--xla_force_host_platform_device_count=2 --xla_cpu_collective_timeout_seconds=180"


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def _launch(workdir, *extra, processes=2, devices=TWO_DEVICES, program="fewshot.train", flags=TINY):
  """``python -m PROGRAM --seeds 0-2`` as ``processes`` processes; each one's (returncode, stdout, stderr)."""
  command = [sys.executable, "-m", program, *flags, "--seeds=0-2", f"--workdir={workdir}", *extra]
  env = {**os.environ, "XLA_FLAGS": devices}
  if processes == 1:
    launched = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)]
  else:
    port = _free_port()
    launched = [subprocess.Popen([*command, f"--coordinator_address=localhost:{port}", f"--num_processes={processes}",
                                  f"--process_id={k}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=env) for k in range(processes)]
  finished = []
  for process in launched:
    stdout, stderr = process.communicate(timeout=600)
    finished.append((process.returncode, stdout, stderr))
  for returncode, _, stderr in finished:
    assert returncode == 0, stderr[-3000:]
  return finished


def _run_dir(parent, seed) -> RunDir:
  return RunDir(parent / Config(dataset="strokes", head="dr", way=3, seed=seed).run_name)


def _rows(rundir):
  return [{k: v for k, v in row.items() if k != "seconds"} for row in rundir.read_metrics()]


@pytest.mark.slow  # two processes of the command: over a minute
def test_a_group_over_two_processes_writes_each_run_once_and_trains_as_in_one(tmp_path):
  (_, first, _), (_, second, _) = _launch(tmp_path / "two")
  # Each process reports (and wrote) the runs of its own devices.
  assert [f"seed {s} [" in first for s in SEEDS] == [True, True, False]
  assert [f"seed {s} [" in second for s in SEEDS] == [False, False, True]
  _launch(tmp_path / "one", processes=1, devices="--xla_force_host_platform_device_count=4")
  _launch(tmp_path / "unsharded", processes=1, devices="--xla_force_host_platform_device_count=1")
  for seed in SEEDS:
    # On one device the compiler may fuse the group's program differently: equal within float tolerance.
    sharded, unsharded = _rows(_run_dir(tmp_path / "one", seed)), _rows(_run_dir(tmp_path / "unsharded", seed))
    assert [r["episode"] for r in sharded] == [r["episode"] for r in unsharded]
    for x, y in zip(sharded, unsharded):
      np.testing.assert_allclose(x["train_loss"], y["train_loss"], rtol=1e-3)
      np.testing.assert_allclose(x["theta"], y["theta"], rtol=1e-4)
  for seed in SEEDS:
    two, one = _run_dir(tmp_path / "two", seed), _run_dir(tmp_path / "one", seed)
    # The same four devices, each running the same program on its runs: the same numbers, bit for bit.
    assert _rows(two) == _rows(one) and len(_rows(two)) == 2
    assert {k: v for k, v in two.read_results().items() if k != "workdir"} == \
        {k: v for k, v in one.read_results().items() if k != "workdir"}
    # Orbax cannot write one process's own arrays among several: these are flax msgpack checkpoints.
    assert local_checkpoints.holds(two.path / "checkpoints" / "last")
    assert not local_checkpoints.holds(one.path / "checkpoints" / "last")
  # One process reads them back (evaluate), and the two processes resume the finished group from them, testing
  # again with each process gathering its own runs' test episodes from host memory: the same results.
  run2 = _run_dir(tmp_path / "two", 2)
  assert evaluate(str(run2.path))["test_accuracy"] == run2.read_results()["test_accuracy"]
  results = {s: _run_dir(tmp_path / "two", s).read_results() for s in SEEDS}
  _launch(tmp_path / "two", "--resume", "--placement=host")
  for seed in SEEDS:
    again = _run_dir(tmp_path / "two", seed)
    assert again.read_results() == results[seed] and len(_rows(again)) == 2


@pytest.mark.parametrize("flags, fragment", [
    (["--seed=0", "--coordinator_address=localhost:1", "--num_processes=2", "--process_id=0"], "pass --seeds"),
    (["--seeds=0-3", "--coordinator_address=localhost:1"], "together"),
    (["--seeds=0-3", "--coordinator_address=host0", "--num_processes=2", "--process_id=0"], "HOST:PORT"),
    (["--seeds=0-3", "--coordinator_address=localhost:1", "--num_processes=2", "--process_id=2"], "0 to 1"),
])
def test_bad_multi_process_flags_are_one_line_errors_that_write_nothing(tmp_path, assert_one_line_error, flags,
                                                                         fragment):
  done = subprocess.run([sys.executable, "-m", "fewshot.train", *flags, f"--workdir={tmp_path / 'w'}"],
                        capture_output=True, text=True, timeout=120)
  assert_one_line_error(done, fragment)
  assert not (tmp_path / "w").exists()


def test_a_local_checkpoint_restores_where_the_run_lives_and_refuses_another_shape(tmp_path):
  import jax.numpy as jnp

  from fewshot.errors import RunDirError

  state = {"step": jnp.int32(7), "w": jnp.arange(6.0).reshape(2, 3)}
  folder = tmp_path / "checkpoints" / "last"
  local_checkpoints.save(folder, 7, state)
  local_checkpoints.save(folder, 9, {**state, "step": jnp.int32(9)})
  assert local_checkpoints.steps(folder) == [9] and sorted(p.name for p in folder.iterdir()) == ["9"]
  restored = local_checkpoints.restore(folder, 9, state)
  assert int(restored["step"]) == 9 and restored["w"].dtype == jnp.float32
  np.testing.assert_array_equal(np.asarray(restored["w"]), np.arange(6.0).reshape(2, 3))
  with pytest.raises(RunDirError, match="another configuration"):
    local_checkpoints.restore(folder, 9, {**state, "w": jnp.zeros((3, 2))})
  assert json.dumps(sorted(local_checkpoints.steps(tmp_path / "none"))) == "[]"


DML = ["--dataset=strokes", "--folds=1", "--embedding_dim=8", "--classes=3", "--per_class=2", "--steps_per_epoch=3",
       "--epochs=2", "--loss=contrastive"]


@pytest.mark.slow
def test_a_metric_learning_group_over_two_processes_trains_as_in_one(tmp_path):
  from fewshot.dml.config import DMLConfig  # noqa: PLC0415

  _launch(tmp_path / "two", program="fewshot.dml.train", flags=DML)
  _launch(tmp_path / "one", processes=1, devices="--xla_force_host_platform_device_count=4",
          program="fewshot.dml.train", flags=DML)
  losses = {}
  for seed in SEEDS:
    name = DMLConfig(dataset="strokes", loss="contrastive", seed=seed).run_name
    two, one = RunDir(tmp_path / "two" / name), RunDir(tmp_path / "one" / name)
    assert local_checkpoints.holds(two.path / "checkpoints" / "best")
    losses[seed] = [r["loss"] for r in two.read_metrics()]
    # Unlike the few-shot group, this one is not bit for bit across processes: on an AMD EPYC (2 cores) the
    # epoch losses differed by 1.2e-5 and 1.0e-4 relative, the same at 62c07df (why is not known; the gap grows
    # with the steps). Within 1e-3, and seeds differ by far more (below).
    np.testing.assert_allclose(losses[seed], [r["loss"] for r in one.read_metrics()], rtol=1e-3)
  # The tolerance can tell runs apart: another seed's losses lie outside it.
  assert not np.allclose(losses[0], losses[1], rtol=1e-3) and not np.allclose(losses[1], losses[2], rtol=1e-3)


@pytest.mark.parametrize("processes, per_process, runs, enough", [(2, 1, 1, 2), (4, 1, 5, 7), (2, 2, 2, 3)])
def test_a_group_that_leaves_a_process_padding_only_is_refused_naming_a_size_that_works(processes, per_process, runs,
                                                                                          enough):
  from types import SimpleNamespace  # noqa: PLC0415

  from fewshot.errors import ConfigError  # noqa: PLC0415
  from fewshot.training.seed_groups import SeedGroup  # noqa: PLC0415

  devices = np.array([SimpleNamespace(process_index=p) for p in range(processes) for _ in range(per_process)])
  group = SeedGroup(SimpleNamespace(devices=devices), runs)
  with pytest.raises(ConfigError, match=f"leaves process {processes - 1} with padding only; pass at least {enough} "):
    group.check_processes()
  SeedGroup(SimpleNamespace(devices=devices), enough).check_processes()  # the size it names is accepted
  held = [SeedGroup(SimpleNamespace(devices=devices), enough).held(p) for p in range(processes)]
  assert sorted(i for h in held for i in h) == list(range(SeedGroup(SimpleNamespace(devices=devices), enough).size))
