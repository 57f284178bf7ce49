"""Data layer: the strokes generator, tfds preparation and reuse, omniglot reading, bad input."""

import hashlib
import os
import pathlib
import zipfile

import numpy as np
import pytest

from fewshot import data
from fewshot.data import omniglot, strokes
from fewshot.errors import ConfigError

from omniglot_fixtures import write_character_pngs


def make_fixture(root: pathlib.Path, num_chars: int = 5, per_char: int = 4) -> pathlib.Path:
  for c in range(num_chars):
    write_character_pngs(root, "alpha" if c % 2 == 0 else "beta", f"character{c + 1:02d}", per_char, seed=c)
  return root


def tree(path: pathlib.Path) -> list[str]:
  return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


def correlations(images, labels):
  x = images.reshape(len(images), -1).astype(np.float64)
  x -= x.mean(1, keepdims=True)
  x /= np.linalg.norm(x, axis=1, keepdims=True)
  corr = x @ x.T
  same = labels[:, None] == labels[None, :]
  off_diag = ~np.eye(len(x), dtype=bool)
  return corr[same & off_diag].mean(), corr[~same].mean()


# ----------------------------------------------------------------------------- strokes generator


def test_render_is_deterministic_in_seed():
  a_images, a_labels = strokes.render_glyphs(12, 5, seed=1)
  b_images, b_labels = strokes.render_glyphs(12, 5, seed=1)
  c_images, _ = strokes.render_glyphs(12, 5, seed=2)
  np.testing.assert_array_equal(a_images, b_images)
  np.testing.assert_array_equal(a_labels, b_labels)
  assert np.mean(a_images != c_images) > 0.05


def test_render_shapes_and_values():
  images, labels = strokes.render_glyphs(30, 7, seed=3)
  assert images.shape == (210, 28, 28, 1) and images.dtype == np.uint8
  assert labels.dtype == np.int32
  np.testing.assert_array_equal(labels, np.repeat(np.arange(30), 7))
  flat = images.reshape(len(images), -1)
  assert np.all(flat.min(1) == 0), "every image has background"
  assert np.all(flat.max(1) >= 200), "every image has solid ink"
  ink = (flat > 127).mean(1)
  assert 0.02 < ink.min() and ink.max() < 0.5
  # Anti-aliased: grey levels occur, not only 0 and 255.
  assert np.mean((flat > 0) & (flat < 255)) > 0.02


def test_render_classes_are_learnable_but_not_identical():
  images, labels = strokes.render_glyphs(40, 10, seed=4)
  within, between = correlations(images, labels)
  assert within > between + 0.1, (within, between)
  # Drawers differ: no two images of a class are the same.
  assert within < 0.95


# ----------------------------------------------------------------------------- strokes via tfds


@pytest.fixture(scope="module")
def strokes_tfds(tmp_path_factory):
  tfds_dir = tmp_path_factory.mktemp("tfds_strokes")
  return tfds_dir, data.load_splits("strokes", tfds_dir=str(tfds_dir))


def test_strokes_default_splits(strokes_tfds):
  _, splits = strokes_tfds
  assert {k: v.num_classes for k, v in splits.items()} == {"train": 800, "val": 200, "test": 200}
  names = [set(s.class_names) for s in splits.values()]
  assert not (names[0] & names[1] or names[0] & names[2] or names[1] & names[2])
  assert set.union(*names) == {strokes.class_name(i) for i in range(1200)}
  for s in splits.values():
    assert s.image_shape == (28, 28, 1) and s.images.dtype == np.uint8
    assert np.all(s.class_counts == 20)
    np.testing.assert_array_equal(np.unique(s.labels), np.arange(s.num_classes))


def test_strokes_split_matches_generator(strokes_tfds):
  _, splits = strokes_tfds
  test = splits["test"]
  first = int(test.class_names[0].split("_")[1])
  # The preparation's arguments: a worker renders them once (tests/conftest.py), so this costs a copy.
  images, labels = strokes.render_glyphs(strokes.NUM_CLASSES, strokes.PER_CLASS, strokes.SEED)
  stored = test.images[test.labels == 0]
  expected = images[labels == first]
  # Same set of images (tfds may store them in another order).
  assert sorted(map(bytes, stored)) == sorted(map(bytes, expected))


