"""Decoding one image of the RGB datasets for storage: RGB, cropped to its box, resized square.

PIL's BILINEAR widens its support when downscaling (antialiased; the filter torchvision's
Resize applies to PIL images).
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from fewshot.data.readers import DatasetRecords, ImageRecord
from fewshot.errors import DataError, one_line

RESAMPLE = Image.Resampling.BILINEAR


def where(records: DatasetRecords, record: ImageRecord) -> str:
  """The file (and row, for pixel records) an image comes from, for error messages."""
  place = records.tree.where(record.member)
  return place if record.index is None else f"{place} row {record.index}"


def decode(image: bytes | np.ndarray, place: str, size: int,
           bbox: tuple[float, float, float, float] | None = None) -> np.ndarray:
  """uint8 [size, size, 3]: the image as RGB, cropped to ``bbox`` (x, y, w, h) if given, resized square.

  Raises:
    DataError: the bytes do not decode (naming ``place``), or the box misses the image.
  """
  try:
    if isinstance(image, np.ndarray):
      im = Image.fromarray(image).convert("RGB")
    else:
      with Image.open(io.BytesIO(image)) as f:
        im = f.convert("RGB")  # loads the whole image: a truncated file fails here
  except Exception as e:  # PIL raises many types (OSError, SyntaxError, ValueError) on corrupt files
    raise DataError(f"Cannot decode image {place} ({one_line(e)}): it is truncated or corrupt; replace the file "
                    "(re-extract or re-download the dataset) and load again.") from None
  if bbox is not None:
    x, y, w, h = bbox
    # Whole pixels, clipped to the image: resampling inside a float box would blend
    # in pixels from outside it (the filter's support reaches past the box edge).
    box = (max(0, round(x)), max(0, round(y)), min(im.width, round(x + w)), min(im.height, round(y + h)))
    if box[2] <= box[0] or box[3] <= box[1]:
      raise DataError(f"Bounding box {bbox} of image {place} lies outside its {im.width}x{im.height} pixels; "
                      "fix its annotation or load without bbox_crop.")
    im = im.crop(box)
  return np.asarray(im.resize((size, size), RESAMPLE), np.uint8)
