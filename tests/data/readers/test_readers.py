"""Reading CUB-200-2011, mini-ImageNet, Cars196 and SOP from their real on-disk layouts (tiny fixtures)."""

from __future__ import annotations

import io
import os
import pickle
import tarfile
import zipfile

import numpy as np
import pytest
from PIL import Image

from fewshot.data import archives, catalog, readers

import dataset_fixtures as fixtures
from dataset_fixtures import one_line_error


def check_records(recs: readers.DatasetRecords, fx: fixtures.Fixture) -> None:
  """Class names, records and the exact image bytes (or pixels) match what the fixture wrote."""
  assert list(recs.class_names) == fx.class_names
  assert [(r.member, r.label, r.subset, r.bbox, r.index) for r in recs.records] == fx.records
  assert recs.fingerprint == recs.tree.fingerprint
  seen = 0
  for record, image in recs.iter_images():
    seen += 1
    if record.index is None:
      assert image == fx.files[record.member]
    else:
      np.testing.assert_array_equal(image, fx.pixels[record.member][record.index])
  assert seen == len(fx.records)
  r = recs.records[-1]
  assert (recs.image(r) == fx.files[r.member]) if r.index is None else np.array_equal(recs.image(r), fx.pixels[r.member][r.index])


# ---------------------------------------------------------------- archives

TREE = {
    "top/a.txt": b"alpha\n",
    "top/sub/b.bin": bytes(range(256)) * 3,
    "top/sub/deeper/c.jpg": b"\xff\xd8" + b"x" * 1000,
    "z.txt": b"",
}


@pytest.mark.parametrize("archive", [None, "d.tgz", "d.tar.gz", "d.tar", "d.zip"])
def test_file_tree_lists_and_reads_members_of_folders_and_archives(tmp_path, archive):
  path = fixtures.write_tree(tmp_path / "data", TREE, archive)
  before = sorted(os.listdir(tmp_path / "data"))
  with archives.open_path(path) as tree:
    assert tree.members() == sorted(TREE)
    assert all(tree.read(m) == data for m, data in TREE.items())
    with tree.open("top/sub/b.bin") as f:
      assert f.read() == TREE["top/sub/b.bin"]
    assert dict(tree.iter_read(reversed(list(TREE)))) == TREE
    assert "top/a.txt" in tree and "top/sub" not in tree and "nope" not in tree
    assert tree.missing(["z.txt", "nope", "top/nope"]) == ["nope", "top/nope"]
    assert tree.where("top/a.txt").endswith("a.txt") and str(path) in tree.where("top/a.txt")
    view = tree.subtree("top/")
    assert view.members() == ["a.txt", "sub/b.bin", "sub/deeper/c.jpg"]
    assert view.read("sub/deeper/c.jpg") == TREE["top/sub/deeper/c.jpg"]
    assert view.fingerprint == tree.fingerprint
    one_line_error(lambda: view.read("z.txt"), "z.txt", "is not in")
  assert sorted(os.listdir(tmp_path / "data")) == before  # nothing extracted


def test_iter_read_goes_in_archive_order_and_keep_holds_small_members(tmp_path):
  files = {f"m/{i:02d}.bin": bytes([i]) * 700 for i in range(12)}
  path = fixtures.write_tree(tmp_path, files, "x.tgz")
  tree = archives.open_archive(path, keep=lambda name: name.endswith("03.bin"))
  assert [m for m, _ in tree.iter_read(sorted(files, reverse=True))] == sorted(files)
  part = tree.parts[0]
  assert set(part.kept) == {"m/03.bin"}
  part.close()
  part._tar = None  # a kept member is served without touching the archive
  assert tree.read("m/03.bin") == files["m/03.bin"]


def test_file_trees_pickle_without_handles(tmp_path):
  for archive in ("a.tgz", "a.zip", None):
    path = fixtures.write_tree(tmp_path / str(archive), TREE, archive)
    tree = archives.open_path(path).subtree("top")
    tree.read("a.txt")  # opens the handle that must not travel
    copy = pickle.loads(pickle.dumps(tree))
    assert copy.read("sub/b.bin") == TREE["top/sub/b.bin"] and copy.members() == tree.members()