def test_second_load_reuses_prepared_data(strokes_tfds, monkeypatch):
  tfds_dir, splits = strokes_tfds
  before = {p: p.stat().st_mtime_ns for p in tfds_dir.rglob("*") if p.is_file()}

  def fail(*args, **kwargs):
    raise AssertionError("generator called again")

  monkeypatch.setattr(strokes, "render_glyphs", fail)
  again = data.load_split("strokes", "val", tfds_dir=str(tfds_dir))
  np.testing.assert_array_equal(again.images, splits["val"].images)
  assert again.class_names == splits["val"].class_names
  assert {p: p.stat().st_mtime_ns for p in tfds_dir.rglob("*") if p.is_file()} == before


def test_small_strokes_config(tmp_path):
  b = strokes.Strokes(config=strokes.config(num_classes=12, per_class=3), data_dir=str(tmp_path))
  data.tfds_io.prepare(b)
  sizes = {s: data.tfds_io.read_split(b, s).num_classes for s in data.SPLITS}
  assert sizes == {"train": 8, "val": 2, "test": 2}
  assert b.is_prepared() and "c12_p3" in b.data_dir


def test_failed_preparation_leaves_nothing(tmp_path, monkeypatch):
  def fail(*args, **kwargs):
    raise RuntimeError("generator failed")

  monkeypatch.setattr(strokes, "render_glyphs", fail)
  b = strokes.Strokes(config=strokes.config(num_classes=12, per_class=3), data_dir=str(tmp_path))
  with pytest.raises(RuntimeError, match="generator failed"):
    data.tfds_io.prepare(b)
  assert tree(tmp_path) == []


# ----------------------------------------------------------------------------- omniglot


@pytest.fixture(scope="module")
def omniglot_zips(tmp_path_factory, omniglot_dir):
  tfds_dir = tmp_path_factory.mktemp("tfds_omniglot")
  return tfds_dir, data.load_splits("omniglot", data_dir=str(omniglot_dir), tfds_dir=str(tfds_dir))


def test_omniglot_real_zips(omniglot_zips):
  _, splits = omniglot_zips
  names = [set(s.class_names) for s in splits.values()]
  assert sum(map(len, names)) == len(set.union(*names)) == 242
  assert {"Greek/character01", "Latin/character01"} <= set.union(*names)
  for s in splits.values():
    assert s.image_shape == (28, 28, 1) and s.images.dtype == np.uint8
    assert np.all(s.class_counts == 20)
    assert np.mean(s.images[:, 0, 0, 0] == 0) > 0.99, "corners are background (0)"
    assert np.all(s.images.reshape(len(s.images), -1).max(1) >= 128), "every image has ink"
    assert np.median(s.images) == 0


def test_omniglot_extracted_matches_zips(omniglot_zips, omniglot_dir, tmp_path):
  tfds_dir, from_zips = omniglot_zips
  extracted = tmp_path / "extracted"
  for archive in sorted(omniglot_dir.glob("images_*.zip")):
    with zipfile.ZipFile(archive) as zf:
      zf.extractall(extracted)
  from_dirs = data.load_splits("omniglot", data_dir=str(extracted), tfds_dir=str(tfds_dir))
  for split in data.SPLITS:
    assert from_dirs[split].class_names == from_zips[split].class_names
    np.testing.assert_array_equal(from_dirs[split].images, from_zips[split].images)
  # A different source gets its own prepared copy, never the other one's.
  assert len(list((tfds_dir / "fewshot_omniglot").glob("src_*"))) == 2


def test_omniglot_fixture_values(tmp_path):
  src = make_fixture(tmp_path / "src", num_chars=5, per_char=4)
  splits = data.load_splits("omniglot", data_dir=str(src), tfds_dir=str(tmp_path / "tfds"))
  assert [s.num_classes for s in splits.values()] == [3, 1, 1]
  images = np.concatenate([s.images for s in splits.values()])
  assert images.shape == (20, 28, 28, 1)
  assert np.all(images[:, :2, :, 0] == 0) and images.max() == 255
  assert omniglot.class_split(["a", "b", "c", "d", "e"]) == omniglot.class_split(["e", "d", "c", "b", "a"])


