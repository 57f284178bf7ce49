"""Issue 56's tracebacks where there should be one line: each input below printed 17-96 lines at 3900b17."""

import pathlib
import shutil
import subprocess
import sys

import pytest

from fewshot.config import Config
from fewshot.dml.config import DMLConfig
from fewshot.errors import ConfigError, RunDirError

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _command(*argv, cwd=ROOT):
  return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("command", [("fewshot.evaluate", "--workdir"), ("fewshot.analyze",), ("fewshot.plot",)])
def test_a_loop_of_links_or_a_name_no_file_system_holds_is_one_line(tmp_path, command, assert_one_line_error):
  (tmp_path / "loop").symlink_to(tmp_path / "loop")
  assert_one_line_error(_command(*command, str(tmp_path / "loop")), "is a loop of links")
  assert_one_line_error(_command(*command, str(tmp_path / ("a" * 300))), "is a name of 300 bytes")


def test_fewshot_load_on_a_loop_of_links_is_a_run_directory_error(tmp_path):
  import fewshot  # noqa: PLC0415

  (tmp_path / "loop").symlink_to(tmp_path / "loop")
  with pytest.raises(RunDirError, match="is a loop of links"):
    fewshot.load(tmp_path / "loop")


@pytest.mark.parametrize("option", ["patience", "seed", "lr_halve_every", "test_episodes", "eval_every"])
def test_an_integer_option_beyond_32_bits_is_refused_before_anything_runs(option):
  """``--patience 99999999999999999999`` trained, tested and then failed in TensorBoard's hparams (48 lines)."""
  with pytest.raises(ConfigError, match=f"--{option} must be below 2,147,483,648"):
    Config(dataset="strokes", **{option: 10 ** 20})
  Config(dataset="strokes", **{option: 2 ** 31 - 1} if option != "eval_every" else {option: 10})
  with pytest.raises(ConfigError, match="--epochs must be below 2,147,483,648"):
    DMLConfig(dataset="strokes", epochs=10 ** 20)


def test_the_dr_page_s_script_refuses_bad_seeds_and_a_truncated_made_json_in_one_line(tmp_path, assert_one_line_error):
  assert_one_line_error(_command("projects.dr_ratio.dr_results", "--seeds", "x-y"), "--seeds 'x-y' is not a list of seeds")
  shutil.copytree(ROOT / "docs" / "results", tmp_path / "results")
  made = tmp_path / "results" / "omniglot" / "made.json"
  made.write_text(made.read_text()[:40])
  done = _command("projects.dr_ratio.dr_results", "--out", str(tmp_path), "--runs", str(tmp_path / "none"))
  assert done.returncode == 1 and done.stderr.strip().count("\n") == 0
  assert "made.json is not readable JSON" in done.stderr


def test_a_read_only_checkpoints_folder_of_a_resumed_run_is_refused_before_anything_is_written(tmp_path, monkeypatch):
  """It was an 80-line traceback at the first save, after config.json had been rewritten."""
  import os  # noqa: PLC0415

  from fewshot.errors import OutputError  # noqa: PLC0415
  from fewshot.records import reuse  # noqa: PLC0415
  from fewshot.records.rundir import RunDir  # noqa: PLC0415

  config = Config(dataset="strokes", episodes=8)
  rundir = RunDir(tmp_path / "run")
  rundir.write_config(config.to_dict())
  (tmp_path / "run" / "checkpoints" / "last" / "4").mkdir(parents=True)
  real = os.access
  monkeypatch.setattr(os, "access", lambda path, mode: not str(path).endswith("last") and real(path, mode))
  with pytest.raises(OutputError, match=r"--workdir .*/checkpoints/last cannot be written \(it is read-only"):
    reuse.check_for_training(tmp_path / "run", config, resume=True)


_READ_ONLY_OUT = """
import os, sys
real = os.access
os.access = lambda path, mode: "read_only" not in str(path) and real(path, mode)
from fewshot import reproduce, runner
reproduce.define_flags()
sys.argv = ["reproduce", "snell2017_omniglot", "--schedule", "short", "--data_dir", sys.argv[1], "--out", sys.argv[2]]
runner.run(reproduce.main, takes_paths=True, resume="again")
"""


