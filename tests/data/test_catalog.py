"""A dataset is one reader and one row of ``catalog.SPECS``: a throwaway one, registered here, loads and validates."""

from __future__ import annotations

import io
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

from fewshot import data
from fewshot.config import Config
from fewshot.data import catalog
from fewshot.dml.config import DMLConfig
from fewshot.errors import ConfigError

from dataset_fixtures import one_line_error

# The whole reader of a throwaway dataset: a folder of <class>/<image>.png, written to tmp_path and imported by name.
READER = textwrap.dedent("""
    from fewshot.data import archives
    from fewshot.data.readers.records import DatasetRecords, ImageRecord


    def locate(data_dir):
      return archives.open_folder(data_dir), "folder"


    def read_tiny(data_dir):
      tree, layout = locate(data_dir)
      members = sorted(m for m in tree.members() if m.endswith(".png"))
      names = tuple(sorted({m.split("/")[0] for m in members}))
      records = tuple(ImageRecord(m, names.index(m.split("/")[0])) for m in members)
      return DatasetRecords("tiny", layout, names, records, tree, tree.fingerprint)
""")
CLASSES, PER_CLASS = 8, 3


@pytest.fixture
def tiny(tmp_path, monkeypatch):
  """The throwaway dataset's folder, with its reader importable and its row in the table (both gone afterwards)."""
  (tmp_path / "tiny_reader.py").write_text(READER)
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.setitem(catalog.SPECS, "tiny", catalog.DatasetSpec(
      "tiny", catalog.IMAGE, "tiny_reader", {"fewshot": catalog.PARITY, "dml": catalog.HALVES}))
  rng = np.random.default_rng(0)
  for c in range(CLASSES):
    (tmp_path / "tiny" / f"class{c}").mkdir(parents=True)
    for i in range(PER_CLASS):
      pixels = rng.integers(0, 256, (10 + c, 12, 3), dtype=np.uint8)
      Image.fromarray(pixels).save(tmp_path / "tiny" / f"class{c}" / f"{i}.png")
  yield tmp_path / "tiny"
  sys.modules.pop("tiny_reader", None)


def _expected(folder, classes, size):
  """The classes' images decoded and resized here with PIL, as preparation is specified to."""
  return np.stack([np.asarray(Image.open(io.BytesIO((folder / f"class{c}" / f"{i}.png").read_bytes())).convert("RGB")
                              .resize((size, size), Image.Resampling.BILINEAR))
                   for c in classes for i in range(PER_CLASS)])


def test_a_registered_dataset_loads_through_load_splits(tiny, tmp_path):
  assert "tiny" in data.DATASETS and "tiny" in data.IMAGE_DATASETS and "tiny" not in catalog.BBOX_DATASETS
  splits = data.load_splits("tiny", str(tiny), str(tmp_path / "tfds"), image_size=20)
  chosen = {"train": [0, 2, 4, 6], "val": [1, 5], "test": [3, 7]}  # the parity rule its row names
  for name, classes in chosen.items():
    assert splits[name].class_names == tuple(f"class{c}" for c in classes)
    np.testing.assert_array_equal(splits[name].images, _expected(tiny, classes, 23))
  halves = data.load_splits("tiny", str(tiny), str(tmp_path / "tfds"), image_size=20, class_splits="dml")
  assert halves["test"].class_names == ("class4", "class5", "class6", "class7")


def test_a_registered_dataset_is_accepted_by_the_configurations(tiny):
  config = Config(dataset="tiny", data_dir=str(tiny))
  assert (config.class_splits, config.image_size, config.input_shape, config.augment) == ("fewshot", 84, (84, 84, 3),
                                                                                          True)
  assert (config.query, config.test_query, config.episodes) == (16, 15, 60_000)  # no fixed images per class
  assert DMLConfig(dataset="tiny").class_splits == "dml"
  one_line_error(lambda: Config(dataset="tiny", bbox_crop=True), "tiny has no bounding boxes", "cub, cars196")
  one_line_error(lambda: Config(dataset="tiny", within_alphabet=True), "one Omniglot alphabet; tiny has none")
  one_line_error(lambda: Config(dataset="tiny", class_splits="lists"), "not defined for tiny", "fewshot, dml")


def test_an_unregistered_dataset_is_refused_naming_the_rows():
  one_line_error(lambda: Config(dataset="tiny"), "unknown --dataset 'tiny'", "strokes, omniglot, cub")
  one_line_error(lambda: data.load_splits("tiny"), "unknown --dataset 'tiny'", "sop")


@pytest.mark.parametrize("row, message", [
    (dict(kind="rgb"), "use catalog.SMALL or catalog.IMAGE"),
    (dict(class_splits={}), "needs class splits"),
    (dict(class_splits={"fewshot": catalog.HALVES}), "'fewshot' (rule 'halves')"),
    (dict(class_splits={"dml": catalog.CHARACTERS}), "parity, halves, files"),
])
def test_a_row_that_cannot_work_is_refused_in_one_line(row, message):
  with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
    catalog.DatasetSpec(**{"name": "tiny", "kind": catalog.IMAGE, "reader": "tiny_reader", **row})
  assert "\n" not in str(info.value)


def test_the_rows_hold_what_the_old_tables_did():
  assert tuple(catalog.DATASETS) == ("strokes", "omniglot", "cub", "mini_imagenet", "cifar_fs", "fc100", "cars196",
                                     "sop")
  assert (catalog.SMALL_DATASETS, catalog.BBOX_DATASETS) == (("strokes", "omniglot"), ("cub", "cars196"))
  assert {n: s.images_per_class for n, s in catalog.SPECS.items() if s.images_per_class} == {
      "strokes": 20, "omniglot": 20, "mini_imagenet": 600, "cifar_fs": 600, "fc100": 600}
  files = {(n, c) for n, s in catalog.SPECS.items() for c, rule in s.class_splits.items() if rule == catalog.FILES}
  assert files == {("mini_imagenet", "fewshot"), ("cifar_fs", "fewshot"), ("fc100", "fewshot"), ("sop", "dml")}
  assert {n: tuple(s.class_splits) for n, s in catalog.SPECS.items() if s.kind == catalog.IMAGE} == {
      "cub": ("fewshot", "dml"), "mini_imagenet": ("fewshot",), "cifar_fs": ("fewshot",), "fc100": ("fewshot",),
      "cars196": ("dml",), "sop": ("dml",)}
