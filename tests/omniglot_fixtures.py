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
