"""python -m fewshot.evaluate records what it measured in the run directory, and says what it tests."""

import dataclasses
import itertools
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from fewshot import evaluate
from fewshot.config import Config
from fewshot.errors import ConfigError, OutputError
from fewshot.method_rows import METHODS
from fewshot.records.rundir import RunDir

from tiny_run import TINY

RUN = Config(dataset="strokes", head="dr")  # test_episodes 600, test_query 15, seed 0, test_shifts 0


def test_a_record_name_holds_every_option_that_changes_the_measurement():
  name = lambda test_by="episode", cached=600, checkpoint="best", step=2000, **used: evaluate.record_name(  # noqa: E731
      RUN, dataclasses.replace(RUN, **used), checkpoint, step, test_by, cached)
  assert name() == "test_best@2000_600ep.json"
  assert name(test_episodes=10000) == "test_best@2000_10000ep.json"
  assert name("cached", 10000) == "test_best@2000_10000ep_cached.json"
  assert name("both") == "test_best@2000_600ep_both.json"
  assert name("both", 10000) == "test_best@2000_600ep_both_cached10000ep.json"
  assert name(checkpoint="last", step=2500, test_query=5, test_shifts=2, seed=7) == \
      "test_last@2500_600ep_query5_shifts2_seed7.json"
  assert name(test_way=20, shot=5) == "test_best@2000_600ep_way20_shot5.json"
  # An option at the run's own value is the run's measurement: the same name as leaving it out.
  assert name(seed=0, test_query=15, test_shifts=0, shot=1, test_way=5) == name()
  # Every different measurement has its own name: never one file for two of them.
  grid = list(itertools.product(("best", "last"), (2000, 2500), ("episode", "cached", "both"), (600, 900), (600, 10000),
                                (15, 5), (0, 1), (0, 3), (5, 20), (1, 5)))
  names = {}
  for checkpoint, step, test_by, episodes, cached, query, shifts, seed, way, shot in grid:
    measured = (checkpoint, step, test_by, cached if test_by == "cached" else episodes,
                cached if test_by == "both" else None, query, shifts, seed, way, shot)
    key = name(test_by, cached, checkpoint, step, test_episodes=episodes, test_query=query, test_shifts=shifts,
               seed=seed, test_way=way, shot=shot)
    assert names.setdefault(key, measured) == measured, key


def fake_run(path, step=2000) -> RunDir:
  """A run directory with a best checkpoint at ``step`` (its folder only: nothing here restores it)."""
  rundir = RunDir(path)
  rundir.write_config(RUN.to_dict())
  (rundir.path / "checkpoints" / "best" / str(step)).mkdir(parents=True)
  (rundir.path / "checkpoints" / "best" / str(step) / "state.msgpack").write_bytes(b"")
  return rundir


# The command's main with its test replaced by a known measurement: what it prints and writes (no JAX).
FAKE_TEST = textwrap.dedent("""
    import sys
    from fewshot import runner
    from fewshot import evaluate as command

    def run_measurement(m, progress=True):
      episodes = m.cached_episodes if m.test_by == "cached" else m.used.test_episodes
      return {{"model": "ProtoNet_DR", "test_accuracy": 91.5, "test_ci95": 0.25, "test_episodes": episodes,
               "test_query": 15, "test_by": m.test_by, "checkpoint": m.checkpoint, "checkpoint_episode": 2000}}

    command.define_flags()
    command.run_measurement = run_measurement
    sys.argv = ["evaluate"] + {argv}
    runner.run(command.main)
""")


def _fake(*argv):
  return subprocess.run([sys.executable, "-c", FAKE_TEST.format(argv=list(argv))], capture_output=True, text=True)


def test_the_command_writes_its_measurement_with_the_options_it_used(tmp_path):
  rundir = fake_run(tmp_path / "run")
  done = _fake(f"--workdir={rundir.path}")
  assert done.returncode == 0, done.stderr
  record = rundir.path / "test_best@2000_600ep.json"
  assert done.stdout.splitlines() == [
      "ProtoNet_DR (best checkpoint, episode 2000, 5-way 1-shot 15-query): test accuracy 91.50% ± 0.25% (600 "
      "episodes)", f"wrote {record}"]
  written = json.loads(record.read_text())
  assert written["test_accuracy"] == 91.5 and written["checkpoint_episode"] == 2000
  assert written["options"] == {"checkpoint": "best", "checkpoint_episode": 2000, "test_by": "episode",
                                "test_episodes": 600, "cached_episodes": None, "test_way": 5, "shot": 1,
                                "test_query": 15, "seed": 0,
                                "test_shifts": 0, "data_dir": None, "tfds_dir": None}
  # Another measurement goes to another file; the first is left as it was.
  before = record.read_bytes()
  done = _fake(f"--workdir={rundir.path}", "--test_by=cached", "--cached_episodes=10000", "--seed=3",
               "--data_dir=~/omniglot")
  assert done.returncode == 0, done.stderr
  other = json.loads((rundir.path / "test_best@2000_10000ep_cached_seed3.json").read_text())
  assert other["options"]["cached_episodes"] == 10000 and other["options"]["seed"] == 3
  assert other["options"]["data_dir"] == os.path.expanduser("~/omniglot") and record.read_bytes() == before
  # --norecord prints only; nothing else was ever left in the run directory (no temporary files).
  done = _fake(f"--workdir={rundir.path}", "--norecord", "--test_episodes=50")
  assert done.returncode == 0 and "wrote" not in done.stdout
  assert sorted(p.name for p in rundir.path.iterdir()) == [
      "checkpoints", "config.json", "test_best@2000_10000ep_cached_seed3.json", "test_best@2000_600ep.json"]


