"""What a resume or a run path must not do to a record (issue 42): train on other data, or lose every checkpoint."""

import json
import shutil

import pytest

from fewshot.config import Config
from fewshot.errors import ConfigError, RunDirError
from fewshot.records import reuse
from fewshot.records.rundir import RunDir
from fewshot.train import train

from omniglot_fixtures import characters, write_background_zip

TINY = dict(dataset="omniglot", way=2, shot=1, query=2, test_query=2, episodes=4, eval_every=2, val_episodes=1,
            test_episodes=2)


def test_the_data_check_refuses_other_classes_images_files_or_lists_and_passes_the_same_data(tmp_path):
  """The rule alone, on records: the end-to-end case below is in the slow tier."""
  rundir = RunDir(tmp_path / "run")
  data = {"train": {"classes": 145, "images": 2900}, "total": {"classes": 145, "images": 2900},
          "files": ["images_background_small1.zip", "images_background_small2.zip"]}
  rundir.write_config({"data_dir": "/data/omniglot", "data": data})
  rundir.checkpoints.folder.joinpath("last", "2").mkdir(parents=True)  # trained: a last checkpoint
  reuse.check_same_data(rundir, data)
  reuse.check_same_data(rundir, {**data, "files": data["files"][:1]})  # fewer files read than an older run listed: same
  for changed, said in (({"train": {"classes": 974, "images": 19480}}, "train was 145 classes / 2900 images"),
                        ({"files": ["images_background.zip"]}, "files was images_background_small1.zip"),
                        ({"class_lists_sha256": "ab12"}, None)):
    if said is None:  # a key the run did not record is no difference; one it recorded is
      reuse.check_same_data(rundir, {**data, **changed})
      continue
    with pytest.raises(RunDirError) as raised:
      reuse.check_same_data(rundir, {**data, **changed})
    assert said in str(raised.value) and "--data_dir /data/omniglot" in str(raised.value)
  window = RunDir(tmp_path / "window")  # stopped between its first best and last saves: begun, so compared too
  window.write_config({"data_dir": "/data/omniglot", "data": data})
  window.write_metrics([{"episode": 20, "train_loss": 1.0}])
  window.checkpoints.folder.joinpath("best", "20").mkdir(parents=True)
  with pytest.raises(RunDirError, match="train was 145 classes / 2900 images"):
    reuse.check_same_data(window, {**data, "train": {"classes": 974, "images": 19480}})
  rundir.write_config({"data_dir": "/data/omniglot", "data": {**data, "class_lists_sha256": "ab12"}})
  with pytest.raises(RunDirError) as raised:  # edited lists: the advice is about the lists, not the images' folder
    reuse.check_same_data(rundir, data)
  assert "trained on class lists whose SHA-256 was ab12" in str(raised.value) and "--data_dir" not in str(raised.value)


@pytest.mark.slow
def test_a_resume_on_other_data_is_refused_in_one_line_and_a_moved_copy_resumes(tmp_path):
  write_background_zip(characters({"Latin": 6, "Greek": 6}, drawers=4), tmp_path / "a")
  write_background_zip(characters({"Latin": 9, "Greek": 9}, drawers=4, seed=1), tmp_path / "b")
  tfds = str(tmp_path / "tfds")
  first = Config(**{**TINY, "episodes": 2}, data_dir=str(tmp_path / "a"), tfds_dir=tfds)
  train(first, tmp_path / "run", progress=False)
  before = (tmp_path / "run" / "config.json").read_bytes()
  other = Config(**TINY, data_dir=str(tmp_path / "b"), tfds_dir=tfds)
  with pytest.raises(RunDirError) as raised:
    train(other, tmp_path / "run", resume=True, progress=False)
  said = str(raised.value)
  assert "\n" not in said and "trained on data whose train was" in said and str(tmp_path / "a") in said
  assert (tmp_path / "run" / "config.json").read_bytes() == before  # nothing rewritten
  shutil.copytree(tmp_path / "run", tmp_path / "window")  # as if stopped between its first best and last saves
  shutil.rmtree(tmp_path / "window" / "checkpoints" / "last")
  (tmp_path / "window" / "metrics.jsonl").write_text((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0] + "\n")
  with pytest.raises(RunDirError, match="trained on data whose train was"):
    train(other, tmp_path / "window", resume=True, progress=False)
  assert (tmp_path / "window" / "config.json").read_bytes() == before
  shutil.copytree(tmp_path / "a", tmp_path / "moved")
  moved = Config(**TINY, data_dir=str(tmp_path / "moved"), tfds_dir=tfds)
  assert train(moved, tmp_path / "run", resume=True, progress=False)["best_episode"] in (2, 4)
  assert json.loads((tmp_path / "run" / "config.json").read_text())["data_dir"] == str(tmp_path / "moved")


@pytest.mark.parametrize("name", ["sweep_lr[0.001]", "a*b", "what?"])
def test_a_run_path_with_glob_characters_is_refused_before_anything_is_written(tmp_path, name):
  with pytest.raises(RunDirError, match=r"which orbax reads as a glob pattern .* choose a name without"):
    train(Config(way=2, episodes=2, eval_every=2), tmp_path / "runs" / name, progress=False)
  assert not (tmp_path / "runs").exists()


