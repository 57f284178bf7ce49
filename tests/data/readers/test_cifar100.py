"""CIFAR-FS and FC100 read from CIFAR-100's python version (issue 54): every image where its file puts it, every class
in the split its benchmark's shipped list names, checked against the list files read here, not through the reader.
"""

from __future__ import annotations

import pickle

import cifar_fixtures as cifar
import numpy as np
import pytest

from fewshot import data
from fewshot.data import catalog, readers
from fewshot.data.class_lists import LISTS

from dataset_fixtures import forbidden_pickle, one_line_error


def _listed(folder: str) -> dict[str, str]:
  """{name: split} of a shipped list folder, read line by line."""
  return {line.strip(): split for split in ("train", "val", "test")
          for line in (LISTS / folder / f"{split}.txt").read_text().splitlines() if line.strip()}


@pytest.fixture(scope="module")
def cifar_dir(tmp_path_factory):
  root = tmp_path_factory.mktemp("cifar")
  return root, cifar.write(root)


def test_every_image_is_its_rows_pixels_under_its_fine_label(cifar_dir):
  root, made = cifar_dir
  recs = readers.read("cifar_fs", root)
  assert recs.layout == "archive" and recs.class_names == tuple(cifar.FINE)
  assert [r.member for r in recs.records] == ["train"] * 500 + ["test"] * 100  # file order, train first
  for r in recs.records:
    assert r.label == made[r.member]["fine_labels"][r.index]
    np.testing.assert_array_equal(recs.image(r), made[r.member]["images"][r.index])


def test_cifar_fs_puts_each_class_in_its_lists_split_with_all_its_images(cifar_dir):
  root, _ = cifar_dir
  recs, listed = readers.read("cifar_fs", root), _listed("cifar_fs")
  assert len(listed) == 100 and [list(listed.values()).count(s) for s in ("train", "val", "test")] == [64, 16, 20]
  for r in recs.records:
    assert r.subset == listed[recs.class_names[r.label]]
  assert [len(recs.subset(s)) for s in ("train", "val", "test")] == [64 * 6, 16 * 6, 20 * 6]


def test_fc100_splits_by_superclass_so_no_superclass_is_in_two_splits(cifar_dir):
  root, _ = cifar_dir
  recs, listed = readers.read("fc100", root / "cifar-100-python.tar.gz"), _listed("fc100")
  assert [list(listed.values()).count(s) for s in ("train", "val", "test")] == [12, 4, 4]
  split_of_class = {}
  for r in recs.records:
    name = recs.class_names[r.label]
    assert r.subset == listed[cifar.SUPERCLASS_OF[name]]
    split_of_class[name] = r.subset
  assert [list(split_of_class.values()).count(s) for s in ("train", "val", "test")] == [60, 20, 20]
  # The paper's superclass ids (CIFAR-100's coarse labels): 1-6, 9, 10, 15, 17-19 train; 8, 11, 13, 16 val.
  ids = {s: sorted(cifar.COARSE.index(n) for n, t in listed.items() if t == s) for s in ("train", "val", "test")}
  assert ids == {"train": [1, 2, 3, 4, 5, 6, 9, 10, 15, 17, 18, 19], "val": [8, 11, 13, 16], "test": [0, 7, 12, 14]}


def test_the_folder_its_parent_the_archive_and_its_folder_read_alike(tmp_path, cifar_dir):
  root, _ = cifar_dir
  cifar.write(tmp_path / "x", archive=False)
  a = readers.read("fc100", root)
  for where in (tmp_path / "x", tmp_path / "x" / "cifar-100-python"):
    b = readers.read("fc100", where)
    assert b.layout == "folder" and b.class_names == a.class_names
    assert [(r.member, r.index, r.label, r.subset) for r in b.records] == [
        (r.member, r.index, r.label, r.subset) for r in a.records]


def test_load_splits_gives_the_lists_classes_at_32_px_stored_at_36(cifar_dir, tmp_path):
  root, _ = cifar_dir
  splits = data.load_splits("cifar_fs", str(root), str(tmp_path / "tfds"))
  listed = _listed("cifar_fs")
  for name, split in splits.items():
    assert sorted(split.class_names) == sorted(n for n, s in listed.items() if s == name)
    assert split.images.shape[1:] == (36, 36, 3) and split.images.dtype == np.uint8
  assert catalog.resolve("cifar_fs").image_size == catalog.resolve("fc100", backbone="resnet18").image_size == 32


def _meta_renamed(made) -> bytes:
  meta = dict(made["meta"], fine_label_names=["apples"] + made["meta"]["fine_label_names"][1:])
  return pickle.dumps(meta, protocol=2)