def test_overlay_first_part_wins(tmp_path):
  fixtures.write_tree(tmp_path / "f", {"x/a.txt": b"folder", "x/only_folder.txt": b"1"})
  arch = fixtures.write_tree(tmp_path, {"x/a.txt": b"archive", "x/only_archive.txt": b"2"}, "x.zip")
  tree = archives.overlay(archives.open_folder(tmp_path / "f" / "x", mount="x"), archives.open_archive(arch))
  assert tree.members() == ["x/a.txt", "x/only_archive.txt", "x/only_folder.txt"]
  assert tree.read("x/a.txt") == b"folder" and tree.kinds == ("folder", "zip")
  assert tree.subtree("x").read("only_archive.txt") == b"2"



def test_folder_with_zips_puts_its_zips_first_and_keeps_stored_order(tmp_path):
  root = fixtures.write_tree(tmp_path / "d", {"b/x.txt": b"folder", "b/w.txt": b"w", "c.txt": b"c"})
  fixtures.write_tree(root, {"b/x.txt": b"zip b", "b/y.txt": b"y"}, "b.zip")
  fixtures.write_tree(root, {"b/x.txt": b"zip a", "a/z.txt": b"z"}, "a.zip")
  fixtures.write_tree(tmp_path / "elsewhere", {"l.txt": b"linked"})
  (root / "linked").symlink_to(tmp_path / "elsewhere")
  tree = archives.open_folder_with_zips(root, follow_links=False)
  assert tree.kinds == ("zip", "zip", "folder") and tree.read("b/x.txt") == b"zip a"
  # Archive order within a zip, name order within the folder (a folder's files before its sub-folders).
  assert tree.stored_members() == ["b/x.txt", "a/z.txt", "b/y.txt", "a.zip", "b.zip", "c.txt", "b/w.txt"]
  assert tree.members() == sorted(tree.stored_members())
  assert [(kind, name) for kind, name, _, _ in tree.file_stats()] == [
      ("zip", "a.zip"), ("zip", "b.zip"), ("folder", "a.zip"), ("folder", "b.zip"), ("folder", "c.txt"),
      ("folder", "b/w.txt"), ("folder", "b/x.txt")]
  assert "linked/l.txt" in archives.open_folder_with_zips(root)
  assert tree.where("b/none.txt") == f"{tree.description}:b/none.txt"
  assert archives.open_folder(root).where("b/none.txt") == str(root / "b" / "none.txt")


def test_a_zip_is_told_by_its_content(tmp_path):
  renamed = fixtures.write_tree(tmp_path, {"a.txt": b"a"}, "x.zip").rename(tmp_path / "x.bin")
  assert archives.is_zip(renamed) and not archives.is_zip(tmp_path) and archives.open_archive(renamed).kinds == ("zip",)
  (tmp_path / "y.bin").write_bytes(b"not a zip")
  one_line_error(lambda: archives.open_archive(tmp_path / "y.bin"), "not a supported archive")

def test_fingerprint_tracks_names_sizes_and_mtimes_without_listing_archives(tmp_path):
  folder = fixtures.write_tree(tmp_path / "f", TREE)
  fp = archives.open_folder(folder).fingerprint
  assert archives.open_folder(folder).fingerprint == fp
  (folder / "top" / "a.txt").write_bytes(b"changed!\n")
  assert archives.open_folder(folder).fingerprint != fp
  fp = archives.open_folder(folder).fingerprint
  os.utime(folder / "z.txt", (1e9, 1e9))
  assert archives.open_folder(folder).fingerprint != fp
  path = fixtures.write_tree(tmp_path, TREE, "a.tgz", truncate=True)
  fp = archives.open_archive(path).fingerprint  # a stat only: the truncation is not seen yet
  os.utime(path, (1e9, 1e9))
  assert archives.open_archive(path).fingerprint != fp


@pytest.mark.parametrize("archive", ["u.tgz", "u.tar", "u.zip"])
@pytest.mark.parametrize("entry", ["../evil.txt", "/etc/evil.txt", "top/../../evil.txt"])
def test_unsafe_archive_entries_are_refused(tmp_path, archive, entry):
  path = fixtures.write_tree(tmp_path, TREE, archive, unsafe=entry)
  one_line_error(lambda: archives.open_archive(path).members(), str(path), repr(entry), "unsafe")


