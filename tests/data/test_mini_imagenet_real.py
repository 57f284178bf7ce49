"""mini-ImageNet read as it is (issue 54 item 1): the real folder, where ``FEWSHOT_MINI_IMAGENET_DIR`` names it.

The folder is what ``../shared/data/mini_imagenet/lay_out.sh`` builds (train.csv, val.csv, test.csv, images/), or
what ``python -m fewshot.data.get mini_imagenet --from ILSVRC/train`` writes. The images are never in the repository,
so without the variable this file is skipped, saying so.
"""

import csv
import os
import pathlib

import numpy as np
import pytest
from PIL import Image

from fewshot import data
from fewshot.data.readers import mini_imagenet

FOLDER = os.environ.get("FEWSHOT_MINI_IMAGENET_DIR")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not FOLDER, reason="FEWSHOT_MINI_IMAGENET_DIR names no mini-ImageNet folder (lay_out.sh or data.get builds one)")]


def _listed(split: str) -> list[tuple[str, str]]:
  with open(pathlib.Path(FOLDER) / f"{split}.csv", newline="") as f:
    return [(row["filename"], row["label"]) for row in csv.DictReader(f)]


def test_the_reader_lists_ravi_and_larochelle_s_60000_images_under_their_csv_labels():
  records = mini_imagenet.read_mini_imagenet(FOLDER)
  assert records.layout == "csv"
  for split, (classes, images) in {"train": (64, 38400), "val": (16, 9600), "test": (20, 12000)}.items():
    listed = _listed(split)
    assert len(listed) == images and len({w for _, w in listed}) == classes
    read = [(r.member.removeprefix("images/"), records.class_names[r.label]) for r in records.records
            if r.subset == split]
    assert read == listed  # every image the listed one, under its listed class, in the lists' order


def test_the_prepared_splits_hold_each_listed_image_at_the_stored_size(tmp_path_factory):
  tfds = str(tmp_path_factory.mktemp("mini_tfds"))
  splits = data.load_splits("mini_imagenet", FOLDER, tfds)
  assert {s: (v.num_classes, len(v.labels)) for s, v in splits.items()} == {
      "train": (64, 38400), "val": (16, 9600), "test": (20, 12000)}
  assert splits["train"].images.shape[1:] == (96, 96, 3)  # int(1.15 * 84): room for the 84 px random crop
  rng = np.random.default_rng(0)
  for split in ("train", "test"):
    listed, prepared = _listed(split), splits[split]
    for i in rng.choice(len(listed), 8, replace=False):  # the stored image is the file's, not another's
      name, wnid = listed[i]
      label = prepared.class_names.index(wnid)
      own = np.flatnonzero(prepared.labels == label)
      with Image.open(pathlib.Path(FOLDER) / "images" / name) as im:
        expected = np.asarray(im.convert("RGB").resize((96, 96), Image.Resampling.BILINEAR), np.float64)
      errors = [np.abs(prepared.images[k].astype(np.float64) - expected).mean() for k in own]
      assert min(errors) < 6.0 and sorted(errors)[1] > 2 * min(errors), (name, sorted(errors)[:2])
