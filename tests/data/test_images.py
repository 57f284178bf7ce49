"""The four image datasets: class splits, one-time tfds preparation, reading classes back, bad input."""

from __future__ import annotations

import io
import pathlib

import numpy as np
import pytest
from PIL import Image

from fewshot import data
from fewshot.data import catalog, class_splits, images, memory, readers

import dataset_fixtures as fixtures
from dataset_fixtures import one_line_error

SIZE = 20  # model input side in these tests; stored at int(1.15 * 20) = 23
STORED = 23


def tree(path: pathlib.Path) -> list[str]:
  return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


def reference(fx: fixtures.Fixture, class_id: int, size: int, crop: bool = False) -> np.ndarray:
  """The images of one class, decoded and resized here with PIL directly, in annotation order."""
  out = []
  for member, label, _, bbox, index in fx.records:
    if label != class_id:
      continue
    if index is None:
      im = Image.open(io.BytesIO(fx.files[member])).convert("RGB")
    else:
      im = Image.fromarray(fx.pixels[member][index])
    if crop:
      x, y, w, h = bbox
      im = im.crop((max(0, round(x)), max(0, round(y)), min(im.width, round(x + w)), min(im.height, round(y + h))))
    out.append(np.asarray(im.resize((size, size), Image.Resampling.BILINEAR)))
  return np.stack(out)


def check_split(split: data.Split, fx: fixtures.Fixture, class_ids, size: int = STORED, crop: bool = False):
  """Names, sorted labels 0..C-1, uint8 [S, S, 3], and every pixel as PIL gives it, class by class."""
  assert split.class_names == tuple(fx.class_names[c] for c in class_ids)
  assert split.images.dtype == np.uint8 and split.image_shape == (size, size, 3)
  assert split.labels.dtype == np.int32 and np.all(np.diff(split.labels) >= 0)
  np.testing.assert_array_equal(np.unique(split.labels), np.arange(len(class_ids)))
  for k, c in enumerate(class_ids):
    np.testing.assert_array_equal(split.images[split.labels == k], reference(fx, c, size, crop))
  # Random-noise fixture images: resizing keeps the mean near mid-grey.
  assert 90 < split.images.mean() < 165


# ---------------------------------------------------------------- class splits (pure)


def test_cub_fewshot_is_the_parity_split_of_chen_et_al():
  ids = class_splits.class_ids("cub", [None] * 200)
  assert {k: len(v) for k, v in ids.items()} == {"train": 100, "val": 50, "test": 50}
  np.testing.assert_array_equal(ids["train"], np.arange(0, 200, 2))
  np.testing.assert_array_equal(ids["val"], np.arange(1, 200, 4))
  np.testing.assert_array_equal(ids["test"], np.arange(3, 200, 4))
  small = class_splits.class_ids("cub", [None] * 8)
  assert {k: v.tolist() for k, v in small.items()} == {"train": [0, 2, 4, 6], "val": [1, 5], "test": [3, 7]}


@pytest.mark.parametrize("dataset,num_classes,half", [("cub", 200, 100), ("cars196", 196, 98)])
def test_dml_halves(dataset, num_classes, half):
  ids = class_splits.class_ids(dataset, [None] * num_classes, class_splits="dml")
  assert list(ids) == ["train", "test"]
  np.testing.assert_array_equal(ids["train"], np.arange(half))
  np.testing.assert_array_equal(ids["test"], np.arange(half, num_classes))


@pytest.mark.parametrize("dataset,sizes", [("sop", {"train": 11_318, "test": 11_316}),
                                           ("mini_imagenet", {"train": 64, "val": 16, "test": 20})])
def test_file_defined_partitions(dataset, sizes):
  subsets = [name for name, n in sizes.items() for _ in range(n)]
  subsets[0], subsets[-1] = subsets[-1], subsets[0]  # the files, not positions, decide by default
  ids = class_splits.class_ids(dataset, subsets)
  assert {k: len(v) for k, v in ids.items()} == sizes
  for name, v in ids.items():
    assert all(subsets[c] == name for c in v)
  rand = class_splits.class_ids(dataset, subsets, class_order="random", seed=5)
  assert {k: len(v) for k, v in rand.items()} == sizes
  assert np.array_equal(np.sort(np.concatenate(list(rand.values()))), np.arange(len(subsets)))
  assert not np.array_equal(rand["train"], ids["train"])


@pytest.mark.parametrize("dataset,named", [("cub", "fewshot"), ("cub", "dml"), ("cars196", "dml"),
                                              ("sop", "dml"), ("mini_imagenet", "fewshot")])
