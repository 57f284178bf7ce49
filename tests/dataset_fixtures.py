"""Tiny copies of CUB-200-2011, mini-ImageNet, Cars196 and Stanford Online Products in their real on-disk formats.

Each `write_<dataset>(root, ...)` writes real JPEG files (PIL), the real annotation
formats (text tables, csv, MATLAB structs via scipy.io.savemat laid out like the
devkit's, pickles of numpy arrays) and, for archive layouts, real .tgz/.zip files,
then returns a `Fixture` describing what a correct reader must report. Sizes are
parameters (classes, images per class, image size) so storage and training tests
can reuse them; the defaults take milliseconds.

`defect=` breaks the written data in one realistic way (see each writer's DEFECTS);
`Fixture.broken` names the file or member that the defect touched.
"""

from __future__ import annotations

import dataclasses
import io
import pathlib
import pickle
import tarfile
import zipfile

import numpy as np
import pytest
import scipy.io
from PIL import Image

from fewshot.errors import FewshotError

CUB_DEFECTS = ("missing_annotation", "missing_image", "malformed_line", "inconsistent_ids", "bad_class",
               "bad_bbox", "corrupt_image", "truncated_archive", "unsafe_member")
MINI_IMAGENET_DEFECTS = ("missing_annotation", "missing_image", "malformed_line", "bad_header", "shared_class",
                         "corrupt_image", "forbidden_global", "truncated_pickle", "bad_class_dict", "wrong_dtype")
CARS196_DEFECTS = ("missing_annotation", "missing_image", "bad_class", "missing_field", "bad_bbox", "corrupt_mat",
                   "corrupt_image", "truncated_archive", "unsafe_member")
SOP_DEFECTS = ("missing_annotation", "missing_image", "malformed_line", "bad_header", "shared_class", "class_gap",
               "corrupt_image", "truncated_archive", "unsafe_member")
SOP_SUPER_CLASSES = ("bicycle", "chair", "kettle", "lamp")


@dataclasses.dataclass
class Fixture:
  """What was written and what a correct reader reports for it.

  Attributes:
    data_dir: the folder to pass as data_dir (the parent of the dataset's folder or archive).
    class_names: in the dataset's default order; label i is class_names[i].
    records: (member, label, subset, bbox, index) per image, in the reader's order.
    files: member -> the exact bytes written, for every image file.
    pixels: mini-ImageNet pickle layout: pickle file name -> its uint8 image_data.
    broken: the file or member a defect touched, if any.
  """

  data_dir: pathlib.Path
  class_names: list[str]
  records: list[tuple]
  files: dict[str, bytes] = dataclasses.field(default_factory=dict)
  pixels: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
  broken: str | None = None


def image_bytes(rng: np.random.Generator, size: tuple[int, int], fmt: str = "JPEG") -> bytes:
  """A small random RGB image of `size` (height, width), encoded as `fmt`."""
  pixels = rng.integers(0, 256, (*size, 3), dtype=np.uint8)
  buf = io.BytesIO()
  Image.fromarray(pixels).save(buf, fmt, **({"quality": 90} if fmt == "JPEG" else {}))
  return buf.getvalue()


def truncated(data: bytes, fraction: float = 0.6) -> bytes:
  """The first `fraction` of `data`: a file cut short by an interrupted download."""
  return data[:max(1, int(len(data) * fraction))]


def _check_defect(defect, allowed, layout, archive_layouts=()):
  if defect is not None and defect not in allowed:
    raise ValueError(f"defect {defect!r} is not one of {allowed}")
  if defect in ("truncated_archive", "unsafe_member") and layout not in archive_layouts:
    raise ValueError(f'defect {defect!r} needs an archive layout ({", ".join(archive_layouts)}), not {layout!r}')