def test_resize_nearest_samples_each_output_pixel_s_nearest_source_pixel_and_keeps_it_binary(tmp_path):
  src = make_fixture(tmp_path / "src", num_chars=5, per_char=4)
  png = sorted(src.rglob("*.png"))[0]
  from PIL import Image

  with Image.open(png) as im:  # the 105 px 1-bit original, inverted to ink 255 as the reader does
    source = 255 - np.asarray(im.convert("L"), np.uint8)
  for size in (28, 40):
    centres = np.floor((np.arange(size) + 0.5) * 105 / size).astype(int)  # each output pixel's centre, in source px
    expected = source[np.ix_(centres, centres)]
    got = omniglot.decode(png.read_bytes(), str(png), size, "nearest")[..., 0]
    np.testing.assert_array_equal(got, expected)
    assert set(np.unique(got)) <= {0, 255}
    assert len(np.unique(omniglot.decode(png.read_bytes(), str(png), size)[..., 0])) > 2  # box: grey levels
  tfds_dir = tmp_path / "tfds"
  binary = data.load_splits("omniglot", data_dir=str(src), tfds_dir=str(tfds_dir), resize="nearest")
  grey = data.load_splits("omniglot", data_dir=str(src), tfds_dir=str(tfds_dir))
  assert all(set(np.unique(s.images)) <= {0, 255} for s in binary.values())
  assert any(len(np.unique(s.images)) > 2 for s in grey.values())
  assert len(list((tfds_dir / "fewshot_omniglot").glob("src_*"))) == 2  # prepared apart, neither stale
  with pytest.raises(ConfigError, match="--resize nearest applies to omniglot .* leave --resize out"):
    data.load_splits("strokes", tfds_dir=str(tfds_dir), resize="nearest")


def test_omniglot_changed_source_is_not_stale(tmp_path):
  src = make_fixture(tmp_path / "src", num_chars=5)
  tfds_dir = str(tmp_path / "tfds")
  first = data.load_splits("omniglot", data_dir=str(src), tfds_dir=tfds_dir)
  write_character_pngs(src, "gamma", "character01", 4, seed=9)
  second = data.load_splits("omniglot", data_dir=str(src), tfds_dir=tfds_dir)
  assert sum(s.num_classes for s in first.values()) == 5
  assert sum(s.num_classes for s in second.values()) == 6


def test_vinyals_sizes_cut_a_seeded_order_at_vinyals_sizes_on_the_full_character_set():
  names = [f"alphabet{i // 40:02d}/character{i % 40:02d}" for i in range(1623)]
  splits = omniglot.character_splits(names, "vinyals_sizes", seed=0)
  assert [len(splits[s]) for s in data.SPLITS] == [1028, 172, 423]
  assert sorted(sum(splits.values(), [])) == sorted(names)  # disjoint, and every character somewhere
  assert omniglot.character_splits(names[::-1], "vinyals_sizes", seed=0) == splits  # a property of the names alone
  assert omniglot.character_splits(names, "vinyals_sizes", seed=1)["test"] != splits["test"]


def test_background_evaluation_character_splits_by_alphabet():
  assert len(omniglot.EVALUATION_ALPHABETS) == 20
  names = ["Latin/character01", "Angelic/character02", "Greek/character01", "Tengwar/character07"]
  assert omniglot.character_splits(names, "background_evaluation") == {
      "train": ["Greek/character01", "Latin/character01"], "test": ["Angelic/character02", "Tengwar/character07"]}
  with pytest.raises(data.DataError, match="images_evaluation.zip") as err:
    omniglot.character_splits(["Latin/character01", "Greek/character01"], "background_evaluation")
  assert "\n" not in str(err.value)
  with pytest.raises(ConfigError, match="default, vinyals_published, vinyals_sizes, background_evaluation"):
    omniglot.character_splits(names, "lake")


def test_rotations_are_new_classes_of_the_turned_images():
  rng = np.random.default_rng(0)
  images = rng.integers(0, 256, (5, 6, 6, 1), dtype=np.uint8)
  split = data.Split(images, np.array([0, 0, 1, 1, 1], np.int32), ("a/c1", "b/c2"))
  turned = omniglot.rotated(split)
  assert turned.class_names == tuple(f"{c}/rot{a:03d}" for c in ("a/c1", "b/c2") for a in (0, 90, 180, 270))
  np.testing.assert_array_equal(turned.class_counts, [2, 2, 2, 2, 3, 3, 3, 3])
  for label, name in enumerate(turned.class_names):
    quarter_turns = int(name[-3:]) // 90
    originals = images[split.labels == split.class_names.index(name.rsplit("/", 1)[0])]
    want = originals
    for _ in range(quarter_turns):  # counter-clockwise: the new row i is the old column W-1-i
      want = np.stack([[img[:, img.shape[1] - 1 - i] for i in range(img.shape[1])] for img in want])
    np.testing.assert_array_equal(turned.images[turned.labels == label], want)


