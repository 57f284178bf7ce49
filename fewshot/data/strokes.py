"""``strokes``: the embedded, offline, procedurally drawn character dataset.

A class is a random glyph of 1-4 cubic Bezier strokes; each of its images is
the glyph as drawn by another "drawer": jittered control points, a small random
affine map and a random pen width. It plays the role omniglot plays in the
literature (many classes, few drawings each, ink 255 on background 0) but needs
no download, so the package always has real-shaped data to learn from.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow_datasets as tfds

from fewshot.data import catalog, tfds_io
from fewshot.errors import DataError

NUM_CLASSES = 1200
PER_CLASS = 20
SEED = 20240607
# Fractions of the classes in train / val / test (1200 -> 800 / 200 / 200).
SPLIT_FRACTIONS = (4, 1, 1)

_MAX_STROKES = 4
_POINTS_PER_STROKE = 64
_BATCH = 2000
# Drawer variation, in units of the glyph box. Tuned so that the task is about
# as hard as omniglot: pixel-space 1-NN gets ~57% on 5-way 1-shot test episodes
# (omniglot ~45%), and a 3-layer ProtoNet after 600 episodes ~94% 5-way /
# ~83% 20-way 1-shot, the same as on omniglot.
_JITTER = 0.08
_STROKE_SHIFT = 0.04  # whole strokes misplaced relative to each other
_ROTATE_DEG = 15.0
_SCALE = (0.85, 1.1)
_SHEAR = 0.2
_SHIFT = 0.1
_PEN_SIGMA = (0.45, 0.7)  # pixels; strokes ~1.3-2 px wide, like omniglot at 28x28


def _bernstein(n: int) -> np.ndarray:
  t = np.linspace(0.0, 1.0, n)[:, None]
  return np.concatenate([(1 - t) ** 3, 3 * t * (1 - t) ** 2, 3 * t**2 * (1 - t), t**3], axis=1)


def _class_glyphs(rng: np.random.Generator, num_classes: int):
  """Control points [C, S, 4, 2] in the unit square and a stroke mask [C, S]."""
  ctrl = rng.uniform(0.0, 1.0, size=(num_classes, _MAX_STROKES, 4, 2))
  # Pen lifts are rarer than continuing from where the last stroke ended, which
  # gives glyphs loops and corners rather than disconnected scribbles.
  connect = rng.random((num_classes, _MAX_STROKES)) < 0.5
  for s in range(1, _MAX_STROKES):
    ctrl[connect[:, s], s, 0] = ctrl[connect[:, s], s - 1, 3]
  num_strokes = rng.integers(1, _MAX_STROKES + 1, size=num_classes)
  mask = np.arange(_MAX_STROKES)[None, :] < num_strokes[:, None]
  # Scale each glyph to fill the unit square (like a written character fills
  # its box) rather than leaving short strokes as specks in the middle.
  pts = np.einsum("pk,cskd->cspd", _bernstein(_POINTS_PER_STROKE), ctrl)
  pts = np.where(mask[:, :, None, None], pts, np.nan)
  lo, hi = np.nanmin(pts, axis=(1, 2)), np.nanmax(pts, axis=(1, 2))  # [C, 2]
  extent = np.maximum(hi - lo, 1e-3).max(axis=1)[:, None]
  ctrl = (ctrl - ((lo + hi) / 2)[:, None, None, :]) / extent[:, :, None, None] + 0.5
  return ctrl, mask, connect


def _drawer_affines(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
  """Random 2x2 maps (rotation +-15 deg, scale, shear) and translations, [n,2,2], [n,2]."""
  angle = np.deg2rad(rng.uniform(-_ROTATE_DEG, _ROTATE_DEG, n))
  scale = rng.uniform(*_SCALE, (n, 2))
  shear = rng.uniform(-_SHEAR, _SHEAR, n)
  cos, sin = np.cos(angle), np.sin(angle)
  rot = np.stack([np.stack([cos, -sin], -1), np.stack([sin, cos], -1)], -2)
  shear_m = np.zeros((n, 2, 2))
  shear_m[:, 0, 0] = shear_m[:, 1, 1] = 1.0
  shear_m[:, 0, 1] = shear
  mat = rot @ shear_m * scale[:, None, :]
  return mat, rng.uniform(-_SHIFT, _SHIFT, (n, 2))


def _render_batch(points: np.ndarray, weights: np.ndarray, sigma: np.ndarray, size: int) -> np.ndarray:
  """Anti-aliased ink of polylines, exactly, as a batched matmul.

  Every sampled point contributes an isotropic Gaussian weighted by the arc
  length it stands for, so the sum approximates the line integral of the
  Gaussian along the curve: even ink whatever the Bezier parametrisation.
  Gaussians are separable, so the sum over points is gy^T @ (w * gx).
  """
  grid = np.arange(size, dtype=np.float32) + 0.5
  inv = (1.0 / (2.0 * sigma**2)).astype(np.float32)[:, None, None]
  gx = np.exp(-((points[..., 0:1] - grid) ** 2) * inv)
  gy = np.exp(-((points[..., 1:2] - grid) ** 2) * inv)
  # Normalised so that the centre of a long straight stroke has intensity 1.
  w = (weights / (np.sqrt(2 * np.pi) * sigma[:, None])).astype(np.float32)[..., None]
  ink = np.matmul(np.swapaxes(gy, 1, 2), w * gx)
  return np.clip(np.rint(np.clip(1.6 * ink, 0.0, 1.0) * 255.0), 0, 255).astype(np.uint8)


def render_glyphs(num_classes: int, per_class: int, seed: int = SEED, size: int = 28) -> tuple[np.ndarray, np.ndarray]:
  """Draws ``per_class`` images of each of ``num_classes`` random stroke glyphs.

  Pure numpy and deterministic in ``seed``: the PCG64 draws are platform
  independent; float32 rendering could differ across CPUs/BLAS by one grey
  level on rare pixels, never in glyph shape.

  Returns:
    images: uint8 [num_classes * per_class, size, size, 1], ink 255 on 0.
    labels: int32 [num_classes * per_class], class-major (0,0,...,1,1,...).
  """
  rng = np.random.default_rng(seed)
  ctrl, mask, connect = _class_glyphs(rng, num_classes)
  n = num_classes * per_class
  labels = np.repeat(np.arange(num_classes, dtype=np.int32), per_class)
  # All per-drawer randomness is drawn up front, so the batch size used for
  # rendering cannot change the images.
  jitter = rng.normal(0.0, _JITTER, size=(n, _MAX_STROKES, 4, 2))
  jitter += rng.normal(0.0, _STROKE_SHIFT, size=(n, _MAX_STROKES, 1, 2))
  for s in range(1, _MAX_STROKES):  # keep connected strokes joined
    joined = connect[labels, s]
    jitter[joined, s, 0] = jitter[joined, s - 1, 3]
  mat, shift = _drawer_affines(rng, n)
  sigma = rng.uniform(*_PEN_SIGMA, n)

  basis = _bernstein(_POINTS_PER_STROKE)
  images = np.empty((n, size, size, 1), np.uint8)
  margin = 0.12 * size
  for lo in range(0, n, _BATCH):
    sl = slice(lo, min(n, lo + _BATCH))
    c = ctrl[labels[sl]] + jitter[sl]
    c = np.einsum("nij,nskj->nski", mat[sl], c - 0.5) + 0.5 + shift[sl, None, None, :]
    pts = np.einsum("pk,nskd->nspd", basis, c)  # [b, S, P, 2] in the unit square
    pts = margin + pts * (size - 2 * margin)
    seg = np.linalg.norm(np.diff(pts, axis=2), axis=-1)
    ds = np.zeros(pts.shape[:3])
    ds[..., 1:] += seg / 2
    ds[..., :-1] += seg / 2
    ds *= mask[labels[sl]][..., None]
    b = pts.shape[0]
    images[sl, :, :, 0] = _render_batch(
        pts.reshape(b, -1, 2).astype(np.float32), ds.reshape(b, -1), sigma[sl], size)
  return images, labels


def class_split(num_classes: int, seed: int = SEED) -> dict[str, np.ndarray]:
  """Disjoint sorted class ids of train / val / test, fixed by ``seed``."""
  perm = np.random.default_rng([seed, 1]).permutation(num_classes)
  total = sum(SPLIT_FRACTIONS)
  n_train = num_classes * SPLIT_FRACTIONS[0] // total
  n_val = num_classes * SPLIT_FRACTIONS[1] // total
  parts = np.split(perm, [n_train, n_train + n_val])
  return {name: np.sort(p) for name, p in zip(catalog.SPLITS, parts)}


def class_name(i: int) -> str:
  return f"stroke_{i:04d}"


@dataclasses.dataclass
class StrokesConfig(tfds.core.BuilderConfig):
  num_classes: int = NUM_CLASSES
  per_class: int = PER_CLASS
  seed: int = SEED


class Strokes(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """tfds builder of ``strokes``; the default config has 1,200 classes x 20 images."""

  name = "fewshot_strokes"
  # Bump whenever render_glyphs changes, or stale prepared data is reused.
  VERSION = tfds.core.Version("1.0.0")
  BUILDER_CONFIGS = [StrokesConfig(name="default")]

  def _info(self) -> tfds.core.DatasetInfo:
    names = [class_name(i) for i in range(self.builder_config.num_classes)]
    return tfds_io.dataset_info(self, names, "Procedurally drawn stroke characters (fewshot).")

  def _split_generators(self, dl_manager):
    del dl_manager
    cfg = self.builder_config
    images, labels = render_glyphs(cfg.num_classes, cfg.per_class, cfg.seed)
    return {split: self._generate_examples(images, labels, classes)
            for split, classes in class_split(cfg.num_classes, cfg.seed).items()}

  def _generate_examples(self, images, labels, classes):
    for i in np.flatnonzero(np.isin(labels, classes)):
      yield int(i), {"image": images[i], "label": int(labels[i])}


def config(num_classes: int = NUM_CLASSES, per_class: int = PER_CLASS, seed: int = SEED) -> StrokesConfig:
  """The builder config for a given size; the default one is named 'default'."""
  if (num_classes, per_class, seed) == (NUM_CLASSES, PER_CLASS, SEED):
    return Strokes.BUILDER_CONFIGS[0]
  if num_classes < 6 or per_class < 1:
    raise DataError(f"strokes needs num_classes >= 6 and per_class >= 1, got {num_classes}, {per_class}; pass larger values.")
  return StrokesConfig(name=f"c{num_classes}_p{per_class}_s{seed}", num_classes=num_classes, per_class=per_class, seed=seed)


def builder(data_dir: str | None, tfds_dir: str, size: int = catalog.SMALL_IMAGE_SIZE) -> Strokes:
  """The prepared strokes builder, as ``catalog.DatasetSpec.reader`` asks of a small dataset's reader; strokes is
  drawn by the package at 28 px, so it reads no ``data_dir`` and takes no other ``size``.
  """
  del data_dir, size  # catalog.resolve refuses any size but 28
  b = Strokes(config=config(), data_dir=tfds_dir)
  tfds_io.prepare(b)
  return b