def write_tree(root: pathlib.Path, files: dict[str, bytes], archive: str | None = None, *,
               unsafe: str | None = None, truncate: bool = False) -> pathlib.Path:
  """Writes `files` (relative '/' path -> bytes) under `root`, or into the archive `root/archive`.

  Args:
    archive: a .tgz / .tar.gz / .tar / .zip name; directories get their own entries, as in real archives.
    unsafe: an extra entry name (like '../evil.txt') added to the archive.
    truncate: cut the finished archive to half its size.
  Returns the folder or archive written.
  """
  root.mkdir(parents=True, exist_ok=True)
  if archive is None:
    for rel, data in files.items():
      p = root / rel
      p.parent.mkdir(parents=True, exist_ok=True)
      p.write_bytes(data)
    return root
  path = root / archive
  dirs = sorted({"/".join(rel.split("/")[:i]) for rel in files for i in range(1, rel.count("/") + 1)})
  entries = list(files.items()) + ([(unsafe, b"escaped the tree\n")] if unsafe else [])
  if archive.endswith(".zip"):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
      for d in dirs:
        zf.writestr(d + "/", b"")
      for name, data in entries:
        zf.writestr(zipfile.ZipInfo(name, (2011, 1, 1, 0, 0, 0)), data)
  else:
    mode = "w" if archive.endswith(".tar") else "w:gz"
    with tarfile.open(path, mode) as tf:
      for d in dirs:
        info = tarfile.TarInfo(d)
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tf.addfile(info)
      for name, data in entries:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), 0o644
        tf.addfile(info, io.BytesIO(data))
  if truncate:
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
  return path


# ---------------------------------------------------------------- CUB-200-2011

def write_cub(root, *, classes: int = 3, per_class: int = 3, size: tuple[int, int] = (12, 16),
              layout: str = "folder", defect: str | None = None, train_test_split: bool = True,
              seed: int = 0) -> Fixture:
  """CUB_200_2011/ (layout 'folder') or CUB_200_2011.tgz (layout 'tgz') under `root`.

  Class folders are '001.Bird_1', ...; image ids run in class order as in the real
  images.txt; boxes are (x, y, w, h) floats; every second image is a training image.
  """
  _check_defect(defect, CUB_DEFECTS, layout, ("tgz",))
  root = pathlib.Path(root)
  rng = np.random.default_rng(seed)
  names = [f"{c + 1:03d}.Bird_{c + 1}" for c in range(classes)]
  top = "CUB_200_2011/"
  images, labels, boxes, split, files, records = [], [], [], [], {}, []
  for c, name in enumerate(names):
    for j in range(per_class):
      image_id = len(images) + 1
      rel = f'{name}/{name.split(".")[1]}_{image_id:04d}_{j}.jpg'
      data = image_bytes(rng, size)
      box = (float(j), float(c) + 0.5, float(size[1] - j), float(size[0] - 1))
      subset = "train" if j % 2 == 0 else "test"
      images.append(f"{image_id} {rel}")
      labels.append(f"{image_id} {c + 1}")
      boxes.append(f"{image_id} {box[0]} {box[1]} {box[2]} {box[3]}")
      split.append(f'{image_id} {int(subset == "train")}')
      files[f"images/{rel}"] = data
      records.append((f"images/{rel}", c, subset if train_test_split else None, box, None))
  texts = {
      "images.txt": images,
      "image_class_labels.txt": labels,
      "classes.txt": [f"{c + 1} {n}" for c, n in enumerate(names)],
      "bounding_boxes.txt": boxes,
  }
  if train_test_split:
    texts["train_test_split.txt"] = split
  fx = Fixture(root, names, records, dict(files))
  if defect == "missing_annotation":
    del texts["bounding_boxes.txt"]
    fx.broken = "bounding_boxes.txt"
  elif defect == "malformed_line":
    texts["images.txt"][1] = "two " + images[1].split(" ", 1)[1]
    fx.broken = "images.txt line 2"
  elif defect == "inconsistent_ids":
    texts["image_class_labels.txt"] = labels[:-1]
    fx.broken = "image_class_labels.txt"
  elif defect == "bad_class":
    texts["image_class_labels.txt"][0] = f"1 {classes + 1}"
    fx.broken = "image_class_labels.txt line 1"
  elif defect == "bad_bbox":
    texts["bounding_boxes.txt"][2] = "3 1.0 2.0 0.0 5.0"
    fx.broken = "bounding_boxes.txt line 3"
  elif defect == "missing_image":
    for rel in list(files)[1:3]:
      del files[rel]
    fx.broken = list(fx.files)[1]
  elif defect == "corrupt_image":
    first = next(iter(files))
    files[first] = fx.files[first] = truncated(files[first])
    fx.broken = first
  tree = {top + k: ("\n".join(v) + "\n").encode() for k, v in texts.items()}
  tree.update({top + k: v for k, v in files.items()})
  tree["attributes.txt"] = b"1 has_bill_shape::curved_(up_or_down)\n"  # beside the folder, as in the real .tgz
  if layout == "folder":
    write_tree(root, tree)
  elif layout == "tgz":
    path = write_tree(root, tree, "CUB_200_2011.tgz", unsafe="../escape.txt" if defect == "unsafe_member" else None,
                      truncate=defect == "truncated_archive")
    if defect in ("truncated_archive", "unsafe_member"):
      fx.broken = "../escape.txt" if defect == "unsafe_member" else str(path)
  else:
    raise ValueError(f"layout {layout!r} is not folder or tgz")
  return fx