def test_omniglot_protocols_on_the_real_zips(omniglot_zips, omniglot_dir):
  tfds_dir, default = omniglot_zips
  vinyals = data.load_splits("omniglot", data_dir=str(omniglot_dir), tfds_dir=str(tfds_dir),
                             class_splits="vinyals_sizes", seed=3)
  sizes = [vinyals[s].num_classes for s in data.SPLITS]
  assert sizes == [153, 26, 63]  # 242 characters cut at round(242 * 1028/1623) and round(242 * 1200/1623)
  assert set().union(*(s.class_names for s in vinyals.values())) == set().union(
      *(s.class_names for s in default.values()))
  assert all(np.all(s.class_counts == 20) for s in vinyals.values())
  # The images follow their characters from the stored split.
  name = vinyals["test"].class_names[0]
  stored = next(s for s in default.values() if name in s.class_names)
  np.testing.assert_array_equal(vinyals["test"].images[vinyals["test"].labels == 0],
                                stored.images[stored.labels == stored.class_names.index(name)])
  with pytest.raises(data.DataError, match="images_evaluation.zip"):  # the background_small zips hold no evaluation alphabet
    data.load_splits("omniglot", data_dir=str(omniglot_dir), tfds_dir=str(tfds_dir), class_splits="background_evaluation")
  turned = data.load_split("omniglot", "val", data_dir=str(omniglot_dir), tfds_dir=str(tfds_dir), rotations=True)
  assert turned.num_classes == 4 * default["val"].num_classes and len(turned.images) == 4 * len(default["val"].images)
  with pytest.raises(ConfigError, match="rotations"):
    data.load_split("strokes", "val", tfds_dir=str(tfds_dir), rotations=True)


def old_fingerprint(root: pathlib.Path) -> str:
  """Omniglot's fingerprint rule as first written, kept apart from the package: the sha1 of the sorted (name, size)
  of the zips directly in ``root`` and of every ``*.png`` under it (relative path; directory links not followed).
  """
  listing = [(p.name, p.stat().st_size) for p in root.glob("*.zip")]
  for dirpath, _, filenames in os.walk(root):
    pngs = [pathlib.Path(dirpath, name) for name in filenames if name.lower().endswith(".png")]
    listing += [(p.relative_to(root).as_posix(), p.stat().st_size) for p in pngs]
  return hashlib.sha1(repr(sorted(listing)).encode()).hexdigest()[:12]


def write_pinned_layout(root: pathlib.Path) -> pathlib.Path:
  """Zips and folders of stand-in bytes (scan decodes nothing), so every size, and so the digest, is fixed."""

  def zipped(name, members):
    with zipfile.ZipFile(root / name, "w", zipfile.ZIP_STORED) as zf:
      for member in members:
        zf.writestr(zipfile.ZipInfo(member, (2000, 1, 1, 0, 0, 0)), f"{name}:{member}")

  def written(*rels):
    for rel in rels:
      (root / rel).parent.mkdir(parents=True, exist_ok=True)
      (root / rel).write_bytes(f"folder:{rel}".encode())

  root.mkdir()
  # Greek and Latin are in both small zips, as in the real ones.
  zipped("images_background_small1.zip", ["images_background_small1/Greek/character01/0101_01.png",
                                           "images_background_small1/Latin/character02/0202_01.png",
                                           "__MACOSX/images_background_small1/Greek/character01/._0101_01.png"])
  zipped("images_background_small2.zip", ["images_background_small2/Greek/character01/0101_01.png",
                                           "images_background_small2/Latin/character02/0202_02.png",
                                           "images_background_small2/Korean/character03/0303_01.png"])
  written("extracted/Greek/character01/0101_01.png", "extracted/Tifinagh/character04/0404_01.PNG",
          "extracted/Tifinagh/character04/notes.txt", ".hidden/Greek/character09/0909_01.png",
          "nested/Bengali/character05/0505_01.png")
  zipped("nested/inner.zip", ["Hebrew/character06/0606_01.png"])  # not directly in root: not read
  os.symlink(root / "nested" / "Bengali", root / "extracted" / "Bengali")  # a directory link: not followed
  return root