def _coarse_mixed(made) -> bytes:
  train = dict(made["train"])
  coarse = list(train["coarse_labels"])
  row = train["fine_labels"].index(0)
  coarse[row] = (coarse[row] + 1) % 20
  return cifar.pickled(dict(train, coarse_labels=coarse))


DEFECTS = {
    "truncated": (lambda made: {"train": cifar.pickled(made["train"])[:5000]}, ["cifar-100-python/train",
                                                                               "truncated or corrupt"]),
    "forbidden": (lambda made: {"meta": forbidden_pickle(made["meta"])}, ["refers to os.system", "only numpy arrays"]),
    "flat_data": (lambda made: {"test": cifar.pickled(dict(made["test"], data=made["test"]["data"][:, :100]))},
                  ["'data' is a uint8 [N, 3072] array", "uint8 (100, 100)"]),
    "short_labels": (lambda made: {"test": cifar.pickled(dict(made["test"], fine_labels=[0]))},
                     ["'fine_labels' to be 100 labels in 0..99"]),
    "renamed_class": (lambda made: {"meta": _meta_renamed(made)}, ["not in the data, the first apple"]),
    "mixed_superclass": (lambda made: {"train": _coarse_mixed(made)}, ["every image of class 'apple' under one coarse"]),
    "no_meta": (None, ["annotation file meta", "is missing", "fewshot.data.get cifar100"]),
}


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_bad_files_are_one_line_naming_the_file_and_the_fix(tmp_path, defect, monkeypatch):
  import os
  calls = []
  monkeypatch.setattr(os, "system", lambda *a: calls.append(a))
  make, fragments = DEFECTS[defect]
  made = cifar.batches()
  files = {} if make is None else make(made)
  cifar.write(tmp_path, archive=False, files=files)
  if make is None:
    (tmp_path / "cifar-100-python" / "meta").unlink()
  message = one_line_error(lambda: readers.read("cifar_fs", tmp_path), *fragments)
  assert "download cifar-100-python.tar.gz again" in message or "fewshot.data.get cifar100" in message
  assert not calls


def test_a_folder_without_cifar_names_the_command_that_fetches_it(tmp_path):
  one_line_error(lambda: readers.read("cifar_fs", tmp_path), "Found no CIFAR-100", "cifar-100-python.tar.gz")
  one_line_error(lambda: readers.read("fc100", tmp_path / "nowhere"), "does not exist",
                 "python -m fewshot.data.get cifar100 --to DIR fetches it")


# FC100 end to end in the slow tier: its class split, all it does otherwise, is checked by the test of its superclasses.
@pytest.mark.parametrize("dataset", ["cifar_fs", pytest.param("fc100", marks=pytest.mark.slow)])
def test_a_run_trains_validates_and_tests_on_its_benchmark_s_classes_and_evaluate_reproduces_it(cifar_dir, tmp_path,
                                                                                                dataset):
  """Both benchmarks end to end at 32 px: trained on the list's train classes, validated on its val classes, tested
  on its test classes (a class outside its split would fail the class counts), and re-tested alike.
  """
  import json  # noqa: PLC0415

  from fewshot.config import Config  # noqa: PLC0415
  from fewshot.evaluate import evaluate  # noqa: PLC0415
  from fewshot.records.rundir import RunDir  # noqa: PLC0415
  from fewshot.train import train  # noqa: PLC0415

  root, _ = cifar_dir
  config = Config(dataset=dataset, data_dir=str(root), tfds_dir=str(tmp_path / "tfds"), way=5, shot=1, query=2,
                  test_query=2, episodes=4, eval_every=2, val_episodes=2, test_episodes=4, head="dr")
  results = train(config, str(tmp_path / "run"), progress=False)
  saved = RunDir(tmp_path / "run").read_config()
  assert saved["image_size"] == 32 and saved["input_shape"] == [32, 32, 3] and saved["class_splits"] == "fewshot"
  assert [r["episode"] for r in RunDir(tmp_path / "run").read_metrics()] == [2, 4]
  used = json.loads((tmp_path / "run" / "config.json").read_text())["data"]
  expected = {"cifar_fs": {"train": 64, "val": 16, "test": 20}, "fc100": {"train": 60, "val": 20, "test": 20}}[dataset]
  assert {split: used[split]["classes"] for split in expected} == expected
  assert {split: used[split]["images"] for split in expected} == {s: 6 * n for s, n in expected.items()}
  assert evaluate(str(tmp_path / "run"), progress=False)["test_accuracy"] == results["test_accuracy"]
