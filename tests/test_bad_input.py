"""Bad input refused in one line (issue 12): options checked before JAX loads, run directories, outputs, records."""

import json
import os
import subprocess
import sys

import pytest

from fewshot.config import Config
from fewshot.dml.config import DMLConfig
from fewshot.errors import ConfigError, OutputError, RunDirError, one_line
from fewshot.records import files
from fewshot.records.reuse import open_for_training
from fewshot.records.rundir import RunDir

from tiny_run import TINY


def _cli(module, *args, **kwargs):
  return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, **kwargs)


def _fake_run(path, rows=2, last=True):
  """A run directory as training leaves it: config, metrics rows and (unless ``last`` is False) a last checkpoint."""
  rundir = RunDir(path)
  rundir.write_config({**Config(**TINY).to_dict(), "input_shape": [28, 28, 1]})
  rundir.write_metrics([{"episode": 2 * (i + 1), "train_loss": 1.0} for i in range(rows)])
  for kind in ("best", "last") if last else ("best",):
    (rundir.path / "checkpoints" / kind / str(2 * rows)).mkdir(parents=True)
  return rundir


@pytest.mark.parametrize("module, args, fragment", [
    ("fewshot.train", ["--way=0"], "--way must be a positive integer"),
    ("fewshot.train", ["--learning_rate=nan"], "--learning_rate must be a finite number, got nan"),
    ("fewshot.dml.train", ["--learning_rate=inf"], "--learning_rate must be a finite number, got inf"),
    ("fewshot.evaluate", ["--workdir=/nowhere/run"], "does not exist"),
    ("fewshot.plot", ["/nowhere/run"], "does not exist"),
    ("fewshot.analyze", ["/nowhere/run", "/nowhere/other"], "does not exist"),
    # Issue 42, item 6: the word after a boolean flag was taken as its value and dropped; an empty path its default.
    ("fewshot.train", ["--nodistort", "episodes=40"], "unexpected argument 'episodes=40'; flags start with two dashes"),
    ("fewshot.evaluate", ["--norecord", "test_episodes=5", "--workdir=/x"], "unexpected argument 'test_episodes=5'"),
    ("fewshot.dml.train", ["--nodata_parallel", "epochs=5"], "unexpected argument 'epochs=5'"),
    ("fewshot.train", ["--workdir="], "--workdir= names no path; pass --workdir=PATH"),
    ("fewshot.reproduce", ["--out=", "snell2017_omniglot"], "--out= names no path"),
])
def test_bad_flags_are_refused_in_one_line(module, args, fragment, assert_one_line_error):
  assert_one_line_error(_cli(module, *args), fragment)


