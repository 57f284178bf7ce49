"""Faults a cluster user meets, each one line on stderr naming the fix, exit 2 (130 for Ctrl-C), nothing
half-written: a lost peer, processes started differently, bad addresses, a group too large for the memory.

The multi-process cases launch ``python -m fewshot.train --seeds 0-2`` as two processes of two forced CPU
devices each (slow tier); the checks that start no JAX run in the default tier.
"""

import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest

from fewshot.errors import ConfigError
from fewshot.training import distributed, peers
from fewshot.training.distributed import Processes

from cli_output import error_lines
from environment import checkout_env

TINY = ["--dataset=strokes", "--head=dr", "--way=3", "--shot=1", "--query=2", "--test_query=2", "--eval_every=2",
        "--val_episodes=3", "--test_episodes=4"]
TWO_DEVICES = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}


def _command(workdir, *flags, program="fewshot.train"):
  return [sys.executable, "-m", program, *flags, f"--workdir={workdir}"]


def _finished(process, timeout):
  stdout, stderr = process.communicate(timeout=timeout)
  return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


# ---- addresses and process counts (no JAX starts) ---------------------------------------------------------------
@pytest.mark.parametrize("address, fragment", [
    ("127.0.0.1:notaport", "has port 'notaport', not a number from 1 to 65535"),
    ("127.0.0.1:99999", "has port '99999', not a number from 1 to 65535"),
    ("host0:0", "not a number from 1 to 65535"),
    (":1234", "is not HOST:PORT"),
    ("::1:1234", "an IPv6 host goes in brackets, [::1]:1234"),
])
def test_a_coordinator_address_that_is_not_host_port_is_refused_before_jax_starts(address, fragment):
  with pytest.raises(ConfigError, match="pass HOST:PORT of process 0") as info:
    Processes(address, 2, 0)
  assert fragment in str(info.value)
  for good in ("host0:1234", "[::1]:1234", "10.0.0.1:65535"):
    assert Processes(good, 2, 1).several