def test_omniglot_fingerprint_is_the_first_written_rule(tmp_path):
  root = write_pinned_layout(tmp_path / "omniglot")
  found = omniglot.scan(str(root))
  # Computed by the scan of commit 35cf51b (before it read through fewshot.data.archives); it names prepared data
  # on users' disks, so it must never change.
  assert found.fingerprint == old_fingerprint(root) == "00c1e99006ff"
  assert found.class_names == ["Bengali/character05", "Greek/character01", "Korean/character03",
                               "Latin/character02", "Tifinagh/character04"]
  # Each image's first copy wins: the zips in name order, then the folder (hidden and __MACOSX files skipped).
  copies = {name: [found.tree.read(member).decode() for member in found.classes[name]] for name in found.class_names}
  assert copies == {
      "Bengali/character05": ["folder:nested/Bengali/character05/0505_01.png"],
      "Greek/character01": ["images_background_small1.zip:images_background_small1/Greek/character01/0101_01.png"],
      "Korean/character03": ["images_background_small2.zip:images_background_small2/Korean/character03/0303_01.png"],
      "Latin/character02": ["images_background_small1.zip:images_background_small1/Latin/character02/0202_01.png",
                            "images_background_small2.zip:images_background_small2/Latin/character02/0202_02.png"],
      "Tifinagh/character04": ["folder:extracted/Tifinagh/character04/0404_01.PNG"]}


def test_omniglot_real_fingerprint_is_the_first_written_rule(omniglot_dir):
  assert omniglot.scan(str(omniglot_dir)).fingerprint == old_fingerprint(omniglot_dir)


# ----------------------------------------------------------------------------- bad input


def test_omniglot_without_data_dir(tmp_path):
  with pytest.raises(data.DataError, match="--data_dir"):
    data.load_split("omniglot", "train", tfds_dir=str(tmp_path))


@pytest.mark.parametrize("case", ["missing", "empty", "corrupt_png", "unsafe_zip"])
def test_bad_omniglot_dir_leaves_nothing(tmp_path, case):
  src, tfds_dir = tmp_path / "src", tmp_path / "tfds"
  expect = {"missing": "does not exist", "empty": "no Omniglot images",
            "corrupt_png": "0001_01.png", "unsafe_zip": "unsafe member"}[case]
  if case != "missing":
    src.mkdir()
  if case == "corrupt_png":
    make_fixture(src)
    (src / "alpha" / "character01" / "0001_01.png").write_bytes(b"\x89PNG not really a png")
  if case == "unsafe_zip":
    with zipfile.ZipFile(src / "images_background.zip", "w") as zf:
      zf.writestr("../evil/alpha/character01/0001_01.png", b"x")
  with pytest.raises(data.DataError, match=expect) as err:
    data.load_split("omniglot", "train", data_dir=str(src), tfds_dir=str(tfds_dir))
  assert "\n" not in str(err.value)
  assert tree(tfds_dir) == []


def test_unknown_dataset_and_split(tmp_path):
  with pytest.raises(ConfigError, match="strokes, omniglot"):
    data.load_split("mnist", "train", tfds_dir=str(tmp_path))
  with pytest.raises(data.DataError, match="train, val, test"):
    data.load_split("strokes", "valid", tfds_dir=str(tmp_path))
  assert tree(tmp_path) == []


def test_default_tfds_dir(monkeypatch, tmp_path):
  monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "env"))
  assert data.default_tfds_dir(str(tmp_path / "arg")) == str(tmp_path / "arg")
  assert data.default_tfds_dir() == str(tmp_path / "env")
  monkeypatch.delenv("TFDS_DATA_DIR")
  assert data.default_tfds_dir() == os.path.expanduser("~/tensorflow_datasets")



def test_lakes_runs_extracted_beside_the_characters_are_named_and_not_read_as_characters(tmp_path):
  """Issue 56 item 4: the runs' PNGs (``all_runs/run01/training/class01.png``) read as 'classes' run01/training,
  each holding evaluation characters copied again, leaked across the splits.
  """
  from omniglot_fixtures import write_lake_runs  # noqa: PLC0415

  src = make_fixture(tmp_path / "src", num_chars=5, per_char=4)
  before = omniglot.scan(str(src))
  write_lake_runs(src / "all_runs")
  found = omniglot.scan(str(src))
  assert found.class_names == before.class_names == sorted(
      f"{'alpha' if c % 2 == 0 else 'beta'}/character{c + 1:02d}" for c in range(5))
  assert found.not_read == ("all_runs/",) and omniglot.files(str(src))[1] == ["all_runs/"]
