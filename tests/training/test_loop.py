"""How training stops (issue 12): a diverged loss, Ctrl-C, and resuming with the data somewhere else."""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import jax.numpy as jnp
import pytest

from fewshot.config import Config
from fewshot.data import default_tfds_dir
from fewshot.errors import TrainingError
from fewshot.records.checkpoints import Checkpoints
from fewshot.records.reuse import open_for_training
from fewshot.records.rundir import RunDir
from fewshot.train import train
from fewshot.training import loop
from fewshot.training.runs import Runs
from fewshot.training.train_state import TrainState

import tiny_run
from cli_output import error_lines

TINY = {**tiny_run.TINY, "episodes": 4}


def test_a_non_finite_loss_stops_the_loop_at_that_checkpoint_and_keeps_the_last_good_one(tmp_path):
  losses = {2: 1.0, 4: 0.5, 6: float("nan"), 8: 0.25}
  state = TrainState(step=jnp.int32(0), params={"w": jnp.zeros(3)}, batch_stats={"b": jnp.zeros(1)},
                     opt_state={"m": jnp.zeros(3)})

  def train_chunk(state, steps):
    step = state.step + steps
    return state.replace(step=step, params={"w": state.params["w"] + steps}), None

  def make_rows(state, _):
    step = int(state.step)
    return [{"step": step, "loss": losses[step], "val": float(step)}]

  rundir = RunDir(tmp_path / "run")
  fix = "lower --inner_lr (the inner loop's step) or --learning_rate"  # MAML's: its inner rate diverges too
  with pytest.raises(TrainingError, match=r"training loss at step 6 .* is nan .* checkpoints/last keeps step 4; lower "
                     r"--inner_lr \(the inner loop's step\) or --learning_rate and train again"):
    loop.train_until(Runs((rundir,)), state, loop.Checkpointing(8, 2, best_by="val", diverged_fix=fix), train_chunk,
                     make_rows, progress=False)
  from fewshot.episodic import methods  # noqa: PLC0415

  assert methods.get("maml").DIVERGED_FIX == fix and "inner_lr" not in methods.get("protonet").DIVERGED_FIX
  assert rundir.checkpoints.step("last") == 4 and rundir.checkpoints.step("best") == 4
  rows = [json.loads(line, parse_constant=lambda c: pytest.fail(f"bare {c}"))
          for line in rundir.metrics_path.read_text().splitlines()]
  assert [(r["step"], r["loss"]) for r in rows] == [(2, 1.0), (4, 0.5), (6, None)]


@pytest.mark.slow
def test_a_diverging_run_exits_2_in_one_line(tmp_path, assert_one_line_error):
  workdir = tmp_path / "run"
  result = subprocess.run([sys.executable, "-m", "fewshot.train", f"--workdir={workdir}", "--head=dr",
                           "--learning_rate=1e6", *tiny_run.flags(episodes=10, eval_every=5)],
                          capture_output=True, text=True)
  assert_one_line_error(result, "training stopped: the training loss at episode 5", "not finite",
                        "--learning_rate")
  assert not (workdir / "results.json").exists() and not (workdir / "checkpoints" / "last").exists()
  json.loads(RunDir(workdir).metrics_path.read_text(), parse_constant=lambda c: pytest.fail(f"bare {c}"))


@pytest.mark.slow
@pytest.mark.parametrize("signum, status, cause", [(signal.SIGINT, 130, "interrupted: "),
                                                   (signal.SIGTERM, 143, "terminated (SIGTERM): ")])