def test_random_order_is_seeded_partition(dataset, named):
  n = 40
  subsets = {"sop": ["train"] * 22 + ["test"] * 18,
             "mini_imagenet": ["train"] * 24 + ["val"] * 8 + ["test"] * 8}.get(dataset, [None] * n)
  split = lambda **kw: class_splits.class_ids(dataset, subsets, class_splits=named, **kw)  # noqa: E731
  default, a, b, c = split(), split(class_order="random", seed=1), split(class_order="random", seed=1), \
      split(class_order="random", seed=2)
  for name in default:
    np.testing.assert_array_equal(a[name], b[name])
    assert len(a[name]) == len(default[name]) and np.all(np.diff(a[name]) > 0)
  assert any(not np.array_equal(a[k], c[k]) for k in a)
  assert any(not np.array_equal(a[k], default[k]) for k in a)
  everything = np.concatenate(list(a.values()))
  assert len(everything) == n and len(set(everything.tolist())) == n  # disjoint and complete


def test_class_split_errors():
  one_line_error(lambda: class_splits.class_ids("sop", ["train", "test"], class_splits="fewshot"),
                 "--class_splits fewshot", "sop", "choose one of dml")
  one_line_error(lambda: class_splits.class_ids("mini_imagenet", ["train"], class_splits="dml"), "choose one of fewshot")
  one_line_error(lambda: class_splits.class_ids("cub", [None] * 8, class_order="shuffled"), "default, random")
  one_line_error(lambda: class_splits.class_ids("cub", [None] * 8, class_order="random", seed="x"), "seed")
  one_line_error(lambda: class_splits.class_ids("cub", [None] * 3), "'test'", "at least 4")
  one_line_error(lambda: class_splits.class_ids("sop", ["train", None, "test"]), "class 1", "--class_splits dml")
  one_line_error(lambda: class_splits.class_ids("omniglot", [None] * 4), "cub, mini_imagenet, cifar_fs, fc100, cars196, sop")


def test_class_subsets_of_records():
  labels = [0, 0, 1, 1, 2]
  assert class_splits.class_subsets(labels, ["train", "train", "train", "test", None], 4) == \
      ["train", None, None, None]


# ---------------------------------------------------------------- preparing and reading each dataset

CASES = {
    "cub_folder": ("cub", lambda root: fixtures.write_cub(root, classes=8, per_class=3)),
    "cub_tgz": ("cub", lambda root: fixtures.write_cub(root, classes=8, per_class=3, layout="tgz")),
    "mini_csv_zip": ("mini_imagenet", lambda root: fixtures.write_mini_imagenet(root, layout="csv_zip")),
    "mini_pickle": ("mini_imagenet", lambda root: fixtures.write_mini_imagenet(root, size=(84, 84),
                                                                              layout="pickle")),
    "cars_devkit_tgz": ("cars196", lambda root: fixtures.write_cars196(root, classes=6, layout="devkit_tgz")),
    "cars_annos": ("cars196", lambda root: fixtures.write_cars196(root, classes=6, layout="cars_annos")),
    "sop_zip": ("sop", lambda root: fixtures.write_sop(root, layout="zip")),
}
EXPECTED = {  # class ids per split under the default class splits and order
    "cub": {"train": [0, 2, 4, 6], "val": [1, 5], "test": [3, 7]},
    "mini_imagenet": {"train": [0, 1, 2], "val": [3, 4], "test": [5, 6]},
    "cars196": {"train": [0, 1, 2], "test": [3, 4, 5]},
    "sop": {"train": [0, 1, 2], "test": [3, 4]},
}


@pytest.mark.parametrize("case", list(CASES))
def test_default_splits_from_each_layout(tmp_path, case):
  dataset, write = CASES[case]
  fx = write(tmp_path / "src")
  splits = data.load_splits(dataset, str(fx.data_dir), str(tmp_path / "tfds"), image_size=SIZE)
  assert list(splits) == list(EXPECTED[dataset])
  for name, ids in EXPECTED[dataset].items():
    check_split(splits[name], fx, ids)
  prepared = images.prepare(dataset, fx.data_dir, str(tmp_path / "tfds"), size=STORED)
  # Labels and official subsets are known from the metadata alone, in label order.
  order = sorted(range(len(fx.records)), key=lambda i: (fx.records[i][1], i))
  np.testing.assert_array_equal(prepared.labels, [fx.records[i][1] for i in order])
  assert list(prepared.record_subsets) == [fx.records[i][2] for i in order]
  assert prepared.class_names == tuple(fx.class_names)


@pytest.fixture(scope="module")
def cars(tmp_path_factory):
  root = tmp_path_factory.mktemp("cars")
  fx = fixtures.write_cars196(root / "src", classes=8, per_class=3, size=(24, 32), layout="devkit")
  return fx, str(root / "tfds")


