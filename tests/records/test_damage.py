"""Damaged run files refused in one line, whatever was saved still usable (issue "Faults a cluster user meets",
cases 7-10 and 14): checkpoints, config.json, a metric-learning run where a few-shot one is expected, compilation
cache entries; and θ of a softmax run.

One tiny few-shot run is trained per module and copied per case; the damage is done to the copy's files.
"""

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import fewshot
from fewshot.config import Config
from fewshot.dml.config import DMLConfig
from fewshot.errors import RunDirError
from fewshot.evaluate import evaluate, evaluate_lake
from fewshot.records import local_checkpoints, writer_lock
from fewshot.records.reading import read_run
from fewshot.records.rundir import RunDir

import tiny_run

TINY = {**tiny_run.TINY, "episodes": 4}  # two checkpoints, best and last
TINY_FLAGS = tiny_run.flags(**TINY)
TINY_DML = DMLConfig(embedding_dim=8, classes=4, per_class=2, steps_per_epoch=2, epochs=1)


def _cli(module, *args, **kwargs):
  return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, **kwargs)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  from fewshot.train import train

  path = tmp_path_factory.mktemp("trained") / "run"
  train(Config(**TINY), str(path), progress=False)
  return path


@pytest.fixture
def run(trained, tmp_path):
  """A copy of the trained run, to damage."""
  return pathlib.Path(shutil.copytree(trained, tmp_path / "run"))


def _step_folder(run, kind):
  folder = run / "checkpoints" / kind
  return folder / str(max(int(p.name) for p in folder.iterdir() if p.name.isdigit()))


def _largest(folder):
  return max((p for p in folder.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


def _truncate(step):
  path = _largest(step)
  path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage(step):
  path = _largest(step)
  path.write_bytes(np.random.default_rng(0).bytes(path.stat().st_size))


def _empty(step):
  for path in list(step.iterdir()):
    shutil.rmtree(path) if path.is_dir() else path.unlink()


DAMAGES = {
    "truncated": _truncate,
    "garbage": _garbage,
    "zero_length": lambda step: _largest(step).write_bytes(b""),
    "bad_metadata": lambda step: (step / "default" / "_METADATA").write_text('{"tree_metadata": {'),
    "bad_checkpoint_metadata": lambda step: (step / "_CHECKPOINT_METADATA").write_text("not json"),
    "empty_step_folder": _empty,
}


def _files(path):
  """Every record under ``path`` with a digest of its bytes: what a refused command must leave as it was (the writer's
  lock names whichever training held it last: bookkeeping, not a record).
  """
  return {str(p.relative_to(path)): hashlib.sha1(p.read_bytes()).hexdigest() for p in path.rglob("*")
          if p.is_file() and p.name != writer_lock.NAME}


def _raises_one_line(call, *fragments):
  with pytest.raises(RunDirError) as info:
    call()
  message = str(info.value)
  assert "\n" not in message, message
  for fragment in fragments:
    assert fragment in message, message
  return message


# ---- case 7: checkpoints ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_checkpoint_is_named_by_load_and_evaluate_and_the_other_still_loads(run, damage):
  step = _step_folder(run, "best")
  DAMAGES[damage](step)
  way_out = "use the last checkpoint instead (--checkpoint last; fewshot.load(..., checkpoint='last'))"
  _raises_one_line(lambda: fewshot.load(str(run)), f"{step} is damaged (", way_out)
  _raises_one_line(lambda: evaluate(str(run)), f"{step} is damaged (", way_out)
  assert fewshot.load(str(run), "last").variables["params"]["backbone"]  # whatever was saved still loads


@pytest.mark.parametrize("damage", DAMAGES)
def test_resuming_from_a_damaged_last_checkpoint_is_refused_and_writes_nothing(run, damage):
  from fewshot.train import train

  step = _step_folder(run, "last")
  DAMAGES[damage](step)
  (run / "results.json").unlink()  # stopped before its test: a finished run resumes to nothing (it is complete)
  before = _files(run)
  _raises_one_line(lambda: train(Config(**TINY), str(run), resume=True, progress=False), f"{step} is damaged (",
                   "the run cannot continue from it: train the run anew in a new --workdir")
  assert _files(run) == before


def _as_local_checkpoints(run):
  """The run's checkpoints rewritten as one process of a multi-process group writes them (state.msgpack)."""
  from fewshot.episodic import learning
  from fewshot.episodic.learners import build_learner
  from fewshot.training.train_state import run_keys

  rundir, config = RunDir(run), Config(**TINY)
  like = learning.init_state(build_learner(config, None, None), run_keys(config.seed)["init"], config.input_shape)
  for kind in ("best", "last"):
    step, state = rundir.checkpoints.step(kind), rundir.checkpoints.restore(kind, like)
    shutil.rmtree(_step_folder(run, kind))
    local_checkpoints.save(run / "checkpoints" / kind, step, state)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "zero_length"])
