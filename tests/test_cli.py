"""Bad input: one line on stderr naming the problem and the fix, exit status 2, nothing written."""

import subprocess
import sys

import pytest
from PIL import Image

from fewshot.config import Config
from fewshot.data import DataError
from fewshot.errors import RunDirError
from fewshot.records import reuse
from fewshot.records.rundir import RunDir
from fewshot.train import train

from tiny_run import TINY


def _run_cli(*args):
  return subprocess.run([sys.executable, "-m", "fewshot.train", *args], capture_output=True, text=True)



@pytest.mark.parametrize(
    "flag, fragment",
    [
        ("--head=cosine", "choose one of softmax, dr"),
        ("--classifier=knn", "choose one of proto, nn"),
        ("--backbone=vgg", "choose one of conv4, resnet12, resnet18"),
        ("--dataset=imagenet", "choose one of strokes, omniglot"),
        ("--way=0", "--way must be a positive integer"),
        ("--shot=-1", "--shot must be a positive integer"),
        ("--query=0", "--query must be a positive integer"),
        ("--episodes=0", "--episodes must be a positive integer"),
        ("--way=five", "--way"),
        ("--placement=gpu", "--placement"),
    ],
)
def test_bad_option_exits_2_and_writes_nothing(tmp_path, flag, fragment, assert_one_line_error):
  result = _run_cli(flag, f"--workdir={tmp_path / 'run'}")
  assert_one_line_error(result, fragment)
  assert not (tmp_path / "run").exists()


def test_missing_data_dir_exits_2(tmp_path, assert_one_line_error):
  result = _run_cli("--dataset=omniglot", f"--data_dir={tmp_path / 'nowhere'}", f"--workdir={tmp_path / 'run'}")
  assert_one_line_error(result, "does not exist", "--data_dir")
  assert not (tmp_path / "run").exists()


def _omniglot(omniglot_dir, **options):
  return Config(dataset="omniglot", data_dir=str(omniglot_dir), **{**TINY, **options})


@pytest.mark.parametrize(
    "options, fragment",
    [
        (dict(way=49), "use --way 48 or less"),  # the val split holds 48 characters
        (dict(shot=5, query=16), "lower --shot or --query"),  # every character has 20 drawings
        (dict(test_query=20), "lower --shot or --test_query"),
    ],
)
def test_episode_larger_than_split(omniglot_dir, tmp_path, options, fragment):
  with pytest.raises(DataError, match=fragment):
    train(_omniglot(omniglot_dir, **options), tmp_path / "run", progress=False)
  assert not (tmp_path / "run").exists()


def test_data_dir_without_images_or_with_a_corrupt_image(tmp_path):
  empty = tmp_path / "empty"
  empty.mkdir()
  with pytest.raises(DataError, match="no Omniglot images"):
    train(Config(dataset="omniglot", data_dir=str(empty), **TINY), tmp_path / "run", progress=False)
  for character in range(1, 4):
    folder = tmp_path / "corrupt" / "Alphabet" / f"character0{character}"
    folder.mkdir(parents=True)
    for drawer in range(1, 3):
      Image.new("1", (105, 105), 1).save(folder / f"000{character}_0{drawer}.png")
  (tmp_path / "corrupt" / "Alphabet" / "character02" / "0002_01.png").write_bytes(b"not a png")
  with pytest.raises(DataError, match="0002_01.png"):
    train(Config(dataset="omniglot", data_dir=str(tmp_path / "corrupt"), **TINY), tmp_path / "run", progress=False)
  assert not (tmp_path / "run").exists()


@pytest.mark.slow  # a run trained, resumed, then the command refused
def test_workdir_holding_another_run(omniglot_dir, tmp_path, assert_one_line_error):
  workdir = tmp_path / "run"
  train(_omniglot(omniglot_dir), workdir, progress=False)
  before = {p: p.stat().st_mtime_ns for p in workdir.rglob("*")}
  with pytest.raises(RunDirError, match="differs in --head"):
    train(_omniglot(omniglot_dir, head="dr"), workdir, resume=True, progress=False)
  with pytest.raises(RunDirError, match="pass --resume"):
    train(_omniglot(omniglot_dir), workdir, progress=False)
  assert {p: p.stat().st_mtime_ns for p in workdir.rglob("*")} == before
  # A finished run resumed is a no-op that reports the same results.
  assert train(_omniglot(omniglot_dir), workdir, resume=True, progress=False) == RunDir(workdir).read_results()
  # The CLI reports it in one line too.
  result = _run_cli("--dataset=omniglot", f"--data_dir={omniglot_dir}", "--head=dr",
                    *[f"--{k}={v}" for k, v in TINY.items()], f"--workdir={workdir}")
  assert_one_line_error(result, "holds a different run")


def test_non_run_directory_is_refused(tmp_path):
  (tmp_path / "notes.txt").write_text("mine")
  with pytest.raises(RunDirError, match="not empty"):
    train(Config(**TINY), tmp_path, progress=False)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_run_that_stopped_before_it_trained_leaves_no_directory_in_the_way(tmp_path):
  """A run that wrote its configuration and then failed (out of memory, say) has nothing to lose: the corrected
  command starts there, where it used to be refused as "a different run".
  """
  rundir = RunDir(tmp_path / "run")
  rundir.write_config({**Config(**{**TINY, "way": 3}).to_dict(), "input_shape": [28, 28, 1]})
  with pytest.raises(RunDirError, match="differs in --way"):  # --resume still means this very run
    train(Config(**TINY), rundir.path, resume=True, progress=False)
  results = train(Config(**TINY), rundir.path, progress=False)
  assert Config.from_dict(rundir.read_config()).way == 2 and rundir.read_results() == results
  with pytest.raises(RunDirError, match="pass --resume"):  # once it trained, the directory is the run's
    train(Config(**TINY), rundir.path, progress=False)


def test_resume_with_a_workdir_alone_takes_the_recorded_options_and_refuses_one_that_differs(tmp_path,
                                                                                              assert_one_line_error):
  """Before, ``--resume --workdir RUN`` was refused unless every flag was repeated (or --config given)."""
  from absl import flags as absl_flags

  from fewshot.training import run_flags

  workdir = tmp_path / "run"
  reuse.record_config(RunDir(workdir), {**Config(**TINY).to_dict(), "input_shape": [28, 28, 1]})
  flags = absl_flags.FlagValues()
  for name, default in (("resume", False), ("workdir", None), ("seeds", None)):
    (absl_flags.DEFINE_bool if name == "resume" else absl_flags.DEFINE_string)(name, default, "", flag_values=flags)
  flags(["prog", "--resume", f"--workdir={workdir}"])
  assert run_flags.resumed_record(flags) == str(workdir / "config.json")
  flags(["prog", "--resume", f"--workdir={workdir}", "--seeds=0-2"])  # a group's --workdir is its runs' folder
  assert run_flags.resumed_record(flags) is None
  result = _run_cli("--resume", f"--workdir={workdir}", "--way=3")  # --episodes may be raised (a run extended)
  assert_one_line_error(result, f"{workdir} holds a different run (it differs in --way)")