# ---------------------------------------------------------------- mini-ImageNet

def wnid(i: int) -> str:
  return f"n{1530000 + 1019 * i:08d}"


class _PickledCall:
  """Pickles as a call of itself; its global's name is then swapped for a forbidden one."""

  def __init__(self, arg):
    self.arg = arg

  def __reduce__(self):
    return (_PickledCall, (self.arg,))


def forbidden_pickle(obj: dict, module: str = "os", name: str = "system") -> bytes:
  """`obj` pickled (protocol 2) with one value that unpickles as `module.name('echo ...')`.

  Never load the result with a plain unpickler: it runs a shell command (a harmless echo).
  """
  obj = dict(obj, extra=_PickledCall("echo fewshot-fixture-pickle-was-executed"))
  data = pickle.dumps(obj, protocol=2)
  ours = f"c{_PickledCall.__module__}\n{_PickledCall.__qualname__}\n".encode()
  assert data.count(ours) == 1
  return data.replace(ours, f"c{module}\n{name}\n".encode())


def write_mini_imagenet(root, *, classes: tuple[int, int, int] = (3, 2, 2), per_class: int = 3,
                        size: tuple[int, int] = (12, 12), layout: str = "csv", protocol: int = 4,
                        defect: str | None = None, seed: int = 0) -> Fixture:
  """mini-ImageNet under `root`: layout 'csv' (train/val/test.csv + images/), 'csv_zip'
  (the images as images.zip) or 'pickle' (mini-imagenet-cache-*.pkl at pickle `protocol`).

  Classes are written in reverse wnid order so the readers' sorting shows; in the
  pickles each class's rows are scattered over the array, as a reader must not assume
  contiguous classes.
  """
  _check_defect(defect, MINI_IMAGENET_DEFECTS, layout)
  root = pathlib.Path(root)
  root.mkdir(parents=True, exist_ok=True)
  rng = np.random.default_rng(seed)
  subsets = ("train", "val", "test")
  wnids, start = {}, 0
  for s, n in zip(subsets, classes):
    wnids[s] = [wnid(start + i) for i in range(n)]
    start += n
  class_names = [w for s in subsets for w in wnids[s]]
  fx = Fixture(root, class_names, [])
  if layout == "pickle":
    pickles = {}
    for s in subsets:
      n = len(wnids[s]) * per_class
      data = rng.integers(0, 256, (n, *size, 3), dtype=np.uint8)
      rows = rng.permutation(n).reshape(len(wnids[s]), per_class)
      class_dict = {w: rows[i].tolist() for i, w in reversed(list(enumerate(wnids[s])))}
      name = f"mini-imagenet-cache-{s}.pkl"
      fx.pixels[name] = data
      fx.records += [(name, class_names.index(w), s, None, r) for w in wnids[s] for r in class_dict[w]]
      pickles[s] = {"image_data": data, "class_dict": class_dict}
    blobs = {s: pickle.dumps(p, protocol=protocol) for s, p in pickles.items()}
    if defect == "missing_annotation":
      del blobs["test"]
      fx.broken = "mini-imagenet-cache-test.pkl"
    elif defect == "forbidden_global":
      blobs["val"] = forbidden_pickle(pickles["val"])
      fx.broken = "mini-imagenet-cache-val.pkl"
    elif defect == "truncated_pickle":
      blobs["train"] = truncated(blobs["train"], 0.5)
      fx.broken = "mini-imagenet-cache-train.pkl"
    elif defect == "bad_class_dict":
      bad = dict(pickles["train"], class_dict=dict(pickles["train"]["class_dict"]))
      bad["class_dict"][wnids["train"][0]] = [0, len(pickles["train"]["image_data"])]
      blobs["train"] = pickle.dumps(bad, protocol=protocol)
      fx.broken = "mini-imagenet-cache-train.pkl"
    elif defect == "wrong_dtype":
      blobs["test"] = pickle.dumps(dict(pickles["test"], image_data=pickles["test"]["image_data"].astype(np.float32)),
                                   protocol=protocol)
      fx.broken = "mini-imagenet-cache-test.pkl"
    elif defect is not None:
      raise ValueError(f"defect {defect!r} applies to the csv layouts, not pickle")
    for s, blob in blobs.items():
      (root / f"mini-imagenet-cache-{s}.pkl").write_bytes(blob)
    return fx

  if layout not in ("csv", "csv_zip"):
    raise ValueError(f"layout {layout!r} is not csv, csv_zip or pickle")
  csvs, images = {}, {}
  for s in subsets:
    lines = ["filename,label"]
    for w in reversed(wnids[s]):
      for j in range(per_class):
        fname = f"{w}{j + 1:08d}.jpg"
        images[f"images/{fname}"] = image_bytes(rng, size)
        lines.append(f"{fname},{w}")
    csvs[s] = lines
  for s in subsets:  # csv line order; labels follow the sorted wnids
    fx.records += [(f'images/{line.split(",")[0]}', class_names.index(line.split(",")[1]), s, None, None)
                   for line in csvs[s][1:]]
  fx.files = dict(images)
  if defect in ("forbidden_global", "truncated_pickle", "bad_class_dict", "wrong_dtype"):
    raise ValueError(f"defect {defect!r} applies to the pickle layout, not {layout}")
  if defect == "missing_annotation":
    del csvs["val"]
    fx.broken = "val.csv"
  elif defect == "malformed_line":
    csvs["test"][3] = csvs["test"][3].split(",")[0] + ",cat"
    fx.broken = "test.csv line 4"
  elif defect == "bad_header":
    csvs["train"][0] = "file,class"
    fx.broken = "train.csv line 1"
  elif defect == "shared_class":
    csvs["val"].append(f'extra.jpg,{wnids["train"][0]}')
    images["images/extra.jpg"] = image_bytes(rng, size)
    fx.broken = "val.csv"
  elif defect == "missing_image":
    for m in list(images)[:2]:
      del images[m]
    fx.broken = next(m for m in (r[0] for r in fx.records) if m not in images)
  elif defect == "corrupt_image":
    first = fx.records[0][0]
    images[first] = fx.files[first] = truncated(images[first])
    fx.broken = first
  write_tree(root, {f"{s}.csv": ("\n".join(lines) + "\n").encode() for s, lines in csvs.items()})
  write_tree(root, images, "images.zip" if layout == "csv_zip" else None)
  return fx