def test_ctrl_c_or_sigterm_prints_where_the_run_stopped_exits_at_once_and_resume_continues(signum, status, cause,
                                                                                            tmp_path):
  """Ctrl-C (exit 130) and SIGTERM, what SLURM and cloud preemption send (exit 143): one line each."""
  workdir = tmp_path / "run"
  command = [sys.executable, "-m", "fewshot.train", f"--workdir={workdir}",
             *tiny_run.flags(episodes=600, eval_every=50)]
  process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 300
  # A saved step, not the folder: orbax makes checkpoints/last when its first save starts, and under load a signal
  # sent then stops the run before that save is whole.
  while time.time() < deadline and RunDir(workdir).checkpoints.step("last") is None:
    assert process.poll() is None, process.communicate()[1][-2000:]
    time.sleep(0.1)
  time.sleep(0.3)  # into the next chunk: the main thread waits on the device
  sent = time.time()
  process.send_signal(signum)
  _, stderr = process.communicate(timeout=60)
  assert process.returncode == status, stderr[-2000:]
  assert time.time() - sent < 5.0
  lines = error_lines(stderr)
  assert len(lines) == 1 and lines[0].startswith(cause) and "--resume" in lines[0], stderr[-2000:]
  saved = RunDir(workdir).checkpoints.step("last")
  assert saved < 600 and f"stopped at episode {saved} of 600" in lines[0]
  assert not (workdir / "results.json").exists()
  # The run directory alone: its config.json stands in for the flags (before, each had to be repeated).
  resumed = subprocess.run([sys.executable, "-m", "fewshot.train", f"--workdir={workdir}", "--resume"],
                           capture_output=True, text=True)
  assert resumed.returncode == 0, resumed.stderr[-2000:]
  assert [r["episode"] for r in RunDir(workdir).read_metrics()] == list(range(50, 601, 50))
  assert RunDir(workdir).read_results() is not None


def test_resume_takes_the_data_from_a_new_place(tmp_path):
  """The data's location is not part of a run: a moved (or symlinked) tfds dir resumes, and the record follows."""
  train(Config(**TINY, tfds_dir=str(default_tfds_dir())), tmp_path / "run", progress=False)
  moved = tmp_path / "moved"
  shutil.copytree(pathlib.Path(default_tfds_dir()) / "fewshot_strokes", moved / "fewshot_strokes")
  os.symlink(moved, tmp_path / "link")
  before = RunDir(tmp_path / "run").read_results()
  RunDir(tmp_path / "run").results_path.unlink()  # stopped while testing: a complete run is not tested again
  results = train(Config(**TINY, tfds_dir=str(tmp_path / "link")), tmp_path / "run", resume=True, progress=False)
  assert results["test_accuracy"] == before["test_accuracy"]  # tested again, on the data read from the link
  assert RunDir(tmp_path / "run").read_config()["tfds_dir"] == str(tmp_path / "link")


def test_a_groups_progress_names_the_seed_whose_numbers_it_shows(tmp_path):
  from fewshot.config import Config
  from fewshot.training import loop
  from fewshot.training.runs import Runs

  group = Runs.open(Config(), (3, 4), [str(tmp_path / "a"), str(tmp_path / "b")], resume=False)
  assert loop._first_runs_fields(group, {"loss": "0.412"}) == {"seed": 3, "loss": "0.412"}
  alone = Runs.open(Config(), None, [str(tmp_path / "c")], resume=False)
  assert loop._first_runs_fields(alone, {"loss": "0.412"}) == {"loss": "0.412"}


def test_a_stop_after_training_says_the_test_was_stopped_and_that_resume_tests_it(tmp_path):
  """Before, Ctrl-C while testing printed only "interrupted." (issue 29, case 9)."""
  state = TrainState(step=jnp.int32(0), params={"w": jnp.zeros(1)}, batch_stats={}, opt_state={})
  rundir = RunDir(tmp_path / "run")
  train_chunk = lambda state, steps: (state.replace(step=state.step + steps), None)  # noqa: E731
  make_rows = lambda state, _: [{"step": int(state.step), "loss": 1.0, "val": 1.0}]  # noqa: E731
  loop.train_until(Runs((rundir,)), state, loop.Checkpointing(4, 2, best_by="val"), train_chunk, make_rows, progress=False)
  assert loop.interrupted_message() == (f"interrupted: {rundir.path} finished training (step 4) and stopped while "
                                        "testing its best checkpoint; run the same command with --resume to test it.")
  other = RunDir(tmp_path / "other")  # the next run's training is training again
  loop._set_position(Runs((other,)), loop.Checkpointing(4, 2, best_by="val"), 2)
  assert loop.interrupted_message().endswith("stopped at step 2 of 4, its last checkpoint; run the same command with "
                                             "--resume to continue.")
  # fewshot.reproduce has no --resume (issue 56): the same command, again, continues it.
  assert loop.interrupted_message(resume="again").endswith("its last checkpoint; run the same command again to "
                                                           "continue.")