def test_dml_class_order_is_seeded_and_differs_from_default(cars):
  fx, tfds_dir = cars
  load = lambda **kw: data.load_splits("cars196", str(fx.data_dir), tfds_dir, image_size=SIZE, **kw)  # noqa: E731
  default = load()
  assert default["train"].class_names == tuple(fx.class_names[:4])
  assert default["test"].class_names == tuple(fx.class_names[4:])
  a, b, c = load(class_order="random", seed=0), load(class_order="random", seed=0), load(class_order="random", seed=3)
  assert a["train"].class_names == b["train"].class_names
  np.testing.assert_array_equal(a["test"].images, b["test"].images)
  assert set(a["train"].class_names) != set(default["train"].class_names)
  assert set(a["train"].class_names) != set(c["train"].class_names)
  ids = class_splits.class_ids("cars196", [None] * 8, class_order="random", seed=0)
  for name in ("train", "test"):
    check_split(a[name], fx, ids[name].tolist())


def test_bbox_crop_on_cars(cars):
  fx, tfds_dir = cars
  full = data.load_splits("cars196", str(fx.data_dir), tfds_dir, image_size=SIZE)
  crop = data.load_splits("cars196", str(fx.data_dir), tfds_dir, image_size=SIZE, bbox_crop=True)
  check_split(crop["test"], fx, [4, 5, 6, 7], crop=True)
  assert np.abs(crop["test"].images.astype(int) - full["test"].images).mean() > 10