# ---------------------------------------------------------------- Cars196

def _mat_struct(rows: list[dict], fields: tuple[str, ...]) -> np.ndarray:
  """A 1 x N MATLAB struct array as scipy.io.savemat writes it (each field a 1x1 matrix or a string)."""
  out = np.zeros((1, len(rows)), dtype=[(f, "O") for f in fields])
  for i, row in enumerate(rows):
    out[0, i] = tuple(np.array([row[f]]) if isinstance(row[f], str) else np.array([[row[f]]], _mat_dtype(f))
                      for f in fields)
  return out


def _mat_dtype(field: str):
  # the devkit stores small counts as uint8 and pixel coordinates as uint16 where they need it
  return np.uint8 if field in ("class", "test") else np.uint16


def _mat_cell(strings: list[str]) -> np.ndarray:
  out = np.empty((1, len(strings)), dtype=object)
  for i, s in enumerate(strings):
    out[0, i] = np.array([s])
  return out


def _savemat(obj: dict) -> bytes:
  buf = io.BytesIO()
  scipy.io.savemat(buf, obj)
  return buf.getvalue()


def write_cars196(root, *, classes: int = 4, per_class: int = 3, size: tuple[int, int] = (12, 16),
                  layout: str = "devkit", defect: str | None = None, labels_in_devkit: bool = False,
                  seed: int = 0) -> Fixture:
  """Cars196 under `root` in layout 'devkit' (cars_train/, cars_test/, devkit/ and
  cars_test_annos_withlabels.mat), 'devkit_tgz' (the same as cars_train.tgz, cars_test.tgz,
  car_devkit.tgz), 'cars_annos' (cars_annos.mat + car_ims/) or 'cars_annos_tgz' (car_ims.tgz).

  Image j of each class is a training image when j is even; images are numbered in
  interleaved class order, like the real ones.
  """
  _check_defect(defect, CARS196_DEFECTS, layout, ("devkit_tgz", "cars_annos_tgz"))
  root = pathlib.Path(root)
  rng = np.random.default_rng(seed)
  names = [f"Make{c + 1} Model {c + 1} 20{c + 10:02d}" for c in range(classes)]
  devkit = layout.startswith("devkit")
  rows = {"train": [], "test": []}
  files, fx = {}, Fixture(root, names, [])
  for j in range(per_class):
    for c in range(classes):
      subset = "train" if j % 2 == 0 else "test"
      n_all = sum(len(v) for v in rows.values()) + 1
      x1, y1 = 1 + c, 2 + j
      x2, y2 = size[1] - j, size[0] - c % 2
      row = {"bbox_x1": x1, "bbox_y1": y1, "bbox_x2": x2, "bbox_y2": y2, "class": c + 1}
      if devkit:
        row["fname"] = f"{len(rows[subset]) + 1:05d}.jpg"
        member = f'cars_{subset}/{row["fname"]}'
      else:
        row["relative_im_path"] = member = f"car_ims/{n_all:06d}.jpg"
        row["test"] = int(subset == "test")
      rows[subset].append(row)
      files[member] = image_bytes(rng, size)
      bbox = (float(x1 - 1), float(y1 - 1), float(x2 - x1 + 1), float(y2 - y1 + 1))
      fx.records.append((member, c, subset, bbox, None))
  if devkit:
    fx.records.sort(key=lambda r: r[2] == "test")  # the reader lists train's annotations, then test's
  else:
    fx.records.sort(key=lambda r: r[0])
  fx.files = dict(files)

  box = ("bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2")  # field order as in the real files
  fields = box + ("class", "fname") if devkit else ("relative_im_path",) + box + ("class", "test")
  first_ann = "train"
  if defect == "bad_class":
    rows[first_ann][1]["class"] = classes + 1
  elif defect == "bad_bbox":
    rows[first_ann][0]["bbox_x2"] = 0
  elif defect == "missing_image":
    for m in list(files)[1:3]:
      del files[m]
    fx.broken = next(r[0] for r in fx.records if r[0] not in files)
  elif defect == "corrupt_image":
    first = fx.records[0][0]
    files[first] = fx.files[first] = truncated(files[first])
    fx.broken = first
  train_fields = tuple(f for f in fields if not (defect == "missing_field" and f == "bbox_x2"))
  cell = _mat_cell(names)

  if not devkit:
    in_order = sorted(rows["train"] + rows["test"], key=lambda r: r["relative_im_path"])
    mats = {"cars_annos.mat": _savemat({"annotations": _mat_struct(in_order, train_fields), "class_names": cell})}
    if defect in ("bad_class", "bad_bbox", "missing_field"):
      fx.broken = "cars_annos.mat"
    elif defect == "missing_annotation":
      mats = {}
      fx.broken = "cars_annos.mat"
    elif defect == "corrupt_mat":
      mats["cars_annos.mat"] = b"MATLAB 5.0 MAT-file" + b"\x00" * 40
      fx.broken = "cars_annos.mat"
    ordered = dict(sorted(files.items()))
    write_tree(root, mats)
    if layout == "cars_annos":
      write_tree(root, ordered)
    else:
      path = write_tree(root, ordered, "car_ims.tgz", unsafe="/etc/escape.txt" if defect == "unsafe_member" else None,
                        truncate=defect == "truncated_archive")
      if defect == "truncated_archive":
        fx.broken = str(path)
      elif defect == "unsafe_member":
        fx.broken = "/etc/escape.txt"
    return fx

  test_labels = "cars_test_annos_withlabels.mat"
  dev = {
      "devkit/cars_meta.mat": _savemat({"class_names": cell}),
      "devkit/cars_train_annos.mat": _savemat({"annotations": _mat_struct(rows["train"], train_fields)}),
      # the unlabeled test annotations of the devkit: no class field
      "devkit/cars_test_annos.mat": _savemat({"annotations": _mat_struct(
          rows["test"], tuple(f for f in fields if f != "class"))}),
      "devkit/README.txt": b"Devkit for the Stanford Cars dataset (fixture).\n",
  }
  labels = {test_labels: _savemat({"annotations": _mat_struct(rows["test"], fields)})}
  if defect in ("bad_class", "bad_bbox", "missing_field"):
    fx.broken = "cars_train_annos.mat"
  elif defect == "missing_annotation":
    labels = {}
    fx.broken = test_labels
  elif defect == "corrupt_mat":
    dev["devkit/cars_meta.mat"] = truncated(dev["devkit/cars_meta.mat"], 0.3)
    fx.broken = "cars_meta.mat"
  if labels_in_devkit:
    dev.update({f"devkit/{k}": v for k, v in labels.items()})
    labels = {}
  write_tree(root, labels)
  parts = {"cars_train": {k: v for k, v in files.items() if k.startswith("cars_train/")},
           "cars_test": {k: v for k, v in files.items() if k.startswith("cars_test/")},
           "car_devkit": dev}
  for stem, tree in parts.items():
    if layout == "devkit":
      write_tree(root, tree)
    else:
      unsafe = "../../escape.txt" if defect == "unsafe_member" and stem == "car_devkit" else None
      path = write_tree(root, tree, f"{stem}.tgz", unsafe=unsafe,
                        truncate=defect == "truncated_archive" and stem == "cars_test")
      if unsafe:
        fx.broken = unsafe
      elif defect == "truncated_archive" and stem == "cars_test":
        fx.broken = str(path)
  return fx