def test_a_damaged_state_msgpack_is_named(run, damage):
  _as_local_checkpoints(run)
  DAMAGES[damage](_step_folder(run, "best"))
  path = _step_folder(run, "best") / local_checkpoints.FILENAME
  _raises_one_line(lambda: fewshot.load(str(run)), f"{path.parent} is damaged (state.msgpack: ", "--checkpoint last")
  assert fewshot.load(str(run), "last").config == Config(**TINY)


def test_damaged_checkpoints_through_the_command_line(run, assert_one_line_error):
  """The orbax reads abandoned after the first failed one print nothing (they once printed dozens of tracebacks)."""
  DAMAGES["garbage"](_step_folder(run, "best"))
  assert_one_line_error(_cli("fewshot.evaluate", f"--workdir={run}"), f"{_step_folder(run, 'best')} is damaged",
                        "--checkpoint last")
  DAMAGES["truncated"](_step_folder(run, "last"))
  (run / "results.json").unlink()  # stopped before its test: a finished run resumes to nothing (it is complete)
  before = _files(run)
  assert_one_line_error(_cli("fewshot.train", f"--workdir={run}", "--resume", *TINY_FLAGS),
                        f"{_step_folder(run, 'last')} is damaged", "train the run anew in a new --workdir")
  assert _files(run) == before


