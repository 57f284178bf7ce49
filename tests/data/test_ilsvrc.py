"""mini-ImageNet built from a user's ILSVRC-2012 train/ folder (issue 39, item 2), offline: a fixture folder of tiny
JPEGs and lists of its own; the shipped Ravi & Larochelle lists are checked on their own.
"""

import hashlib
import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from fewshot import data
from fewshot.data import get, ilsvrc
from fewshot.errors import ConfigError, DataError

from dataset_fixtures import one_line_error

# Numbers whose numeric order differs from their text order, as ILSVRC's do (n01532829_10004 sorts before _9 as text).
NUMBERS = (10004, 9, 1234, 23, 100, 7)
CLASSES = {"train.csv": ("n01532829", "n01558993"), "val.csv": ("n01855672",), "test.csv": ("n01930112",)}
PICKED = (1, 2, 5)  # the listed indices of each class: the 1st, 2nd and 5th file by number
WNIDS = tuple(w for ws in CLASSES.values() for w in ws)


def _color(wnid: str, number: int) -> tuple[int, int, int]:
  """A flat colour of its own for every fixture file, far from the others (JPEG keeps a flat colour close)."""
  k = WNIDS.index(wnid) * len(NUMBERS) + NUMBERS.index(number)
  return (40 * (k % 6) + 20, 40 * (k // 6 % 6) + 20, 60 * (k // 36) + 30)


def _jpeg(color, size=(20, 14)) -> bytes:
  out = io.BytesIO()
  Image.new("RGB", size, color).save(out, "JPEG", quality=95)
  return out.getvalue()


@pytest.fixture
def ilsvrc_train(tmp_path):
  """An ILSVRC-like train/ folder (a folder per class) and lists naming the PICKED images of each class."""
  train = tmp_path / "ILSVRC" / "train"
  for wnid in WNIDS:
    (train / wnid).mkdir(parents=True)
    for number in NUMBERS:
      (train / wnid / f"{wnid}_{number}.JPEG").write_bytes(_jpeg(_color(wnid, number)))
  lists = tmp_path / "lists"
  lists.mkdir()
  for csv, wnids in CLASSES.items():
    rows = [f"{w}{i:08d}.jpg,{w}" for w in wnids for i in PICKED]
    (lists / csv).write_text("\n".join(["filename,label", *rows]) + "\n")
  return train, lists


def _mapped(wnid: str, index: int) -> int:
  return sorted(NUMBERS)[index - 1]


def test_a_build_is_what_the_reader_reads_with_the_tools_mapping(ilsvrc_train, tmp_path):
  train, lists = ilsvrc_train
  out = ilsvrc.build(train, tmp_path / "mini", resize=16, lists=lists, progress=False)
  assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["images", *sorted(ilsvrc.CSVS)]
  assert not (out / ilsvrc.PARTIAL).exists()
  for csv in ilsvrc.CSVS:
    assert (out / csv).read_bytes() == (lists / csv).read_bytes()
  # Image n01532829 00000005 is the 5th file by number (1234), not the 5th by name (9).
  for wnid in CLASSES["train.csv"]:
    for index in PICKED:
      with Image.open(out / "images" / f"{wnid}{index:08d}.jpg") as im:
        assert im.size == (16, 16)
        pixels = np.asarray(im.convert("RGB"), np.float64)
      expected = np.asarray(Image.open(train / wnid / f"{wnid}_{_mapped(wnid, index)}.JPEG").convert("RGB"))
      assert np.abs(pixels.mean((0, 1)) - expected.mean((0, 1))).max() < 4
  splits = data.load_splits("mini_imagenet", str(out), str(tmp_path / "tfds"), image_size=8)
  assert {s: split.class_names for s, split in splits.items()} == {
      "train": CLASSES["train.csv"], "val": CLASSES["val.csv"], "test": CLASSES["test.csv"]}
  assert all(list(split.class_counts) == [len(PICKED)] * split.num_classes for split in splits.values())
  first = splits["train"].images[splits["train"].labels == 0].reshape(len(PICKED), -1, 3).mean(1)
  expected = [_color("n01532829", _mapped("n01532829", i)) for i in PICKED]
  assert np.abs(np.sort(first, 0) - np.sort(expected, 0)).max() < 4  # the mapped files' colours, read back


def test_resize_0_copies_the_ilsvrc_files_as_they_are(ilsvrc_train, tmp_path):
  train, lists = ilsvrc_train
  out = ilsvrc.build(train, tmp_path / "mini", resize=0, lists=lists, progress=False)
  assert (out / "images" / "n0193011200000002.jpg").read_bytes() == (train / "n01930112" / "n01930112_9.JPEG"
                                                                      ).read_bytes()


def test_a_missing_image_is_named_in_one_line_before_anything_is_written(ilsvrc_train, tmp_path):
  train, lists = ilsvrc_train
  (train / "n01558993" / "n01558993_1234.JPEG").unlink()  # now 5 files: the 5th is 10004; the lists ask up to 5
  (train / "n01855672" / "n01855672_23.JPEG").unlink()
  (train / "n01855672" / "n01855672_10004.JPEG").unlink()  # 4 files: index 5 is missing
  text = (lists / "test.csv").read_text()
  (lists / "test.csv").write_text(text + "n0193011200000007.jpg,n01930112\n")  # 6 files: a 7th is missing
  said = one_line_error(lambda: ilsvrc.build(train, tmp_path / "mini", lists=lists, progress=False),
                        "n0185567200000005.jpg (file 5 by number of", "which holds 4", "and 1 more of the 13 listed")
  assert str(train / "n01855672") in said
  assert not (tmp_path / "mini").exists()
  one_line_error(lambda: ilsvrc.build(train / "absent", tmp_path / "mini", lists=lists, progress=False),
                 "is not a folder", "pass --from the train/ folder")


def test_a_tarred_class_is_refused_naming_the_extraction(ilsvrc_train, tmp_path):
  train, lists = ilsvrc_train
  for p in (train / "n01930112").iterdir():
    p.unlink()
  (train / "n01930112").rmdir()
  (train / "n01930112.tar").write_bytes(b"")
  one_line_error(lambda: ilsvrc.build(train, tmp_path / "mini", lists=lists, progress=False),
                 "n01930112.tar is a tar file", "must be extracted first", "tar xf n01930112.tar")
  assert not (tmp_path / "mini").exists()


def test_the_ilsvrc_root_is_taken_for_its_train_folder(ilsvrc_train, tmp_path):
  train, lists = ilsvrc_train
  out = ilsvrc.build(train.parent, tmp_path / "mini", resize=8, lists=lists, progress=False)
  assert len(list((out / "images").iterdir())) == 4 * len(PICKED)


def test_a_rerun_on_a_complete_folder_does_nothing(ilsvrc_train, tmp_path, monkeypatch, capsys):
  train, lists = ilsvrc_train
  out = ilsvrc.build(train, tmp_path / "mini", resize=8, lists=lists, progress=False)
  stamps = {p.name: p.stat().st_mtime_ns for p in (out / "images").iterdir()}
  monkeypatch.setattr(ilsvrc, "write_image", lambda *a: pytest.fail("a complete build was written again"))
  ilsvrc.build(train, out, resize=8, lists=lists)
  assert "already holds it, complete and verified" in capsys.readouterr().err
  assert stamps == {p.name: p.stat().st_mtime_ns for p in (out / "images").iterdir()}
  monkeypatch.undo()
  (out / "images" / "n0153282900000001.jpg").unlink()  # incomplete now: built again, at another side too
  ilsvrc.build(train, out, resize=12, lists=lists, progress=False)
  with Image.open(out / "images" / "n0153282900000001.jpg") as im:
    assert im.size == (12, 12)
  assert sorted(p.name for p in out.iterdir()) == sorted([ilsvrc.MARKER, "images", *ilsvrc.CSVS])


@pytest.mark.parametrize("stop", [KeyboardInterrupt, OSError])
def test_an_interrupted_build_leaves_nothing_where_the_reader_looks(ilsvrc_train, tmp_path, monkeypatch, stop):
  train, lists = ilsvrc_train
  written = []
  real = ilsvrc.write_image

  def some_then_stop(source, target, resize):
    if len(written) == 5:
      raise stop("stopped mid-build")
    written.append(target)
    real(source, target, resize)

  monkeypatch.setattr(ilsvrc, "write_image", some_then_stop)
  with pytest.raises(stop):
    ilsvrc.build(train, tmp_path / "mini", resize=8, lists=lists, progress=False)
  assert written and list((tmp_path / "mini").iterdir()) == []
  with pytest.raises(DataError, match="Found no mini-ImageNet"):
    data.load_splits("mini_imagenet", str(tmp_path / "mini"), str(tmp_path / "tfds"), image_size=8)


def test_files_it_did_not_build_are_never_replaced(ilsvrc_train, tmp_path):
  train, lists = ilsvrc_train
  (tmp_path / "mini").mkdir()
  (tmp_path / "mini" / "train.csv").write_text("filename,label\n")
  one_line_error(lambda: ilsvrc.build(train, tmp_path / "mini", lists=lists, progress=False),
                 "already holds mini-ImageNet files this command did not build (train.csv)")
  assert (tmp_path / "mini" / "train.csv").read_text() == "filename,label\n"


def test_the_command_uses_the_shipped_lists_and_refuses_in_one_line(tmp_path):
  train = tmp_path / "train"
  train.mkdir()
  with pytest.raises(ConfigError, match="--from ILSVRC/train --to DIR"):
    get.get("mini_imagenet", str(tmp_path / "mini"))
  with pytest.raises(ConfigError, match="--from is for mini_imagenet only"):
    get.get("cub", str(tmp_path / "cub"), source=str(train))
  done = subprocess.run([sys.executable, "-m", "fewshot.data.get", "mini_imagenet", "--from", str(train), "--to",
                         str(tmp_path / "mini")], capture_output=True, text=True, env={**os.environ})
  # An empty train/ folder: the shipped lists' first image is named, and 59,999 more. Off a terminal a stage line
  # ("mini_imagenet: checking ...") comes first; the failure itself is the one last line.
  *stages, error = done.stderr.strip().splitlines()
  assert done.returncode == 2 and error.startswith("error: ") and all(s.startswith("mini_imagenet: ") for s in stages)
  assert "n0153282900000005.jpg (file 5 by number of" in done.stderr and "which does not exist" in done.stderr
  assert "and 59,999 more of the 60,000 listed" in done.stderr
  assert not (tmp_path / "mini").exists()


# ---------------------------------------------------------------- the shipped lists

def test_the_shipped_lists_are_ravi_and_larochelles_split_with_their_recorded_sha256():
  lists = ilsvrc.read_lists()
  sizes = {csv: (len(rows), len({w for _, w, _ in rows})) for csv, rows in lists.items()}
  assert sizes == {"train.csv": (38_400, 64), "val.csv": (9_600, 16), "test.csv": (12_000, 20)}
  for rows in lists.values():
    counts = {}
    for _, wnid, _ in rows:
      counts[wnid] = counts.get(wnid, 0) + 1
    assert set(counts.values()) == {600}
  names = [n for rows in lists.values() for n, _, _ in rows]
  assert len(set(names)) == 60_000  # read_lists already refuses a class in two splits
  readme = (ilsvrc.RAVI_LAROCHELLE / "README.md").read_text()
  for csv in ilsvrc.CSVS:
    digest = hashlib.sha256((ilsvrc.RAVI_LAROCHELLE / csv).read_bytes()).hexdigest()
    assert re.search(rf"`{csv}`.*{digest}", readme), f"{csv}'s SHA-256 {digest} is not the README's"