# ---------------------------------------------------------------- Stanford Online Products

def write_sop(root, *, classes: tuple[int, int] = (3, 2), per_class: int = 3, size: tuple[int, int] = (12, 16),
              layout: str = "folder", defect: str | None = None, seed: int = 0) -> Fixture:
  """Stanford_Online_Products/ (layout 'folder') or Stanford_Online_Products.zip ('zip') under `root`.

  Train classes are 1..classes[0], test classes follow; class c's super class is
  SOP_SUPER_CLASSES[(c - 1) % 4] and its images '<super>_final/<product id>_<n>.JPG'.
  """
  _check_defect(defect, SOP_DEFECTS, layout, ("zip",))
  root = pathlib.Path(root)
  rng = np.random.default_rng(seed)
  header = "image_id class_id super_class_id path"
  lines = {"train": [header], "test": [header]}
  files, fx = {}, Fixture(root, [], [])
  for c in range(1, sum(classes) + 1):
    subset = "train" if c <= classes[0] else "test"
    s = (c - 1) % len(SOP_SUPER_CLASSES)
    product = 111085122800 + 7 * c
    fx.class_names.append(f"{SOP_SUPER_CLASSES[s]}/{c}")
    for j in range(per_class):
      path = f"{SOP_SUPER_CLASSES[s]}_final/{product}_{j}.JPG"
      lines[subset].append(f"{len(lines[subset])} {c} {s + 1} {path}")
      files[path] = image_bytes(rng, size)
      fx.records.append((path, c - 1, subset, None, None))
  fx.files = dict(files)
  if defect == "missing_annotation":
    del lines["test"]
    fx.broken = "Ebay_test.txt"
  elif defect == "malformed_line":
    lines["train"][3] = " ".join(lines["train"][3].split()[:3])
    fx.broken = "Ebay_train.txt line 4"
  elif defect == "bad_header":
    lines["test"][0] = "image_id class_id path"
    fx.broken = "Ebay_test.txt line 1"
  elif defect == "shared_class":
    f = lines["train"][1].split()
    lines["test"].append(f'{len(lines["test"])} {f[1]} {f[2]} {f[3].replace("_0.JPG", "_9.JPG")}')
    files[f[3].replace("_0.JPG", "_9.JPG")] = image_bytes(rng, size)
    fx.broken = f'Ebay_test.txt line {len(lines["test"])}'
  elif defect == "class_gap":
    last = sum(classes)
    lines["test"] = [ln if ln == header or ln.split()[1] != str(last) else
                     " ".join([ln.split()[0], str(last + 1)] + ln.split()[2:]) for ln in lines["test"]]
    fx.broken = "Ebay_train.txt and Ebay_test.txt"
  elif defect == "missing_image":
    for m in list(files)[2:4]:
      del files[m]
    fx.broken = list(fx.files)[2]
  elif defect == "corrupt_image":
    first = next(iter(files))
    files[first] = fx.files[first] = truncated(files[first])
    fx.broken = first
  top = "Stanford_Online_Products/"
  tree = {f"{top}Ebay_{s}.txt": ("\n".join(v) + "\n").encode() for s, v in lines.items()}
  tree.update({top + k: v for k, v in files.items()})
  if layout == "folder":
    write_tree(root, tree)
  elif layout == "zip":
    path = write_tree(root, tree, "Stanford_Online_Products.zip",
                      unsafe="../../escape.txt" if defect == "unsafe_member" else None,
                      truncate=defect == "truncated_archive")
    if defect == "truncated_archive":
      fx.broken = str(path)
    elif defect == "unsafe_member":
      fx.broken = "../../escape.txt"
  else:
    raise ValueError(f"layout {layout!r} is not folder or zip")
  return fx


def one_line_error(fn, *fragments) -> str:
  """Calls fn, expecting a one-line error (a bad option or bad data) containing every fragment."""
  with pytest.raises(FewshotError) as err:
    fn()
  msg = str(err.value)
  assert "\n" not in msg, msg
  for fragment in fragments:
    assert fragment in msg, f"{fragment!r} not in {msg!r}"
  return msg