# ---- case 8: config.json ------------------------------------------------------------------------------------------
CONFIG_EDITS = {
    "cut_short": (lambda text: text[: len(text) // 2], "is not JSON ("),
    "not_json": (lambda text: "\x00\xff garbage", "is not JSON ("),
    "a_list": (lambda text: "[]", "holds a JSON list, not the run's options"),
    "way_five": (lambda text: _edit(text, way="five"), ": --way is 'five', not a positive integer; "),
    "learning_rate_fast": (lambda text: _edit(text, learning_rate="fast"),
                           ": --learning_rate is 'fast', not a positive number; "),
    "seed_null": (lambda text: _edit(text, seed=None), ": --seed is None, not an integer; "),
    "way_negative": (lambda text: _edit(text, way=-3), ": --way must be a positive integer, got -3; "),
}


def _resume(run):
  from fewshot.train import train

  return train(Config(**TINY), str(run), resume=True, progress=False)


READERS = {
    "evaluate": lambda run: evaluate(str(run)),
    "load": lambda run: fewshot.load(str(run)),
    "resume": _resume,
    "analysis": lambda run: read_run(run, Config.from_dict),
}


def _edit(text, **values):
  return json.dumps({**json.loads(text), **values}, indent=2)


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("edit", CONFIG_EDITS)
def test_a_damaged_config_json_is_named_with_its_field(run, edit, reader):
  change, fragment = CONFIG_EDITS[edit]
  path = run / "config.json"
  path.write_text(change(path.read_text()))
  before = _files(run)
  _raises_one_line(lambda: READERS[reader](run), f"{path}", fragment,
                   "restore the file from a backup, or train the run anew in a new --workdir.")
  assert _files(run) == before


def test_a_damaged_config_json_through_the_command_line(run, trained, assert_one_line_error):
  path = run / "config.json"
  path.write_text(_edit(path.read_text(), way="five"))
  for result in (_cli("fewshot.evaluate", f"--workdir={run}"), _cli("fewshot.analyze", str(run), str(trained))):
    assert_one_line_error(result, f"{path}: --way is 'five', not a positive integer; restore the file")


# ---- case 9: a metric-learning run where a few-shot one is expected, and the reverse ------------------------------
@pytest.fixture
def dml_run(run):
  """A metric-learning run's record (what tells the kinds apart: its config.json) over a run directory."""
  RunDir(run).write_config({**TINY_DML.to_dict(), "input_shape": [28, 28, 1]})
  return run


def test_a_metric_learning_run_is_not_read_as_a_few_shot_one(dml_run, assert_one_line_error):
  from fewshot.train import train

  fragments = (f"{dml_run} holds a metric-learning run (python -m fewshot.dml.train), not a few-shot one: its test "
               "results are in its results.json (python -m fewshot.evaluate re-tests it)",)
  for call in (lambda: evaluate(str(dml_run)), lambda: evaluate_lake(str(dml_run), "all_runs"),
               lambda: fewshot.load(str(dml_run)), lambda: read_run(dml_run, Config.from_dict)):
    _raises_one_line(call, *fragments)
  _raises_one_line(lambda: train(Config(**TINY), str(dml_run), resume=True),
                   f"{dml_run} holds a metric-learning run (python -m fewshot.dml.train), not a few-shot one; "
                   "choose another --workdir.")
  # The command re-tests a metric-learning run by its retrieval: here one that never saved a checkpoint.
  unsaved = dml_run.parent / "unsaved"
  RunDir(unsaved).write_config({**TINY_DML.to_dict(), "input_shape": [28, 28, 1]})
  assert_one_line_error(_cli("fewshot.evaluate", f"--workdir={unsaved}"),
                        f"{unsaved} has no 'best' checkpoint yet; train it first (python -m fewshot.dml.train --resume)")


def test_a_few_shot_run_is_not_resumed_as_a_metric_learning_one(run):
  from fewshot.dml.train import train

  _raises_one_line(lambda: train(TINY_DML, str(run), resume=True), f"{run} holds a few-shot run "
                   "(python -m fewshot.train), not a metric-learning one; choose another --workdir.")


# ---- case 10: compilation cache entries ---------------------------------------------------------------------------
COMPILE = ("import jax, jax.numpy as jnp\n"
           "from fewshot.training import compilation_cache\n"
           "compilation_cache.enable()\n"
           "print(float(jax.jit(lambda x: jnp.sin(x) * 2 + 1)(jnp.arange(3.0)).sum()))\n")


def test_a_damaged_compilation_cache_entry_is_dropped_and_compiled_again(tmp_path):
  cache = tmp_path / "cache"
  env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
  env["FEWSHOT_COMPILATION_CACHE"] = str(cache)

  def compile_once():
    result = subprocess.run([sys.executable, "-c", COMPILE], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    return result

  first = compile_once()
  entries = sorted(cache.glob("*-cache"))
  assert entries
  for entry in entries:
    entry.write_bytes(np.random.default_rng(0).bytes(entry.stat().st_size))
  damaged = {entry: entry.read_bytes() for entry in entries}
  second = compile_once()
  added = [line for line in second.stderr.splitlines() if line not in first.stderr.splitlines()]
  assert added == [f"warning: dropped a damaged compiled program from the compilation cache {cache}; it is compiled "
                   "again."], second.stderr
  assert second.stdout == first.stdout
  assert all(entry.read_bytes() != data for entry, data in damaged.items())  # replaced by the programs compiled again
  third = compile_once()
  assert third.stderr == first.stderr and third.stdout == first.stdout


# ---- case 14: theta -------------------------------------------------------------------------------------------------
def test_theta_is_the_dr_heads_only(trained):
  """A softmax run carries rho (its metrics rows record exp(rho) as ever) but has no theta; the DR head has one."""
  assert fewshot.load(str(trained)).theta is None
  assert fewshot.build(Config(**TINY)).theta is None
  assert fewshot.build(Config(**TINY, head="dr")).theta == pytest.approx(np.exp(2.0))
  rows = RunDir(trained).read_metrics()
  assert [row["theta"] for row in rows] == [pytest.approx(np.exp(2.0))] * len(rows)



def test_a_config_json_that_is_a_folder_and_an_absurd_episode_are_one_line_each(tmp_path):
  """Before: IsADirectoryError and OverflowError tracebacks (issue 29, case 10)."""
  folder = RunDir(tmp_path / "folder")
  (folder.path / "config.json").mkdir(parents=True)
  with pytest.raises(RunDirError, match=r"config.json is a folder, not the run's options; restore") as refused:
    folder.read_config()
  assert "\n" not in str(refused.value)
  edited = RunDir(tmp_path / "edited")
  edited.write_config(Config().to_dict())
  edited.write_metrics([{"episode": 100, "val_accuracy": 50.0}, {"episode": 1e30, "val_accuracy": 60.0}])
  with pytest.raises(RunDirError, match=r"has a row at episode 1e\+30, not a whole number of episodes"):
    read_run(edited.path, Config.from_dict)
  edited.write_metrics([{"episode": 100.0, "val_accuracy": 50.0}])  # 100.0 is a whole number
  assert read_run(edited.path, Config.from_dict).rows[0]["episode"] == 100.0


def test_a_one_class_episode_is_refused():
  """Before, --way 1 trained at loss 0.000 to 100.00% ± 0.00% without a word (issue 29, case 7)."""
  from fewshot.errors import ConfigError  # noqa: PLC0415

  for options in ({"way": 1}, {"test_way": 1}):
    with pytest.raises(ConfigError, match=f"--{next(iter(options))} 1 draws one-class episodes"):
      Config(**options)


_HOLDS_THE_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.write(fd, b"process 4242 on a host (since now)")
print("held", flush=True)
time.sleep(60)
"""


def test_a_checkpoint_unreadable_while_a_training_holds_the_run_is_not_called_damaged(run):
  """Issue 56: ``evaluate`` during training said a checkpoint being replaced "is damaged" and advised a backup."""
  import subprocess  # noqa: PLC0415
  import sys  # noqa: PLC0415

  step = _step_folder(run, "best")
  _truncate(step)
  holder = subprocess.Popen([sys.executable, "-c", _HOLDS_THE_LOCK, str(run / writer_lock.NAME)],
                            stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == "held"
    said = _raises_one_line(lambda: fewshot.load(str(run)), "was replaced three times while it was read",
                            "(process 4242 on a host (since now) is still training the run)")
    assert "damaged" not in said
  finally:
    holder.kill()
    holder.wait()
  _raises_one_line(lambda: fewshot.load(str(run)), f"{step} is damaged (")  # no training: the files' fault