def test_zip_windows_drive_entry_is_refused(tmp_path):
  path = fixtures.write_tree(tmp_path, TREE, "w.zip", unsafe="C:\\Windows\\evil.txt")
  one_line_error(lambda: archives.open_archive(path).members(), "unsafe", "evil.txt")


@pytest.mark.parametrize("archive", ["t.tgz", "t.tar", "t.zip"])
def test_truncated_archives_are_named(tmp_path, archive):
  path = fixtures.write_tree(tmp_path, TREE, archive, truncate=True)
  one_line_error(lambda: archives.open_archive(path).members(), f"archive {path}", "truncated or corrupt")


def test_tar_cut_at_a_member_boundary_or_garbled_is_corrupt(tmp_path):
  path = fixtures.write_tree(tmp_path, TREE, "t.tar")
  with tarfile.open(path) as tf:
    last = tf.getmembers()[-1]
  data = path.read_bytes()
  path.write_bytes(data[:last.offset])  # tarfile alone would list the first members and stop quietly
  one_line_error(lambda: archives.open_archive(path).members(), str(path), "end-of-archive")
  path.write_bytes(data[:last.offset] + b"\x07" * 512 + data[last.offset + 512:])
  one_line_error(lambda: archives.open_archive(path).members(), str(path), "truncated or corrupt")


def test_corrupt_gzip_and_zip_data_are_named(tmp_path):
  path = fixtures.write_tree(tmp_path, TREE, "c.tgz")
  data = bytearray(path.read_bytes())
  data[-6] ^= 0xFF  # the gzip CRC trailer
  path.write_bytes(bytes(data))
  one_line_error(lambda: archives.open_archive(path).members(), str(path), "truncated or corrupt")
  path = tmp_path / "c.zip"
  with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
    zf.writestr("a.bin", b"A" * 500)
  data = bytearray(path.read_bytes())
  data[100] ^= 0xFF  # inside a.bin's data: the listing is fine, the read fails its CRC
  path.write_bytes(bytes(data))
  tree = archives.open_archive(path)
  assert tree.members() == ["a.bin"]
  one_line_error(lambda: tree.read("a.bin"), "a.bin", str(path), "truncated or corrupt")


def test_archive_errors(tmp_path):
  one_line_error(lambda: archives.open_archive(tmp_path / "nope.tgz"), "nope.tgz", "does not exist")
  (tmp_path / "x.rar").write_bytes(b"Rar!")
  one_line_error(lambda: archives.open_archive(tmp_path / "x.rar"), "x.rar", "not a supported archive")
  one_line_error(lambda: archives.open_folder(tmp_path / "nope"), "nope", "not a directory")


# ---------------------------------------------------------------- check_image

def _encoded(fmt: str, size=(64, 80)) -> bytes:
  y, x = np.mgrid[:size[0], :size[1]]
  pixels = np.stack([x * 3 % 256, y * 5 % 256, (x * y) % 256], -1).astype(np.uint8)
  buf = io.BytesIO()
  Image.fromarray(pixels).save(buf, fmt)
  return buf.getvalue()