def test_bbox_crop_keeps_the_box_only(tmp_path):
  """A red image with a green box: cropped, it is green; uncropped, the corners stay red."""
  fx = fixtures.write_cub(tmp_path / "src", classes=4, per_class=2)
  folder = fx.data_dir / "CUB_200_2011"
  pixels = np.zeros((48, 64, 3), np.uint8)
  pixels[..., 0] = 255
  pixels[8:40, 16:56] = (0, 255, 0)
  buf = io.BytesIO()
  Image.fromarray(pixels).save(buf, "PNG")
  (folder / fx.records[0][0]).write_bytes(buf.getvalue())
  lines = (folder / "bounding_boxes.txt").read_text().splitlines()
  lines[0] = "1 16.0 8.0 40.0 32.0"
  (folder / "bounding_boxes.txt").write_text("\n".join(lines) + "\n")
  tfds_dir = str(tmp_path / "tfds")
  crop = data.load_split("cub", "train", str(fx.data_dir), tfds_dir, image_size=SIZE, bbox_crop=True)
  full = data.load_split("cub", "train", str(fx.data_dir), tfds_dir, image_size=SIZE)
  np.testing.assert_array_equal(crop.images[0], np.broadcast_to(np.uint8([0, 255, 0]), (STORED, STORED, 3)))
  assert tuple(full.images[0, 0, 0]) == (255, 0, 0) and tuple(full.images[0, -1, -1]) == (255, 0, 0)
  assert tuple(full.images[0, STORED // 2, STORED // 2]) == (0, 255, 0)


def test_second_load_reuses_prepared_data(cars, monkeypatch):
  fx, tfds_dir = cars
  first = data.load_splits("cars196", str(fx.data_dir), tfds_dir, image_size=SIZE, class_order="random", seed=7)
  before = {p: p.stat().st_mtime_ns for p in pathlib.Path(tfds_dir).rglob("*") if p.is_file()}

  def fail(*args, **kwargs):
    raise AssertionError("the dataset files were read again")

  monkeypatch.setattr(readers, "read", fail)
  again = data.load_splits("cars196", str(fx.data_dir), tfds_dir, image_size=SIZE, class_order="random", seed=7)
  for name in first:
    np.testing.assert_array_equal(again[name].images, first[name].images)
    assert again[name].class_names == first[name].class_names
  assert {p: p.stat().st_mtime_ns for p in pathlib.Path(tfds_dir).rglob("*") if p.is_file()} == before
  with pytest.raises(AssertionError, match="read again"):  # another stored size is another preparation
    data.load_splits("cars196", str(fx.data_dir), tfds_dir, image_size=SIZE + 8)


def test_changed_source_is_prepared_afresh(tmp_path):
  fx = fixtures.write_sop(tmp_path / "src")
  tfds_dir = tmp_path / "tfds"
  data.load_splits("sop", str(fx.data_dir), str(tfds_dir), image_size=SIZE)
  first = fx.data_dir / "Stanford_Online_Products" / fx.records[0][0]
  rng = np.random.default_rng(1)
  first.write_bytes(fixtures.image_bytes(rng, (30, 20)))
  train = data.load_split("sop", "train", str(fx.data_dir), str(tfds_dir), image_size=SIZE)
  assert len(list((tfds_dir / "fewshot_images").iterdir())) == 2
  fx.files[fx.records[0][0]] = first.read_bytes()
  check_split(train, fx, [0, 1, 2])


def test_many_parts_and_chunks_read_the_same(tmp_path, monkeypatch):
  fx = fixtures.write_cub(tmp_path / "src", classes=8, per_class=3)
  monkeypatch.setattr(images, "PART_BYTES", 5 * 3 * STORED ** 2)  # 5 records per tfds split
  prepared = images.prepare("cub", fx.data_dir, str(tmp_path / "tfds"), size=STORED)
  assert prepared.builder.info.metadata["num_parts"] == 5
  ids = [7, 1, 4]  # labels follow the given order
  split = prepared.read(ids)
  for k, c in enumerate(ids):
    np.testing.assert_array_equal(split.images[split.labels == k], reference(fx, c, STORED))
  chunks = list(prepared.iter_chunks(ids, chunk_size=4))
  assert [len(x) for x, _ in chunks] == [4, 4, 1]
  np.testing.assert_array_equal(np.concatenate([x for x, _ in chunks]), split.images)
  np.testing.assert_array_equal(np.concatenate([y for _, y in chunks]), split.labels)
  assert prepared.num_images(ids) == 9 and prepared.nbytes(ids) == 9 * 3 * STORED ** 2


@pytest.mark.parametrize("case", ["cub_first", "cub_last_part", "cars_tgz"])
def test_corrupt_image_names_file_and_leaves_nothing(tmp_path, monkeypatch, case):
  tfds_dir = tmp_path / "tfds"
  if case == "cars_tgz":
    dataset, fx = "cars196", fixtures.write_cars196(tmp_path / "src", layout="devkit_tgz", defect="corrupt_image")
  else:
    dataset, fx = "cub", fixtures.write_cub(tmp_path / "src", classes=8, per_class=3,
                                            defect="corrupt_image" if case == "cub_first" else None)
  if case == "cub_last_part":  # fails after earlier tfds splits were written
    monkeypatch.setattr(images, "PART_BYTES", 5 * 3 * STORED ** 2)
    fx.broken = fx.records[-1][0]
    path = fx.data_dir / "CUB_200_2011" / fx.broken
    path.write_bytes(fixtures.truncated(path.read_bytes()))
  one_line_error(lambda: data.load_splits(dataset, str(fx.data_dir), str(tfds_dir), image_size=SIZE),
                 fx.broken, "corrupt")
  assert tree(tfds_dir) == []


def test_bad_options(tmp_path):
  fx = fixtures.write_sop(tmp_path / "src")
  tfds_dir = tmp_path / "tfds"
  one_line_error(lambda: data.load_splits("sop", str(fx.data_dir), str(tfds_dir), bbox_crop=True), "cub, cars196")
  one_line_error(lambda: data.load_splits("sop", str(fx.data_dir), str(tfds_dir), class_splits="fewshot"),
                 "choose one of dml")
  one_line_error(lambda: data.load_splits("sop", str(fx.data_dir), str(tfds_dir), splits=("valid",)),
                 "'valid'", "train, val, test")
  one_line_error(lambda: data.load_splits("sop", str(fx.data_dir), str(tfds_dir), class_order="sorted"),
                 "default, random")
  one_line_error(lambda: data.load_splits("sop", str(fx.data_dir), str(tfds_dir), image_size=0), "image_size")
  one_line_error(lambda: data.load_splits("cub", str(tmp_path / "nope"), str(tfds_dir)), "does not exist")
  one_line_error(lambda: data.load_splits("strokes", tfds_dir=str(tfds_dir), class_order="random"), "class_order")
  one_line_error(lambda: data.load_splits("strokes", tfds_dir=str(tfds_dir), image_size=84), "--image_size 84")
  assert tree(tfds_dir) == []


def test_memory_plan():
  mini84, sop224 = data.memory_plan("mini_imagenet", 84), data.memory_plan("sop", 224)
  assert mini84["train"] == memory.SplitPlan(38_400, 96, 38_400 * 96 * 96 * 3, "device")
  assert list(sop224) == ["train", "test"] and sop224["train"].stored_size == 257
  assert {p.placement for p in sop224.values()} == {"host"}
  assert data.memory_plan("cub", 224, class_splits="dml")["train"].placement == "device"
  small = data.memory_plan("cub", 84, split_images={"train": 10}, device_budget_bytes=10 * 96 * 96 * 3 - 1)
  assert small == {"train": memory.SplitPlan(10, 96, 10 * 96 * 96 * 3, "host")}
  assert catalog.stored_size(84) == 96 and catalog.stored_size(224) == 257