def test_reproduce_into_a_read_only_out_is_one_line_naming_out(tmp_path, assert_one_line_error):
  from omniglot_fixtures import characters, write_background_zip  # noqa: PLC0415

  write_background_zip(characters({"Latin": 3}), tmp_path / "data")
  (tmp_path / "read_only").mkdir()  # the folder --out would be made in: read-only (os.access says so)
  done = subprocess.run([sys.executable, "-c", _READ_ONLY_OUT, str(tmp_path / "data"), str(tmp_path / "read_only" / "x")],
                        capture_output=True, text=True, cwd=ROOT)
  assert_one_line_error(done, "--out ", "read_only/x cannot be written")


@pytest.mark.slow  # a MAML step compiled: ~20 s
def test_a_maml_run_too_large_for_the_memory_is_refused_naming_inner_steps_before_it_trains(tmp_path, monkeypatch):
  """MAML ``--inner_steps 1000`` was a 52-line out-of-memory traceback after the data line (a seed group had a
  memory check; a single run did not).
  """
  from fewshot.train import train  # noqa: PLC0415
  from fewshot.training import seed_groups  # noqa: PLC0415

  monkeypatch.setattr(seed_groups, "host_memory_available", lambda: 2 ** 20)  # 1 MiB free
  config = Config(dataset="strokes", method="maml", inner_steps=2, episodes=2, eval_every=2, val_episodes=1,
                  test_episodes=1)
  with pytest.raises(ConfigError, match=r"the run needs about .* GiB .* lower --inner_steps"):
    train(config, tmp_path / "run", progress=False)
  assert not (tmp_path / "run" / "config.json").exists()


def test_a_meta_batch_drawing_more_classes_than_the_split_names_the_product_and_the_largest_that_fits(tmp_path):
  """``--meta_batch 200`` at 5-way printed "--way 5 × --meta_batch 1000" and suggested 800 where the limit was 160."""
  from fewshot import data  # noqa: PLC0415
  from fewshot.episodic.experiment import Experiment  # noqa: PLC0415
  from fewshot.errors import DataError  # noqa: PLC0415

  classes = data.load_splits("strokes")["train"].num_classes  # the session's prepared strokes (tests/conftest.py)
  config = Config(dataset="strokes", method="maml", way=5, meta_batch=classes)
  with pytest.raises(DataError) as raised:
    Experiment.build(config)
  assert str(raised.value) == (
      f"--way 5 × --meta_batch {classes} = {5 * classes} classes drawn together for a meta-update, more than the "
      f"{classes} classes of the train split; use --meta_batch {classes // 5} or less, or a smaller --way.")


def test_reproduce_words_a_run_directory_refusal_with_its_own_fix_not_fewshot_train_s_flags(tmp_path, monkeypatch):
  from fewshot import reproduce, train  # noqa: PLC0415
  from fewshot.errors import RunDirError  # noqa: PLC0415
  from fewshot.published import plan  # noqa: PLC0415

  entry = reproduce.ENTRIES["snell2017_omniglot"]
  schedule, model = entry.schedule("short"), entry.models[0]
  group = plan.select_group(str(tmp_path), entry, schedule, model, "dr", (0, 1))

  def refused(error):
    def train_group(*args, **kwargs):
      raise error
    monkeypatch.setattr(train, "train_group", train_group)
    with pytest.raises(RunDirError) as raised:
      reproduce.train_group(group, None, None)
    return str(raised.value)

  problem = "the group's runs were saved at different checkpoints (a at 100, b at 300)"
  said = refused(RunDirError(problem, "resume them one by one with --seed, or start the group in new directories."))
  assert said == f"{problem}; move those runs aside (or pass another --out) and run the same command again."
  # A refusal whose fix is not the training command's flags stays as it was (a '; ' inside its problem included).
  kept = "--workdir /x[1] holds [ ]; orbax reads it as a glob pattern, so choose a name without [ ] * ?."
  assert refused(RunDirError(kept)) == kept


def test_an_empty_workdir_is_refused_not_read_as_the_default_folder(tmp_path, assert_one_line_error):
  for command in ("fewshot.train", "fewshot.dml.train"):
    done = _command(command, "--dataset", "strokes", "--workdir", "", cwd=tmp_path)
    assert_one_line_error(done, "--workdir is empty ('': an unset variable in quotes?)")
    assert not (tmp_path / "runs").exists()