def test_a_loop_stopped_inside_its_first_checkpoint_opens_for_resuming_and_replays_it(tmp_path, monkeypatch):
  """The rule and the loop of case 1 below in a second: rows, then best, then (stopped) last."""
  state = TrainState(step=jnp.int32(0), params={"w": jnp.zeros(1)}, batch_stats={}, opt_state={})
  train_chunk = lambda state, steps: (state.replace(step=state.step + steps, params={"w": state.params["w"] + 1}),  # noqa: E731
                                      None)
  make_rows = lambda state, _: [{"step": int(state.step), "loss": 1.0, "val": float(state.params["w"][0])}]  # noqa: E731
  checkpointing, config = loop.Checkpointing(4, 2, best_by="val"), Config(**TINY)
  rundir = RunDir(tmp_path / "run")
  rundir.write_config(config.to_dict())
  save = Checkpoints.save
  monkeypatch.setattr(Checkpoints, "save", lambda d, kind, step, s: save(d, kind, step, s) if kind == "best"
                      else (_ for _ in ()).throw(KeyboardInterrupt))
  with pytest.raises(KeyboardInterrupt):
    loop.train_until(Runs((rundir,)), state, checkpointing, train_chunk, make_rows, progress=False)
  monkeypatch.undo()
  assert rundir.checkpoints.step("best") == 2 and not rundir.checkpoints.has("last")
  opened = open_for_training(rundir.path, config, resume=True)
  loop.train_until(Runs((opened,)), state, checkpointing, train_chunk, make_rows, progress=False)
  assert [(r["step"], r["val"]) for r in opened.read_metrics()] == [(2, 1.0), (4, 2.0)]
  assert opened.checkpoints.steps("best") == [4] and opened.checkpoints.steps("last") == [4]


@pytest.mark.slow  # three trainings: ~30 s
def test_a_stop_inside_the_first_checkpoint_resumes_from_the_start_to_the_same_records(tmp_path, monkeypatch):
  """Stopped after checkpoints/best/<first> was written and before checkpoints/last/<first> (issue 29, case 1):
  --resume refused ("metrics but no checkpoints/last") and a new start was refused too ("already holds this run").
  """
  config = Config(**TINY)
  whole = train(config, str(tmp_path / "whole"), progress=False)
  save = Checkpoints.save

  def stop_before_the_first_last(rundir, kind, step, state):
    if kind == "last":
      raise KeyboardInterrupt
    save(rundir, kind, step, state)

  monkeypatch.setattr(Checkpoints, "save", stop_before_the_first_last)
  with pytest.raises(KeyboardInterrupt):
    train(config, str(tmp_path / "cut"), progress=False)
  assert loop.interrupted_message().endswith("stopped before its first checkpoint; run the same command with --resume "
                                             "to continue.")
  monkeypatch.undo()
  cut = RunDir(tmp_path / "cut")
  assert cut.checkpoints.has("best") and not cut.checkpoints.has("last") and len(cut.read_metrics()) == 1
  resumed = train(config, str(cut.path), resume=True, progress=False)
  timeless = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
  assert timeless(cut.read_metrics()) == timeless(RunDir(tmp_path / "whole").read_metrics())
  assert resumed["test_accuracy"] == whole["test_accuracy"] and cut.checkpoints.step("best") == whole["best_episode"]
