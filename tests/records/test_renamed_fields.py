"""Runs recorded before a word got one meaning (``protocol`` → ``class_splits``, ``image_shape`` → ``input_shape``)
read, resume, load and replay as runs recorded today; the old flag is refused naming the new one.
"""

import json
import pathlib
import shutil

import numpy as np
import pytest
from absl import flags

import fewshot
from fewshot import usage
from fewshot.config import Config
from fewshot.options import RENAMED, current_names
from fewshot.records.rundir import RunDir
from fewshot.train import train

from tiny_run import TINY

RESULTS = pathlib.Path(__file__).parents[2] / "docs" / "results" / "omniglot"


def _as_recorded_before(rundir: RunDir) -> dict:
  """Rewrite the run's config.json under the old names, as an older fewshot wrote it; returns what it wrote."""
  old_names = {new: old for old, new in RENAMED.items()}
  record = {old_names.get(name, name): value for name, value in json.loads(rundir.config_path.read_text()).items()}
  rundir.config_path.write_text(json.dumps(record))
  return record


def test_a_published_record_of_the_old_names_reads_under_the_new_ones():
  path = next(RESULTS.glob("*_seed0"))
  raw = json.loads((path / "config.json").read_text())
  assert "protocol" in raw and "image_shape" in raw  # the page's records stay as they were written
  record = RunDir(path).read_config()
  assert "protocol" not in record and "image_shape" not in record
  assert record["class_splits"] == raw["protocol"] and record["input_shape"] == raw["image_shape"]
  assert Config.from_dict(raw).class_splits == raw["protocol"]


def test_a_new_name_given_beside_its_old_one_keeps_its_own_value():
  assert current_names({"class_splits": "all_characters", "protocol": "default", "way": 5}) == {
      "class_splits": "all_characters", "way": 5}


def test_an_old_run_resumes_loads_and_replays_as_the_same_run(tmp_path):
  workdir = tmp_path / "run"
  train(Config(**TINY), workdir, progress=False)
  rundir = RunDir(workdir)
  _as_recorded_before(rundir)
  model = fewshot.load(str(workdir))  # its parameters' shapes come from the backbone's input, read from image_shape
  assert model.embed(np.zeros((3, 28, 28, 1), np.uint8)).shape[0] == 3
  assert rundir.differences(Config(**TINY)) == []
  train(Config(**TINY), workdir, resume=True, progress=False)  # refused as "a different run" if a name were lost
  shutil.copy(rundir.config_path, tmp_path / "old.json")
  replayed = usage.recorded_options(Config, str(tmp_path / "old.json"), "fewshot.train")
  assert replayed["class_splits"] is None and "protocol" not in replayed


@pytest.mark.parametrize("argument", ["--protocol=vinyals", "--noprotocol"])
def test_the_old_flag_is_refused_naming_the_new_one(argument):
  values = flags.FlagValues()
  flags.DEFINE_string("class_splits", None, "", flag_values=values)
  with pytest.raises(flags.Error) as raised:
    values(["prog", argument])
  said = usage.renamed_flag(str(raised.value), values)
  assert said is not None and said.startswith("--protocol was renamed --class_splits")
  assert usage.renamed_flag("Unknown command line flag 'heads'", values) is None
  assert usage.renamed_flag("Unknown command line flag 'image_shape'", values) is None  # a record's, never a flag
