"""One writer per run directory (issue 29, case 4): two trainings into one --workdir at once ended with one run's
records beside the other's checkpoint, and a test accuracy measured on the other run's weights.
"""

import json
import os
import signal
import subprocess
import sys

import pytest

from fewshot.config import Config
from fewshot.errors import RunDirError
from fewshot.records import writer_lock
from fewshot.records.rundir import RunDir
from fewshot.training.runs import Runs

import tiny_run
from environment import checkout_env

TINY = {**tiny_run.TINY, "episodes": 4}
HOLD = ("import pathlib, sys, time; from fewshot.records import writer_lock\n"
        "writer_lock.hold(pathlib.Path(sys.argv[1])); print('held', flush=True); time.sleep(120)")


def _holder(path):
  holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True,
                            env=checkout_env())
  assert holder.stdout.readline().strip() == "held"
  return holder


def test_a_directory_another_process_writes_is_refused_naming_it_and_its_lock_dies_with_it(tmp_path):
  run = tmp_path / "run"
  holder = _holder(run)
  try:
    runs = Runs.open(Config(**TINY), None, [str(run)], resume=False)  # a directory holding only a lock is empty
    with pytest.raises(RunDirError, match=rf"{run} is being written by process {holder.pid} on .*; wait for that "
                                          "training to end") as info:
      runs.begin()
    assert "\n" not in str(info.value) and not RunDir(run).holds_run()
  finally:
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
  runs.begin()  # the killed holder's lock went with it; its file stays
  assert RunDir(run).holds_run() and (run / writer_lock.NAME).exists()
  writer_lock.release(run)


def test_a_run_written_between_the_check_and_the_lock_is_checked_again(tmp_path):
  """The first command finished (its lock released) after the second had checked the empty directory."""
  run = tmp_path / "run"
  second = Runs.open(Config(**TINY), None, [str(run)], resume=False)
  first = RunDir(run)
  first.write_config({**Config(**{**TINY, "way": 3}).to_dict(), "input_shape": [28, 28, 1]})
  first.write_metrics([{"episode": 2, "train_loss": 1.0}])
  with pytest.raises(RunDirError, match="holds a different run .* --way"):
    second.begin()
  assert json.loads((run / "config.json").read_text())["way"] == 3
  writer_lock.release(run)


def test_one_process_trains_a_directory_again_under_the_lock_it_holds(tmp_path):
  run = tmp_path / "run"
  writer_lock.hold(run)
  writer_lock.hold(run)  # no second lock to wait for: the process is the one writer
  writer_lock.release(run)
  holder = _holder(run)  # released: another process takes it
  holder.kill()
  holder.wait()