def test_paths_the_file_system_cannot_hold_are_refused_before_anything_is_written(tmp_path):
  """Issue 42, item 8: a name over 255 bytes, a loop of links and a .lock that is a folder were tracebacks."""
  from fewshot.records import writer_lock  # noqa: PLC0415
  from fewshot.records.reuse import check_path_characters  # noqa: PLC0415

  with pytest.raises(RunDirError, match="is a name of 300 bytes .* up to 255 bytes"):
    check_path_characters(tmp_path / ("a" * 300))
  with pytest.raises(RunDirError, match="paths below 4096"):
    check_path_characters(tmp_path / "/".join(["b" * 200] * 21))
  (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
  (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
  with pytest.raises(RunDirError, match="is a loop of links"):
    check_path_characters(tmp_path / "loop1")
  (tmp_path / "run" / ".lock").mkdir(parents=True)
  with pytest.raises(RunDirError, match=r"\.lock is a folder, not the run's lock file; remove it"):
    writer_lock.hold(tmp_path / "run")


def test_a_disk_full_before_the_lock_is_written_is_one_line_and_holds_nothing(tmp_path, monkeypatch):
  """Issue 42, item 5: a disk already full at the start was a traceback from the .lock write."""
  import errno  # noqa: PLC0415
  import os  # noqa: PLC0415

  from fewshot.errors import OutputError  # noqa: PLC0415
  from fewshot.records import writer_lock  # noqa: PLC0415

  def full(fd, data):
    raise OSError(errno.ENOSPC, "No space left on device")

  monkeypatch.setattr(os, "write", full)
  with pytest.raises(OutputError, match=r"^no space left on the disk to write .*run/\.lock .* free some space, then "
                                        r"run the same command again\.$"):
    writer_lock.hold(tmp_path / "run")
  monkeypatch.undo()
  writer_lock.hold(tmp_path / "run")  # the lock was let go with its file: the next try takes it
  writer_lock.release(tmp_path / "run")


def test_episodes_beyond_the_step_counter_are_refused_and_a_long_eta_reads_in_years():
  from fewshot.training.progress import _clock  # noqa: PLC0415

  with pytest.raises(ConfigError, match="--episodes must be below 2,147,483,648"):
    Config(episodes=10 ** 15)
  assert _clock(1e20) == "3.17e+12 years" and _clock(3600 * 30) == "1 day, 6:00:00"


def test_a_retest_on_other_test_data_is_refused_naming_the_run_s_folder_and_the_same_data_passes(tmp_path):
  """``evaluate --data_dir`` is for a run's data moved elsewhere: a test split of other classes, other files or
  other class lists would stand beside the run's own measurement as if of the same split (issue 56 item 2).
  """
  from fewshot.records.measurements import check_measured_data  # noqa: PLC0415

  rundir = RunDir(tmp_path / "run")
  data = {"train": {"classes": 145, "images": 2900}, "test": {"classes": 60, "images": 1200},
          "total": {"classes": 205, "images": 4100}, "files": ["images_background_small1.zip"],
          "not_read": ["all_runs.zip"]}
  rundir.write_config({"data_dir": "/data/small", "data": data})
  tested = {"test": {"classes": 60, "images": 1200}, "total": {"classes": 60, "images": 1200},
            "files": ["images_background_small1.zip"]}  # what a re-test loads: the test split alone
  check_measured_data(rundir, tested, "/data/moved")
  for changed, said in (({"test": {"classes": 659, "images": 13180}}, "test was 60 classes / 1200 images"),
                        ({"files": ["images_evaluation.zip"]}, "files was images_background_small1.zip")):
    with pytest.raises(RunDirError) as raised:
      check_measured_data(rundir, {**tested, **changed}, "/data/full")
    line = str(raised.value)
    assert said in line and "--data_dir /data/full yields" in line and "pass --data_dir /data/small" in line
    assert "\n" not in line
  rundir.write_config({"data_dir": "/data/small"})  # recorded before runs said what they read: nothing to compare
  check_measured_data(rundir, {**tested, "test": {"classes": 659, "images": 13180}}, "/data/full")


@pytest.mark.slow
def test_evaluate_on_another_folder_s_test_split_writes_nothing_and_a_moved_copy_is_tested(tmp_path):
  from fewshot import evaluate  # noqa: PLC0415

  write_background_zip(characters({"Latin": 6, "Greek": 6}, drawers=4), tmp_path / "a")
  write_background_zip(characters({"Latin": 12, "Greek": 12}, drawers=4, seed=1), tmp_path / "b")  # test 6, not 3
  tfds = str(tmp_path / "tfds")
  train(Config(**{**TINY, "episodes": 2}, data_dir=str(tmp_path / "a"), tfds_dir=tfds), tmp_path / "run",
        progress=False)
  before = sorted(p.name for p in (tmp_path / "run").iterdir())
  with pytest.raises(RunDirError, match="trained and tested on data whose test was"):
    evaluate.measure(str(tmp_path / "run"), data_dir=str(tmp_path / "b"), tfds_dir=tfds, progress=False)
  assert sorted(p.name for p in (tmp_path / "run").iterdir()) == before
  shutil.copytree(tmp_path / "a", tmp_path / "moved")
  _, _, written = evaluate.measure(str(tmp_path / "run"), data_dir=str(tmp_path / "moved"), tfds_dir=tfds,
                                   progress=False)
  assert written.name.startswith("test_best@")