def test_an_unwritable_run_directory_is_refused_before_anything_is_tested(tmp_path, monkeypatch):
  rundir = fake_run(tmp_path / "run")
  monkeypatch.setattr(os, "access", lambda path, mode: False)  # as a read-only folder is, even to root
  with pytest.raises(OutputError, match="--workdir .* cannot be written"):
    evaluate.record_path(str(rundir.path))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  from fewshot.train import train  # noqa: PLC0415  (JAX: only for the test that trains)

  workdir = tmp_path_factory.mktemp("evaluate_records") / "run"
  return workdir, train(Config(dataset="strokes", **{**TINY, "test_episodes": 4}), str(workdir), progress=False)


@pytest.mark.parametrize("method", ["baseline_pp", "maml"])
def test_a_cached_test_of_a_method_without_a_distance_head_is_refused_naming_its_own_test(tmp_path, method):
  rundir = fake_run(tmp_path / "run")
  rundir.write_config(dataclasses.replace(RUN, method=method, head="softmax", **(
      {"base_classes": 9} if method == "baseline_pp" else {})).to_dict())
  summary = re.escape(METHODS[method].summary)
  for test_by in ("cached", "both"):
    with pytest.raises(ConfigError, match=rf"^--test_by {test_by} embeds the test split once and classifies under a "
                       rf"distance head; a --method {method} run tests otherwise \({summary}\): use --test_by "
                       r"episode\.$"):
      evaluate.resolve(str(rundir.path), test_by=test_by)
  assert evaluate.resolve(str(rundir.path)).test_by == "episode"


def test_a_real_test_says_what_it_tests_and_records_the_accuracy_it_printed(trained):
  workdir, results = trained
  done = subprocess.run([sys.executable, "-m", "fewshot.evaluate", f"--workdir={workdir}"], capture_output=True,
                        text=True)
  assert done.returncode == 0, done.stderr[-2000:]
  lines = [line for line in done.stderr.splitlines() if line.startswith(("testing", "tested"))]
  assert lines[0] == f"testing {workdir} best checkpoint (episode 2) on 4 episodes" and lines[1].startswith("tested in")
  printed = f"test accuracy {results['test_accuracy']:.2f}% ± {results['test_ci95']:.2f}% (4 episodes)"
  assert printed in done.stdout
  record = json.loads((workdir / "test_best@2_4ep.json").read_text())
  assert record["test_accuracy"] == results["test_accuracy"] and record["options"]["test_query"] == 1


@pytest.mark.slow  # one more test program compiled, in a command: ~10 s
def test_another_episode_shape_tests_the_same_checkpoint_and_is_recorded_under_its_own_name(trained):
  workdir, _ = trained
  done = subprocess.run([sys.executable, "-m", "fewshot.evaluate", f"--workdir={workdir}", "--shot=2",
                         "--test_episodes=3"], capture_output=True, text=True)
  assert done.returncode == 0, done.stderr[-2000:]
  assert "(best checkpoint, episode 2, 2-way 2-shot 1-query): test accuracy" in done.stdout
  record = json.loads((workdir / "test_best@2_3ep_shot2.json").read_text())
  assert record["options"]["shot"] == 2 and record["test_episodes"] == 3


def test_a_long_loop_of_batches_says_how_far_it_is_off_a_terminal_at_most_every_interval(capsys, monkeypatch):
  from fewshot.training import progress  # noqa: PLC0415

  now = [0.0]
  monkeypatch.setattr(progress.time, "perf_counter", lambda: now[0])
  update = progress.batches("embedding", "image", shown=True, every_s=30.0)
  for done, seconds in ((100, 0.0), (200, 10.0), (300, 40.0), (400, 45.0)):  # lines at 0 and 40 s, and the end
    now[0] = seconds
    update(done, 400)
  lines = capsys.readouterr().err.splitlines()
  assert [line.split(",")[0] for line in lines] == ["embedding: image 100/400", "embedding: image 300/400",
                                                    "embedding: image 400/400"]
  progress.batches("embedding", "image", shown=False)(400, 400)
  assert capsys.readouterr().err == ""


@pytest.mark.slow  # a shifted test compiled: ~10 s
def test_a_test_with_shifts_says_how_far_its_embedding_is(trained, capsys):
  """Issue 56 item 4: the recipe's --test_shifts 3 test ran ~16.5 minutes with no progress line."""
  workdir, _ = trained
  evaluate.evaluate(str(workdir), test_shifts=1, progress=True)
  lines = [line for line in capsys.readouterr().err.splitlines() if "test images embedded" in line]
  assert lines and lines[-1].startswith("ProtoNet_S: test images embedded (9 shifted views of each image): image ")
  done, total = lines[-1].split("image ", 1)[1].split(",")[0].split("/")
  assert done == total and int(total) > 0
  evaluate.evaluate(str(workdir), test_shifts=1, progress=False)
  assert "test images embedded" not in capsys.readouterr().err