@pytest.mark.parametrize("module, args", [
    ("fewshot.train", ["--way=0"]), ("fewshot.train", ["--learning_rate=nan"]),
    ("fewshot.evaluate", ["--workdir=/nowhere/run"]), ("fewshot.plot", ["/nowhere/run"]),
    ("fewshot.analyze", ["/nowhere/run", "/nowhere/other"]),
])
def test_flags_are_checked_before_jax_is_imported(module, args):
  """A rejected flag costs well under a second: none of JAX, tensorflow_datasets, matplotlib, scipy is loaded."""
  result = _cli(module, *args, env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
  assert result.returncode == 2
  imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time")}
  assert "numpy" in imported  # the import log was read
  heavy = {"jax", "flax", "tensorflow_datasets", "matplotlib", "scipy"}
  assert not imported & heavy, sorted(imported & heavy)


def test_tensorstores_full_disk_is_a_full_disk():
  """Issue 42, item 5: orbax's writer raises TensorStore's ValueError, which files.out_of_space missed."""
  store = ValueError('Error writing local file "/r/checkpoints/last/2/d/x": No space left on device '
                     "[os_error_code='28']")
  try:
    try:
      raise store
    except ValueError as e:
      raise RuntimeError("orbax: save failed") from e
  except RuntimeError as wrapped:
    assert files.out_of_space(wrapped)
  assert not files.out_of_space(ValueError("shapes do not match"))


@pytest.mark.parametrize("args, fragment", [(["--out", ""], "--out names no folder"),
                                            (["--out", "/tmp/dc", "--timeout", "-1"], "--timeout must be a positive"),
                                            (["--out", "/proc/none/dc"], "cannot be made")])
def test_device_check_refuses_an_empty_out_or_a_bad_timeout_before_any_step(args, fragment, capsys):
  from benchmarks import device_check

  with pytest.raises(SystemExit) as exited:
    device_check.main(args)
  assert exited.value.code == 2 and fragment in capsys.readouterr().err


def test_default_queries_fit_the_dataset_and_are_recorded():
  assert (Config().query, Config().test_query) == (16, 15)  # the paper's, where classes are large enough
  assert (Config(shot=5).query, Config(shot=5).test_query) == (15, 15)  # 20 images per class: 5 + 15
  assert (Config(dataset="omniglot", shot=10).query, Config(dataset="omniglot", shot=10).test_query) == (10, 10)
  assert Config(dataset="cub", shot=5).query == 16
  assert Config(shot=5, query=3).query == 3  # a value given is kept (and checked against the data)
  assert Config(shot=5).to_dict()["query"] == 15  # config.json holds the value used
  assert Config.from_dict({**Config().to_dict(), "query": 16}) == Config()


@pytest.mark.slow  # a run at the default sizes
def test_shot_5_trains_with_the_other_flags_at_their_defaults(tmp_path):
  from fewshot.train import train

  results = train(Config(shot=5, episodes=2, eval_every=2, val_episodes=1, test_episodes=1), tmp_path / "run",
                  progress=False)
  assert results["test_query"] == 15
  assert RunDir(tmp_path / "run").read_config()["query"] == 15


def test_dml_train_defaults_to_the_embedded_dataset():
  assert DMLConfig().dataset == "strokes"


def test_workdir_naming_a_file(tmp_path, assert_one_line_error):
  (tmp_path / "file").write_text("x")
  with pytest.raises(OutputError, match="is a file"):
    open_for_training(tmp_path / "file", Config(**TINY), resume=False)
  with pytest.raises(OutputError, match="cannot be made: its parent .* is a file"):
    open_for_training(tmp_path / "file" / "run", Config(**TINY), resume=False)
  assert_one_line_error(_cli("fewshot.train", f"--workdir={tmp_path / 'file'}"), "--workdir", "is a file")


def test_tfds_dir_naming_a_file(tmp_path, assert_one_line_error):
  (tmp_path / "file").write_text("x")
  result = _cli("fewshot.train", f"--tfds_dir={tmp_path / 'file'}", f"--workdir={tmp_path / 'run'}",
                *[f"--{k}={v}" for k, v in TINY.items()])
  assert_one_line_error(result, "--tfds_dir", "is a file")
  assert not (tmp_path / "run").exists()


def test_resume_refuses_a_directory_without_a_run(tmp_path, assert_one_line_error):
  with pytest.raises(RunDirError, match="does not exist, so there is nothing to continue"):
    open_for_training(tmp_path / "nowhere", Config(**TINY), resume=True)
  (tmp_path / "empty").mkdir()
  with pytest.raises(RunDirError, match="holds no run"):
    open_for_training(tmp_path / "empty", Config(**TINY), resume=True)
  assert_one_line_error(_cli("fewshot.train", f"--workdir={tmp_path / 'nowhere'}", "--resume"),
                        f"--resume: {tmp_path / 'nowhere'} does not exist, so there is nothing to continue")
  assert not (tmp_path / "nowhere").exists()


def test_resume_refuses_metrics_whose_last_checkpoint_is_gone(tmp_path):
  _fake_run(tmp_path / "run", rows=2, last=False)
  with pytest.raises(RunDirError, match="has metrics but no checkpoints/last"):
    open_for_training(tmp_path / "run", Config(**TINY), resume=True)
  # One row and no last (best written or not): stopped inside its first checkpoint; resumable from 0.
  assert open_for_training(_fake_run(tmp_path / "early", rows=1, last=False).path, Config(**TINY), resume=True)
  (_fake_run(tmp_path / "earlier", rows=1, last=False).path / "checkpoints" / "best" / "2").rmdir()
  assert open_for_training(tmp_path / "earlier", Config(**TINY), resume=True).holds_run()


def test_resume_refuses_a_truncated_metrics_file(tmp_path, assert_one_line_error):
  rundir = _fake_run(tmp_path / "run", rows=3)
  text = rundir.metrics_path.read_text()
  rundir.metrics_path.write_text(text[: len(text) - 9])  # cut inside the last row
  with pytest.raises(RunDirError, match="line 3 is not JSON"):
    open_for_training(rundir.path, Config(**TINY), resume=True)
  assert_one_line_error(_cli("fewshot.train", f"--workdir={rundir.path}", "--resume",
                             *[f"--{k}={v}" for k, v in TINY.items()]), "metrics.jsonl line 3 is not JSON")


def test_unwritable_places_are_refused_in_one_line(tmp_path, monkeypatch):
  """Simulated (tests may run as root, whom permissions do not stop): os.access says no, or a write fails."""
  real_access = os.access
  monkeypatch.setattr(os, "access", lambda path, mode: False if str(path).startswith(str(tmp_path)) else
                      real_access(path, mode))
  with pytest.raises(OutputError, match="--workdir .* cannot be written"):
    open_for_training(tmp_path / "new_run", Config(**TINY), resume=False)
  _fake_run(tmp_path / "run")
  with pytest.raises(OutputError, match="cannot be written"):
    open_for_training(tmp_path / "run", Config(**TINY), resume=True)
  from fewshot import plot

  with pytest.raises(OutputError, match="--out .* cannot be written"):
    plot.plot([], str(tmp_path / "figs"), landscape_only=True)
  monkeypatch.undo()

  def refuse(*args, **kwargs):
    raise PermissionError(13, "Permission denied")

  monkeypatch.setattr(files.tempfile, "mkstemp", refuse)
  with pytest.raises(OutputError, match=r"cannot write .*results.json \(Permission denied\)"):
    RunDir(tmp_path / "run").write_results({"test_accuracy": 50.0})


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through chmod 0555")
def test_read_only_directory_cli(tmp_path, assert_one_line_error):
  (tmp_path / "ro").mkdir()
  (tmp_path / "ro").chmod(0o555)
  assert_one_line_error(_cli("fewshot.train", f"--workdir={tmp_path / 'ro' / 'run'}"), "cannot be written")
  assert_one_line_error(_cli("fewshot.plot", "--landscape_only", f"--out={tmp_path / 'ro' / 'figs'}"),
                        "cannot be written")
  runs = [_fake_run(tmp_path / name).path for name in ("a", "b")]
  assert_one_line_error(_cli("fewshot.analyze", f"--out={tmp_path / 'ro' / 'table.md'}", *map(str, runs)),
                        "cannot be written")


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_records_get_the_permissions_the_umask_gives(tmp_path, umask, mode):
  old = os.umask(umask)
  try:
    rundir = _fake_run(tmp_path / "run")
    rundir.write_results({"test_accuracy": 1.0})
  finally:
    os.umask(old)
  for path in (rundir.config_path, rundir.metrics_path, rundir.results_path):
    assert path.stat().st_mode & 0o777 == mode, path.name


def test_records_are_strict_json(tmp_path):
  rundir = RunDir(tmp_path)
  rundir.write_metrics([{"episode": 1, "train_loss": float("nan"), "theta": float("inf"), "x": [float("-inf")]}])
  strict = json.loads(rundir.metrics_path.read_text(), parse_constant=lambda c: pytest.fail(f"bare {c}"))
  assert strict == {"episode": 1, "train_loss": None, "theta": None, "x": [None]}
  with pytest.raises(ValueError):
    files.write_json_atomic(tmp_path / "x.json", {"a": float("nan")})
  assert not (tmp_path / "x.json").exists() and not list(tmp_path.glob(".x.json.*"))


def test_an_undecodable_png_is_named_without_python_reprs(tmp_path):
  from fewshot.data import omniglot
  from fewshot.errors import DataError

  with pytest.raises(DataError) as info:
    omniglot.decode(b"not a png", "images_background.zip:Latin/character01/0001_01.png")
  assert "BytesIO" not in str(info.value) and "0x" not in str(info.value)
  assert "0001_01.png" in str(info.value) and "not an image format PIL can read" in str(info.value)
  assert one_line(OSError("cannot read <_io.BytesIO object at 0x7f00deadbeef>")) == "cannot read"


def test_evaluate_names_an_unknown_checkpoint(tmp_path, assert_one_line_error):
  _fake_run(tmp_path / "run")
  assert_one_line_error(_cli("fewshot.evaluate", f"--workdir={tmp_path / 'run'}", "--checkpoint=middle"),
                        "unknown --checkpoint 'middle'; choose one of last, best")
  with pytest.raises(ConfigError, match="unknown checkpoint 'middle'"):
    import fewshot

    fewshot.load(str(tmp_path / "run"), "middle")


def test_preparing_a_dataset_leaves_no_download_lines_or_cursor_escapes_in_logs(tmp_path):
  """Nothing is downloaded, so nothing says so; progress bars only on a terminal (here stderr is a pipe). A small
  strokes configuration goes through the preparation every dataset's reader calls, in a second instead of ten.
  """
  code = ("import sys; from fewshot.data import strokes, tfds_io; "
          "b = strokes.Strokes(config=strokes.config(num_classes=12, per_class=3), data_dir=sys.argv[1]); "
          "tfds_io.prepare(b); print(tfds_io.read_split(b, 'test').num_classes)")
  result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "tfds")], capture_output=True, text=True)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout == "2\n" and (tmp_path / "tfds").is_dir()
  assert "Downloading" not in result.stderr and "Unknown size" not in result.stderr
  assert "\r" not in result.stderr and "\x1b" not in result.stderr, result.stderr[-500:]


def test_analyze_refuses_an_out_it_cannot_write_and_a_run_named_twice(tmp_path, assert_one_line_error):
  runs = [_fake_run(tmp_path / name).path for name in ("a", "b")]
  RunDir(runs[1]).write_config({**RunDir(runs[1]).read_config(), "seed": 1})  # b: the same configuration's seed 1
  (tmp_path / "file").write_text("not a folder")
  assert_one_line_error(_cli("fewshot.analyze", f"--out={tmp_path / 'file' / 'table.md'}", *map(str, runs)),
                        "--out's folder", "is a file; pass a folder")
  assert_one_line_error(_cli("fewshot.analyze", str(runs[0]), str(runs[0]), "--", str(runs[1]), str(runs[1])),
                        f"names the run {runs[0]} names already", "name each run once")
  os.symlink(runs[1], tmp_path / "link")
  assert_one_line_error(_cli("fewshot.analyze", str(runs[1]), str(tmp_path / "link")), "names the run")
  assert not (tmp_path / "file").is_dir() and sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "file", "link"]
