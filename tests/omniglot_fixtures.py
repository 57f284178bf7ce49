"""Small Omniglot stand-ins in the release's formats: 105x105 1-bit PNGs of random strokes, per alphabet."""

from __future__ import annotations

import io
import pathlib
import zipfile

import numpy as np
from PIL import Image, ImageDraw


def glyph_png(points, jitter: float, rng: np.random.Generator) -> bytes:
  """A 105x105 1-bit PNG as released: white background, the polyline ``points`` moved by ~``jitter`` px, black."""
  image = Image.new("1", (105, 105), 1)
  ImageDraw.Draw(image).line([tuple(p) for p in points + rng.normal(0, jitter, points.shape)], fill=0, width=6)
  buffer = io.BytesIO()
  image.save(buffer, format="PNG")
  return buffer.getvalue()


def characters(alphabets: dict[str, int], drawers: int = 3, seed: int = 0) -> dict[str, dict[str, list[bytes]]]:
  """{alphabet: {character: [PNG of each drawer]}}: ``alphabets[a]`` characters each, every drawer's a redrawing."""
  rng = np.random.default_rng(seed)
  out = {}
  for alphabet, count in alphabets.items():
    out[alphabet] = {}
    for c in range(count):
      glyph = rng.uniform(15, 90, size=(4, 2))
      out[alphabet][f"character{c + 1:02d}"] = [glyph_png(glyph, 3.0, rng) for _ in range(drawers)]
  return out


def write_background_zip(chars: dict[str, dict[str, list[bytes]]], folder: pathlib.Path,
                         name: str = "images_background_small1") -> pathlib.Path:
  """``chars`` as ``folder/<name>.zip``, laid out as the release's ``<name>/<alphabet>/<character>/NNNN_MM.png``."""
  folder.mkdir(parents=True, exist_ok=True)
  with zipfile.ZipFile(folder / f"{name}.zip", "w") as zf:
    for a, (alphabet, members) in enumerate(chars.items()):
      for c, (character, images) in enumerate(members.items()):
        for d, data in enumerate(images, 1):
          zf.writestr(f"{name}/{alphabet}/{character}/{a:02d}{c:02d}_{d:02d}.png", data)
  return folder


def write_character_pngs(root: pathlib.Path, alphabet: str, character: str, n: int, seed: int) -> None:
  """1-bit 105x105 PNGs in the real layout: white background, a black random polyline."""
  rng = np.random.default_rng(seed)
  glyph = rng.uniform(15, 90, size=(4, 2))
  folder = root / alphabet / character
  folder.mkdir(parents=True)
  for drawer in range(1, n + 1):
    im = Image.new("1", (105, 105), 1)
    pts = glyph + rng.normal(0, 2, glyph.shape)
    ImageDraw.Draw(im).line([tuple(p) for p in pts], fill=0, width=6)
    im.save(folder / f"0{seed:03d}_{drawer:02d}.png")


# Lake et al.'s one-shot runs in the release's layout (all_runs/run01/...): RUNS runs of WAY classes.
RUNS, WAY = 3, 5


def _glyph_png(points, path: pathlib.Path) -> None:
  """A 105x105 1-bit PNG as in the release: white background, a black polyline."""
  image = Image.new("1", (105, 105), 1)
  ImageDraw.Draw(image).line([tuple(p) for p in points], fill=0, width=6)
  path.parent.mkdir(parents=True, exist_ok=True)
  image.save(path)


def write_lake_runs(root: pathlib.Path, identical: bool = False, seed: int = 0) -> dict:
  """``RUNS`` runs of ``WAY`` classes in the release's layout; returns each run's item labels (class indices).

  Items are their class's glyph redrawn with its points moved by ~15 px (so that some are misread), or
  (``identical``) byte-for-byte copies of its training image.
  """
  rng = np.random.default_rng(seed)
  labels = {}
  for r in range(1, RUNS + 1):
    run = f"run{r:02d}"
    glyphs = rng.uniform(15, 90, size=(WAY, 4, 2))
    for c in range(WAY):
      _glyph_png(glyphs[c], root / run / "training" / f"class{c + 1:02d}.png")
    labels[run] = rng.permutation(WAY)
    lines = []
    for i, c in enumerate(labels[run]):
      item = root / run / "test" / f"item{i + 1:02d}.png"
      if identical:
        item.parent.mkdir(parents=True, exist_ok=True)
        item.write_bytes((root / run / "training" / f"class{c + 1:02d}.png").read_bytes())
      else:
        _glyph_png(glyphs[c] + rng.normal(0, 15, glyphs[c].shape), item)
      lines.append(f"{run}/test/item{i + 1:02d}.png {run}/training/class{c + 1:02d}.png")
    (root / run / "class_labels.txt").write_text("\n".join(lines) + "\n")
  return labels


def zip_runs(folder: pathlib.Path, archive: pathlib.Path) -> pathlib.Path:
  """The folder as a zip with the runs under ``all_runs/``, as the release is packed."""
  with zipfile.ZipFile(archive, "w") as zf:
    for path in sorted(folder.rglob("*")):
      if path.is_file():
        zf.write(path, f"all_runs/{path.relative_to(folder).as_posix()}")
  return archive