def test_check_image():
  jpeg, png = _encoded("JPEG"), _encoded("PNG")
  readers.check_image(jpeg)
  readers.check_image(png)
  # a JPEG cut inside its scan data still passes PIL's verify(); only decoding finds it
  one_line_error(lambda: readers.check_image(jpeg[:len(jpeg) * 3 // 4], "a/b.jpg"), "a/b.jpg", "truncated or corrupt")
  one_line_error(lambda: readers.check_image(b"<html>404</html>", "x.jpg"), "x.jpg", "not an image")
  flipped = bytearray(png)
  flipped[60] ^= 0xFF
  one_line_error(lambda: readers.check_image(bytes(flipped), "p.png"), "p.png", "truncated or corrupt")


def _check_corrupt_image(recs, fx):
  for record, data in recs.iter_images():
    if record.member == fx.broken:
      one_line_error(lambda: readers.check_image(data, recs.tree.where(record.member)), fx.broken, "truncated")
    else:
      readers.check_image(data)


# ---------------------------------------------------------------- CUB-200-2011

@pytest.mark.parametrize("layout,point_at", [("folder", "parent"), ("folder", "folder"), ("tgz", "parent"),
                                             ("tgz", "archive")])
def test_cub_records(tmp_path, layout, point_at):
  fx = fixtures.write_cub(tmp_path, classes=3, per_class=3, layout=layout)
  data_dir = {"parent": tmp_path, "folder": tmp_path / "CUB_200_2011", "archive": tmp_path / "CUB_200_2011.tgz"}
  recs = readers.read_cub(data_dir[point_at])
  check_records(recs, fx)
  assert recs.class_names[0] == "001.Bird_1" and recs.records[0].member.startswith("images/001.Bird_1/")
  assert recs.layout == ("archive" if layout == "tgz" else "folder")
  assert readers.fingerprint("cub", data_dir[point_at]) == recs.fingerprint
  assert len(recs.subset("train")) == 6 and len(recs.subset("test")) == 3
  np.testing.assert_array_equal(recs.labels, [0, 0, 0, 1, 1, 1, 2, 2, 2])


def test_cub_without_train_test_split_has_no_subsets(tmp_path):
  fx = fixtures.write_cub(tmp_path, train_test_split=False, classes=2, per_class=2, size=(8, 8))
  check_records(readers.read_cub(tmp_path), fx)


CUB_EXPECT = {
    "missing_annotation": ["is missing", "'<image id> <x> <y> <width> <height>'"],
    "missing_image": ["2 of the 9", "listed in images.txt"],
    "malformed_line": ["expected '<image id> <relative path>'", "got 'two "],
    "inconsistent_ids": ["no line for 1 of the 9 image ids", "images.txt", "first 9"],
    "bad_class": ["expected a class id listed in classes.txt (1..3)"],
    "bad_bbox": ["width, height > 0"],
    "truncated_archive": ["truncated or corrupt"],
    "unsafe_member": ["unsafe entry"],
}


@pytest.mark.parametrize("defect", sorted(CUB_EXPECT))
def test_cub_bad_input(tmp_path, defect):
  layout = "tgz" if defect in ("truncated_archive", "unsafe_member") else "folder"
  fx = fixtures.write_cub(tmp_path, layout=layout, defect=defect)
  one_line_error(lambda: readers.read_cub(tmp_path), fx.broken, *CUB_EXPECT[defect])


@pytest.mark.parametrize("layout", ["folder", "tgz"])
def test_cub_corrupt_image_is_found_by_check_image(tmp_path, layout):
  fx = fixtures.write_cub(tmp_path, layout=layout, defect="corrupt_image", size=(40, 40))
  _check_corrupt_image(readers.read_cub(tmp_path), fx)


def test_cub_errors_before_reading(tmp_path):
  one_line_error(lambda: readers.read_cub(None), "--data_dir")
  one_line_error(lambda: readers.read_cub(tmp_path / "nope"), "does not exist")
  one_line_error(lambda: readers.read_cub(tmp_path), "Found no CUB-200-2011", "CUB_200_2011.tgz")
  (tmp_path / "CUB_200_2011").mkdir()
  one_line_error(lambda: readers.read_cub(tmp_path), "images.txt", "is missing", "CUB_200_2011")
  (tmp_path / "notes.txt").write_text("hi")
  one_line_error(lambda: readers.read_cub(tmp_path / "notes.txt"), "not an archive")
  fixtures.write_tree(tmp_path / "other", {"x/y.txt": b"1"}, "CUB_200_2011.tgz")
  one_line_error(lambda: readers.read_cub(tmp_path / "other"), "images.txt", "missing from archive")


# ---------------------------------------------------------------- mini-ImageNet

def test_mini_imagenet_csv_and_pickle_layouts_agree(tmp_path):
  by_layout = {}
  for layout in ("csv", "csv_zip", "pickle"):
    fx = fixtures.write_mini_imagenet(tmp_path / layout, layout=layout, classes=(3, 2, 2), per_class=3)
    recs = readers.read_mini_imagenet(tmp_path / layout)
    check_records(recs, fx)
    assert recs.layout == ("pickle" if layout == "pickle" else "csv")
    assert readers.fingerprint("mini_imagenet", tmp_path / layout) == recs.fingerprint
    by_layout[layout] = recs
  names = by_layout["csv"].class_names
  assert names == by_layout["pickle"].class_names == tuple(fixtures.wnid(i) for i in range(7))
  assert [len(by_layout["csv"].subset(s)) for s in ("train", "val", "test")] == [9, 6, 6]
  pk = by_layout["pickle"]
  assert not by_layout["csv"].pixels and set(pk.pixels) == {f"mini-imagenet-cache-{s}.pkl" for s in ("train", "val", "test")}
  assert pk.image(pk.records[0]).shape == (12, 12, 3)


@pytest.mark.parametrize("protocol", [2, 3, 5])
def test_mini_imagenet_pickle_protocols(tmp_path, protocol):
  fx = fixtures.write_mini_imagenet(tmp_path, layout="pickle", protocol=protocol, classes=(2, 1, 1), per_class=2,
                                    size=(4, 4))
  check_records(readers.read_mini_imagenet(tmp_path), fx)


def test_mini_imagenet_pickle_with_numpy_rows(tmp_path):
  """class_dict rows as numpy arrays or numpy integers need numpy's scalar and array globals, nothing more."""
  fx = fixtures.write_mini_imagenet(tmp_path, layout="pickle", classes=(2, 1, 1), per_class=2, size=(4, 4))
  path = tmp_path / "mini-imagenet-cache-train.pkl"
  obj = pickle.loads(path.read_bytes())
  obj["class_dict"] = {w: (np.array(r) if i else [np.int64(x) for x in r])
                       for i, (w, r) in enumerate(obj["class_dict"].items())}
  path.write_bytes(pickle.dumps(obj, protocol=2))
  check_records(readers.read_mini_imagenet(tmp_path), fx)


MINI_EXPECT = {
    "missing_annotation": ["is missing"],
    "missing_image": ["2 of the 21", "split csv files"],
    "malformed_line": ["expected '<image file name>,<wnid like n01532829>'", ",cat'"],
    "bad_header": ["expected the header 'filename,label'", "got 'file,class'"],
    "shared_class": ["class n01530000 is also in train.csv", "disjoint"],
    "forbidden_global": ["refers to os.system", "only numpy arrays"],
    "truncated_pickle": ["truncated or corrupt"],
    "bad_class_dict": ["'class_dict'['n01530000'] rows in 0..8", "got 0..9"],
    "wrong_dtype": ["'image_data' to be a uint8 [N, H, W, 3] array", "float32"],
}


@pytest.mark.parametrize("defect", sorted(MINI_EXPECT))
def test_mini_imagenet_bad_input(tmp_path, defect, monkeypatch):
  calls = []
  monkeypatch.setattr(os, "system", lambda *a: calls.append(a))
  pickle_only = ("forbidden_global", "truncated_pickle", "bad_class_dict", "wrong_dtype")
  layout = "pickle" if defect in pickle_only else "csv"
  fx = fixtures.write_mini_imagenet(tmp_path, layout=layout, defect=defect)
  one_line_error(lambda: readers.read_mini_imagenet(tmp_path), fx.broken, *MINI_EXPECT[defect])
  assert not calls


def test_mini_imagenet_pickle_refuses_any_other_global(tmp_path):
  fixtures.write_mini_imagenet(tmp_path, layout="pickle", classes=(1, 1, 1), per_class=2, size=(4, 4))
  good = pickle.loads((tmp_path / "mini-imagenet-cache-test.pkl").read_bytes())
  for module, name in [("builtins", "eval"), ("numpy", "load"), ("numpy.core.multiarray", "fromfile")]:
    (tmp_path / "mini-imagenet-cache-test.pkl").write_bytes(fixtures.forbidden_pickle(good, module, name))
    one_line_error(lambda: readers.read_mini_imagenet(tmp_path), "mini-imagenet-cache-test.pkl", f"{module}.{name}")
  (tmp_path / "mini-imagenet-cache-test.pkl").write_bytes(pickle.dumps([1, 2, 3]))
  one_line_error(lambda: readers.read_mini_imagenet(tmp_path), "expected a dict with keys 'image_data'", "list")


def test_mini_imagenet_corrupt_image_and_locating(tmp_path):
  fx = fixtures.write_mini_imagenet(tmp_path / "a", defect="corrupt_image", size=(40, 40))
  _check_corrupt_image(readers.read_mini_imagenet(tmp_path / "a"), fx)
  one_line_error(lambda: readers.read_mini_imagenet(tmp_path), "Found no mini-ImageNet", "train.csv", ".pkl")
  (tmp_path / "b").mkdir()
  (tmp_path / "b" / "train.csv").write_text("filename,label\n")
  one_line_error(lambda: readers.read_mini_imagenet(tmp_path / "b"), "images/", "is missing")
  # csv files without images beside complete pickles: the pickles are read
  fx = fixtures.write_mini_imagenet(tmp_path / "b", layout="pickle", classes=(1, 1, 1), per_class=2, size=(4, 4))
  check_records(readers.read_mini_imagenet(tmp_path / "b"), fx)


# ---------------------------------------------------------------- Cars196

@pytest.mark.parametrize("layout", ["devkit", "devkit_tgz", "cars_annos", "cars_annos_tgz"])
def test_cars196_records(tmp_path, layout):
  fx = fixtures.write_cars196(tmp_path, layout=layout, classes=4, per_class=3)
  recs = readers.read_cars196(tmp_path)
  check_records(recs, fx)
  assert recs.layout == layout.removesuffix("_tgz")
  assert readers.fingerprint("cars196", tmp_path) == recs.fingerprint
  assert recs.class_names[0] == "Make1 Model 1 2010"
  # 1-based inclusive MATLAB corners (1, 2)..(16, 12) become a 0-based 16 x 11 box
  assert recs.records[0].bbox == (0.0, 1.0, 16.0, 11.0)
  assert {r.subset for r in recs.records} == {"train", "test"} and len(recs.subset("test")) == 4


def test_cars196_test_labels_inside_devkit(tmp_path):
  fx = fixtures.write_cars196(tmp_path, labels_in_devkit=True)
  check_records(readers.read_cars196(tmp_path), fx)


CARS_EXPECT = {
    "missing_annotation": ["has no labels", "put it in data_dir"],
    "missing_image": ["2 of the 12", "cars_train_annos.mat"],
    "bad_class": ["annotation 2 of 8", "expected class to be a class id in 1..4", "got 5"],
    "missing_field": ["bbox_x2 is missing"],
    "bad_bbox": ["annotation 1 of 8", "bbox_x1 <= bbox_x2"],
    "corrupt_mat": ["not a readable MATLAB file"],
    "truncated_archive": ["truncated or corrupt"],
    "unsafe_member": ["car_devkit.tgz", "unsafe entry"],
}


@pytest.mark.parametrize("defect", sorted(CARS_EXPECT))
def test_cars196_bad_input(tmp_path, defect):
  layout = "devkit_tgz" if defect in ("truncated_archive", "unsafe_member") else "devkit"
  fx = fixtures.write_cars196(tmp_path, layout=layout, defect=defect)
  one_line_error(lambda: readers.read_cars196(tmp_path), fx.broken, *CARS_EXPECT[defect])


@pytest.mark.parametrize("defect", ["bad_class", "missing_field", "corrupt_mat", "missing_image", "truncated_archive"])
def test_cars196_annos_bad_input(tmp_path, defect):
  layout = "cars_annos_tgz" if defect == "truncated_archive" else "cars_annos"
  fx = fixtures.write_cars196(tmp_path, layout=layout, defect=defect)
  one_line_error(lambda: readers.read_cars196(tmp_path), fx.broken)


def test_cars196_corrupt_image_and_locating(tmp_path):
  fx = fixtures.write_cars196(tmp_path / "a", layout="devkit_tgz", defect="corrupt_image", size=(40, 40))
  _check_corrupt_image(readers.read_cars196(tmp_path / "a"), fx)
  one_line_error(lambda: readers.read_cars196(tmp_path), "Found no Cars196", "cars_annos.mat")
  fixtures.write_cars196(tmp_path / "b", layout="devkit_tgz")
  (tmp_path / "b" / "cars_test.tgz").unlink()
  one_line_error(lambda: readers.read_cars196(tmp_path / "b"), "cars_test/ (or cars_test.tgz) is missing")
  (tmp_path / "c").mkdir()
  (tmp_path / "c" / "cars_annos.mat").write_bytes(b"")
  one_line_error(lambda: readers.read_cars196(tmp_path / "c"), "car_ims/", "missing")


# ---------------------------------------------------------------- Stanford Online Products

@pytest.mark.parametrize("layout,point_at", [("folder", "parent"), ("folder", "folder"), ("zip", "parent"),
                                             ("zip", "archive")])
def test_sop_records(tmp_path, layout, point_at):
  fx = fixtures.write_sop(tmp_path, layout=layout, classes=(3, 2), per_class=3)
  data_dir = {"parent": tmp_path, "folder": tmp_path / "Stanford_Online_Products",
              "archive": tmp_path / "Stanford_Online_Products.zip"}[point_at]
  recs = readers.read_sop(data_dir)
  check_records(recs, fx)
  assert recs.class_names == ("bicycle/1", "chair/2", "kettle/3", "lamp/4", "bicycle/5")
  assert readers.fingerprint("sop", data_dir) == recs.fingerprint
  assert {r.label for r in recs.subset("train")} == {0, 1, 2} and {r.label for r in recs.subset("test")} == {3, 4}


SOP_EXPECT = {
    "missing_annotation": ["is missing", "'image_id class_id super_class_id path'"],
    "missing_image": ["2 of the 15", "Ebay_train.txt and Ebay_test.txt"],
    "malformed_line": ["expected '<image_id> <class_id> <super_class_id> <path>'", "got '3 1 1'"],
    "bad_header": ["expected the header 'image_id class_id super_class_id path'"],
    "shared_class": ["class_id 1 is also in Ebay_train.txt", "disjoint"],
    "class_gap": ["must run 1..5 without gaps", "5 is missing"],
    "truncated_archive": ["truncated or corrupt"],
    "unsafe_member": ["unsafe entry"],
}


@pytest.mark.parametrize("defect", sorted(SOP_EXPECT))
def test_sop_bad_input(tmp_path, defect):
  layout = "zip" if defect in ("truncated_archive", "unsafe_member") else "folder"
  fx = fixtures.write_sop(tmp_path, layout=layout, defect=defect)
  one_line_error(lambda: readers.read_sop(tmp_path), fx.broken, *SOP_EXPECT[defect])


def test_sop_corrupt_image_and_more_consistency(tmp_path):
  fx = fixtures.write_sop(tmp_path / "a", layout="zip", defect="corrupt_image", size=(40, 40))
  _check_corrupt_image(readers.read_sop(tmp_path / "a"), fx)
  fixtures.write_sop(tmp_path / "b")
  train = tmp_path / "b" / "Stanford_Online_Products" / "Ebay_train.txt"
  lines = train.read_text().splitlines()
  path = lines[1].split()[3].replace("_0.JPG", "_7.JPG")
  train.write_text("\n".join(lines + [f"10 1 2 {path}"]) + "\n")
  one_line_error(lambda: readers.read_sop(tmp_path / "b"), "Ebay_train.txt line 11", "super_class_id 2")
  train.write_text("\n".join(lines + [lines[2]]) + "\n")
  one_line_error(lambda: readers.read_sop(tmp_path / "b"), "Ebay_train.txt line 11", "image_id 2 repeats line 3")


def test_read_dispatch():
  """Each image dataset's row names its reader: ``locate`` and ``read_<name>``."""
  assert tuple(catalog.IMAGE_DATASETS) == ("cub", "mini_imagenet", "cifar_fs", "fc100", "cars196", "sop")
  for name in catalog.IMAGE_DATASETS:
    module = readers.module(name)
    assert callable(module.locate) and getattr(module, f"read_{name}") is getattr(readers, f"read_{name}")
  one_line_error(lambda: readers.read("imagenet", "/tmp"), "Unknown dataset 'imagenet'", "cub")