def test_bad_addresses_and_process_counts_on_the_command_line_are_one_line_errors(tmp_path, assert_one_line_error):
  cases = {
      "notaport": (["--coordinator_address=127.0.0.1:notaport", "--num_processes=2", "--process_id=1"], "notaport"),
      "99999": (["--coordinator_address=127.0.0.1:99999", "--num_processes=2", "--process_id=0"], "65535"),
      "none": (["--coordinator_address=localhost:1234", "--num_processes=0", "--process_id=0"],
               "--num_processes must be a positive integer, got 0"),
  }
  running = {name: subprocess.Popen(_command(tmp_path / name, "--seeds=0-3", *flags), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for name, (flags, _) in cases.items()}
  started = time.monotonic()
  for name, process in running.items():
    assert_one_line_error(_finished(process, 60), cases[name][1])
    assert not (tmp_path / name).exists()
  assert time.monotonic() - started < 30  # refused before JAX loads, not after a timeout


# ---- huge groups ------------------------------------------------------------------------------------------------
def test_a_hundred_thousand_seeds_parse_in_well_under_a_second():
  from fewshot.training.run_flags import parse_seeds

  started = time.perf_counter()
  seeds = parse_seeds("0-49999,50000-99999")
  assert time.perf_counter() - started < 0.5 and len(seeds) == 100_000 and seeds[-1] == 99_999
  with pytest.raises(ConfigError, match="names seed 99999 twice"):
    parse_seeds("0-99999,99999")


@pytest.mark.slow  # 8 s: two groups' steps lowered; a metric-learning batch's refusal is the default tier's
def test_a_group_too_large_for_the_host_memory_is_refused_on_the_cpu_naming_one_that_fits(monkeypatch, on_the_cpu):
  from fewshot.config import Config
  from fewshot.episodic.experiment import Experiment
  from fewshot.training import seed_groups

  tiny = Config(dataset="strokes", head="dr", way=3, shot=1, query=2, test_query=2)
  monkeypatch.setattr(seed_groups, "host_memory_available", lambda: 256 << 20)  # a host with 256 MiB free
  with pytest.raises(ConfigError, match=r"a group of 64 runs needs about .* GiB of host memory .* but the host has "
                     r"0\.2 GiB available; use at most \d+ seeds, or more hosts\.") as info:
    Experiment.build(tiny, splits=("train",), seeds=tuple(range(64)))
  assert "\n" not in str(info.value)
  fits = int(str(info.value).split("use at most ")[1].split(" ")[0])
  assert 0 < fits < 64
  Experiment.build(tiny, splits=("train",), seeds=tuple(range(fits)))  # the size it names does fit


@pytest.mark.slow
@pytest.mark.parametrize("program, flags", [
    ("fewshot.train", ["--dataset=strokes", "--way=5", "--shot=5", "--query=15"]),
    ("fewshot.dml.train", ["--dataset=strokes", "--folds=1", "--classes=8", "--per_class=8"]),
])
def test_a_group_too_large_for_the_host_is_refused_on_the_command_line_before_anything_is_written(
    tmp_path, assert_one_line_error, program, flags):
  # 10,000 runs of these shapes need terabytes: no test machine holds them. JAX_PLATFORMS pins the CPU's check.
  done = _finished(subprocess.Popen(_command(tmp_path / "w", *flags, "--seeds=0-9999", program=program),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=checkout_env(JAX_PLATFORMS="cpu")), 300)
  assert_one_line_error(done, "a group of 10000 runs needs about", "of host memory", "use at most")
  assert not (tmp_path / "w").exists()


# ---- processes started differently ------------------------------------------------------------------------------
def _launch(workdir, per_process, extra_env=None, programs=None):
  """``python -m fewshot.train --seeds 0-2`` as two processes, process k with ``per_process[k]``'s flags (and, where
  ``programs`` has k, ``python -c programs[k]`` with those flags instead).
  """
  with socket.socket() as s:
    s.bind(("localhost", 0))
    port = s.getsockname()[1]
  env = {**os.environ, **TWO_DEVICES, **(extra_env or {})}
  commands = [_command(workdir, *TINY, *flags, "--seeds=0-2", f"--coordinator_address=localhost:{port}",
                       "--num_processes=2", f"--process_id={k}") for k, flags in enumerate(per_process)]
  commands = [[sys.executable, "-c", programs[k], *c[3:]] if k in (programs or {}) else c
              for k, c in enumerate(commands)]
  return [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for c in commands]


def test_the_first_difference_between_processes_names_the_option_and_both_values():
  def launch(options, dirs=None):
    return {"options": options, "dirs": dirs or {"runs/a": None}}

  same = [("--episodes", 40), ("--resume", False)]
  assert distributed.disagreement([launch(same), launch(same), launch(same)]) is None
  assert distributed.disagreement([launch(same), launch([("--episodes", 60), ("--resume", False)])]) == (
      "process 1 has --episodes 60 where process 0 has 40; start every process with the same command.")
  assert distributed.disagreement([launch(same), launch(same), launch([("--episodes", 40), ("--resume", True)])]) \
      .startswith("process 2 has --resume where process 0 has --noresume;")
  seen = distributed.disagreement([launch(same, {"runs/a": {"checkpoints/last": 4}}), launch(same, {"runs/a": None})])
  assert seen.startswith("process 1 sees runs/a missing where process 0 sees it with checkpoints/last at step 4; ")
  assert "filesystem that every host shares" in seen


@pytest.mark.slow
@pytest.mark.parametrize("flags, fragment", [
    ((["--episodes=40"], ["--episodes=60"]), "process 1 has --episodes 60 where process 0 has 40; start every "
     "process with the same command."),
    (([], ["--resume"]), "process 1 has --resume where process 0 has --noresume"),
])
def test_processes_started_with_different_options_stop_together_before_writing(tmp_path, assert_one_line_error,
                                                                                flags, fragment):
  launched = _launch(tmp_path / "w", flags)
  started = time.monotonic()
  for process in launched:
    assert_one_line_error(_finished(process, 60), fragment)
  assert time.monotonic() - started < 30
  assert not (tmp_path / "w").exists()


# ---- a lost peer ------------------------------------------------------------------------------------------------
def _training(workdir: pathlib.Path, launched, timeout=240):
  """Wait until the group has written its first row (it is training, past compiling)."""
  deadline = time.monotonic() + timeout
  while not list(workdir.glob("*/metrics.jsonl")):
    assert time.monotonic() < deadline and all(p.poll() is None for p in launched), "the group did not start"
    time.sleep(0.2)


def _one_line(done, status, *fragments):
  lines = error_lines(done.stderr)
  assert done.returncode == status and len(lines) == 1, (done.returncode, done.stderr[-3000:])
  for fragment in fragments:
    assert fragment in lines[0], lines[0]


RESUME = "run the same command with --resume on every host to continue the group from its last checkpoint."


@pytest.mark.slow
def test_a_process_killed_stops_the_other_with_one_line_naming_it_within_its_heartbeat(tmp_path):
  launched = _launch(tmp_path, [["--episodes=2000"]] * 2)
  _training(tmp_path, launched)
  launched[1].kill()
  killed = time.monotonic()
  _one_line(_finished(launched[0], 60), 2, "error: lost process 1 of 2:", RESUME)
  assert time.monotonic() - killed < peers.HEARTBEAT_SECONDS + 10
  launched[1].wait()


# Process 1 of a launch, killed (SIGKILL) as it reaches the group's checkpoint barrier: process 0 is then inside it.
_KILLED_AT_THE_BARRIER = """
import os, runpy, signal, sys
from fewshot.training import distributed
def barrier(name):
  os.kill(os.getpid(), signal.SIGKILL)
distributed.barrier = barrier
sys.argv = ["fewshot.train", *sys.argv[1:]]
runpy.run_module("fewshot.train", run_name="__main__", alter_sys=True)
"""


@pytest.mark.slow
def test_a_peer_killed_at_the_checkpoint_barrier_leaves_one_line_on_process_0(tmp_path):
  """Issue 56: a peer killed inside the checkpoint barrier was said to leave Gloo's traceback on process 0."""
  launched = _launch(tmp_path, [["--episodes=24"]] * 2, programs={1: _KILLED_AT_THE_BARRIER})
  _one_line(_finished(launched[0], 240), 2, "error: lost process 1 of 2:", RESUME)
  assert launched[1].wait(60) == -signal.SIGKILL


@pytest.mark.slow
def test_the_coordinator_killed_stops_the_others_at_once_and_the_group_resumes(tmp_path):
  launched = _launch(tmp_path, [["--episodes=24"]] * 2)
  _training(tmp_path, launched)
  launched[0].kill()
  killed = time.monotonic()
  _one_line(_finished(launched[1], 60), 2, "error: lost process 0 of 2 (the coordinator, localhost:", RESUME)
  assert time.monotonic() - killed < 5
  launched[0].wait()
  # Whatever was saved resumes: the same command with --resume on both hosts finishes the group.
  for process in _launch(tmp_path, [["--episodes=24", "--resume"]] * 2):
    done = _finished(process, 300)
    assert done.returncode == 0, done.stderr[-3000:]
  from fewshot.records.rundir import RunDir

  for rundir in map(RunDir, sorted(tmp_path.iterdir())):
    assert [row["episode"] for row in rundir.read_metrics()] == list(range(2, 25, 2))
    assert rundir.read_results()["best_episode"] in range(2, 25, 2)


@pytest.mark.slow
def test_ctrl_c_on_one_process_stops_the_other_at_once_each_with_one_line(tmp_path):
  launched = _launch(tmp_path, [["--episodes=2000"]] * 2)
  _training(tmp_path, launched)
  launched[1].send_signal(signal.SIGINT)
  interrupted = time.monotonic()
  _one_line(_finished(launched[0], 60), 2, "error: process 1 of 2 was interrupted (Ctrl-C), so this one stops too;",
            RESUME)
  _one_line(_finished(launched[1], 60), 130, "interrupted: ", "run the same command with --resume on every host")
  assert time.monotonic() - interrupted < 5


@pytest.mark.slow
@pytest.mark.parametrize("signalled", [0, 1])
def test_sigterm_on_either_process_stops_the_group_each_with_one_line_and_143(tmp_path, signalled):
  """jax.distributed had handed SIGTERM to XLA's preemption notifier, which only logs it: the group trained to the
  end with status 0 (issue 29, case 2). SLURM's preemption sends it; every process now stops with 143.
  """
  launched = _launch(tmp_path, [["--episodes=2000"]] * 2)
  _training(tmp_path, launched)
  launched[signalled].send_signal(signal.SIGTERM)
  sent = time.monotonic()
  _one_line(_finished(launched[1 - signalled], 60), 143,
            f"error: process {signalled} of 2 was terminated (SIGTERM), so this one stops too;", RESUME)
  _one_line(_finished(launched[signalled], 60), 143, "terminated (SIGTERM): ",
            "run the same command with --resume on every host")
  assert time.monotonic() - sent < 10


def test_the_line_for_a_lost_process_names_it_from_the_runtime_records(monkeypatch):
  monkeypatch.setattr(peers, "_state", {"process": 0, "processes": 3, "address": "host0:1234"})
  assert peers._lost_line("DEADLINE_EXCEEDED: Deadline Exceeded RPC: RegisterTask") == (
      "error: process 0 of 3 could not join the others at host0:1234 within 300 s: a process did not start, or the "
      "address is not process 0's; start all 3 with the same --coordinator_address and --num_processes.")
  monkeypatch.setitem(peers._state, "joined", True)
  unhealthy = "UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):\n2\nThe tasks have crashed."
  assert peers._lost_line(unhealthy).startswith("error: lost process 2 of 3: it was killed or crashed")
  assert peers._lost_line("Task 1 heartbeat timeout.").startswith("error: lost process 1 of 3:")
  monkeypatch.setitem(peers._state, "process", 1)
  assert peers._lost_line("Socket closed").startswith("error: lost process 0 of 3 (the coordinator, host0:1234):")


# ---- the runtime's abort while a checkpoint save holds stderr (CI's failure of 2026-12-05) -----------------------
_ABORTED_DURING_A_SAVE = """
import os, sys
from fewshot.records import held_output
from fewshot.training import peers
peers.watch(1, 2, "localhost:1234")
peers._state["joined"] = True
with held_output.stderr_held():
  os.write(2, b"E1205 10:00:00.000000   4242 orbax_barrier.cc:7] a barrier's error, held with the save\\n")
  os.write(2, b"F1205 10:00:00.000001   4242 client.cc:99] Terminating process because the JAX distributed "
              b"service detected fatal errors. UNAVAILABLE: Socket closed\\n")
  os.abort()
"""


def test_the_runtime_s_abort_during_a_checkpoint_save_is_still_one_line_naming_the_coordinator():
  """A checkpoint save holds fd 2 in memory, so the abort's record never reached the filter: the coordinator's
  loss read as an unknown fatal error, status 134 and no line.
  """
  done = subprocess.run([sys.executable, "-c", _ABORTED_DURING_A_SAVE], capture_output=True, text=True,
                        env=checkout_env(), timeout=60)
  _one_line(done, 2, "error: lost process 0 of 2 (the coordinator, localhost:1234):", RESUME)


# ---- a collective's failure while the process already stops (issue 42, item 7) -----------------------------------
_STOPPING_WHILE_CRASHING = """
import os, sys, threading, time
from fewshot.training import peers
peers._state.update(process=0, processes=2, address="h:1", stderr=os.dup(2), held=[], joined=True)
peers.client = lambda: None
threading.Thread(target=peers.finish, args=("error: process 1 of 2 was terminated (SIGTERM), so this one stops "
                                            "too; resume.", 143)).start()
time.sleep(0.2)
try:
  raise RuntimeError("Gloo AllGather failed: Connection closed by peer")
except RuntimeError as e:
  peers.lost_contact(e)
  peers.crash(e)
"""


def test_an_error_raised_while_another_thread_stops_the_process_adds_no_traceback():
  """Process 1's SIGTERM had process 0's watchdog print the right line, then its main thread's failed collective
  (a checkpoint barrier, re-raised by the checkpoint library) printed a 50-line traceback ending "report it".
  """
  done = subprocess.run([sys.executable, "-c", _STOPPING_WHILE_CRASHING], capture_output=True, text=True,
                        env=checkout_env(), timeout=60)
  assert done.returncode == 143
  assert done.stderr.splitlines() == [
      "error: process 1 of 2 was terminated (SIGTERM), so this one stops too; resume."], done.stderr


def test_a_collective_failure_re_raised_under_another_type_still_reads_as_a_peer_gone():
  import jax

  try:
    try:
      raise jax.errors.JaxRuntimeError("INTERNAL: Gloo AllGather failed: Connection closed by peer [127.0.0.1]:5")
    except jax.errors.JaxRuntimeError as e:
      raise ValueError("the checkpoint's barrier failed") from e
  except ValueError as wrapped:
    assert peers._communication_failure(wrapped)
  assert not peers._communication_failure(ValueError("Connection closed"))  # not the runtime's own error
  assert not peers._communication_failure(jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: out of memory"))


# ---- whatever was saved resumes: a group stopped between its runs' saves ----------------------------------------
def _state(step: int):
  import flax.struct
  import numpy as np

  @flax.struct.dataclass
  class State:
    step: np.ndarray

  return State(np.int32(step))


def _saved(path: pathlib.Path, *steps: int):
  """A run directory whose ``last`` holds ``steps`` (tiny local checkpoints) and one row per checkpoint."""
  from fewshot.records import local_checkpoints
  from fewshot.records.rundir import RunDir

  rundir = RunDir(path)
  rundir.write_metrics([{"episode": e} for e in range(2, max(steps, default=0) + 1, 2)])
  for step in steps:
    local_checkpoints.save(path / "checkpoints" / "last", step, _state(step), keep=2)
  return rundir


def test_a_group_resumes_from_the_step_its_runs_all_hold_and_refuses_runs_further_apart(tmp_path):
  from fewshot.errors import RunDirError
  from fewshot.records.reuse import group_start

  ahead, behind = _saved(tmp_path / "a", 2, 4), _saved(tmp_path / "b", 2)
  assert group_start([ahead, behind], checkpoint_every=2) == 2  # stopped after run a saved 4, before run b did
  state, rows = ahead.resume(_state(0), "episode", at=2)
  assert int(state.step) == 2 and rows == [{"episode": 2}] and ahead.checkpoints.steps("last") == [2]
  first, fresh = _saved(tmp_path / "c", 2), _saved(tmp_path / "d")
  assert group_start([first, fresh], checkpoint_every=2) is None  # stopped between the first saves: both start over
  assert group_start([first, _saved(tmp_path / "e", 2)], checkpoint_every=2) == 2
  for runs in ([_saved(tmp_path / "f", 4), _saved(tmp_path / "g", 2)],  # f no longer holds 2
               [_saved(tmp_path / "h", 2, 4), fresh],  # two checkpoints apart
               [first, fresh, _saved(tmp_path / "i", 2, 4)]):
    with pytest.raises(RunDirError, match="saved at different checkpoints"):
      group_start(runs, checkpoint_every=2)
  with pytest.raises(RunDirError, match="saved at different checkpoints"):
    group_start([first, fresh], checkpoint_every=None)


@pytest.mark.slow  # stopped and resumed
def test_a_group_stopped_between_its_runs_saves_resumes_as_if_never_stopped(tmp_path, monkeypatch):
  from fewshot.config import Config
  from fewshot.records.checkpoints import Checkpoints
  from fewshot.records.rundir import RunDir
  from fewshot.train import train_group

  config = Config(dataset="strokes", head="dr", way=3, shot=1, query=2, test_query=2, episodes=6, eval_every=2,
                  val_episodes=3, test_episodes=4)
  straight = train_group(config, (0, 1), [str(tmp_path / "s0"), str(tmp_path / "s1")], progress=False)
  save = Checkpoints.save

  def stops_before_run_1_saves_episode_4(self, kind, step, state):
    if self.folder.parent.name == "r1" and kind == "last" and step == 4:
      raise KeyboardInterrupt
    return save(self, kind, step, state)

  monkeypatch.setattr(Checkpoints, "save", stops_before_run_1_saves_episode_4)
  dirs = [str(tmp_path / "r0"), str(tmp_path / "r1")]
  with pytest.raises(KeyboardInterrupt):
    train_group(config, (0, 1), dirs, progress=False)
  monkeypatch.setattr(Checkpoints, "save", save)
  assert [RunDir(d).checkpoints.step("last") for d in dirs] == [4, 2]
  assert train_group(config, (0, 1), dirs, resume=True, progress=False) == [
      {**result, "workdir": str(RunDir(d).path)} for result, d in zip(straight, dirs)]
  for d, s in zip(dirs, ("s0", "s1")):
    assert [{k: v for k, v in row.items() if k != "seconds"} for row in RunDir(d).read_metrics()] == \
        [{k: v for k, v in row.items() if k != "seconds"} for row in RunDir(tmp_path / s).read_metrics()]
    assert RunDir(d).checkpoints.steps("last") == [6]
