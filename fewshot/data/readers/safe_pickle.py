"""Loading the pickles datasets ship (mini-ImageNet's caches, CIFAR-100's batches) so that a tampered file cannot run code.

    with open("cifar-100-python/meta", "rb") as f:
      meta = safe_pickle.load(f, "CIFAR-100 file meta", "download cifar-100-python.tar.gz again")

The unpickler resolves only what a pickled numpy array needs (numpy 1's and 2's module names), so loading calls
nothing else; any other global is refused in one line naming the file and the fix.
"""

from __future__ import annotations

import _codecs
import pickle
from typing import BinaryIO

import numpy as np

from fewshot.errors import DataError


def _allowed_globals() -> dict[tuple[str, str], object]:
  """The callables a pickled numpy array needs, under the module names numpy 1 and 2 pickle them with."""
  try:
    from numpy._core import multiarray, numeric  # numpy >= 2
  except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core import multiarray, numeric

  def latin1_encode(obj, encoding="utf-8"):
    # Protocol <= 2 pickles from Python 3 store bytes as _codecs.encode(str, 'latin1');
    # no other codec is needed, so none other is allowed.
    if encoding != "latin1" or not isinstance(obj, str):
      raise pickle.UnpicklingError(f"_codecs.encode with {encoding!r} is not allowed")
    return _codecs.encode(obj, "latin1")

  allowed: dict[tuple[str, str], object] = {
      ("numpy", "ndarray"): np.ndarray,
      ("numpy", "dtype"): np.dtype,
      ("_codecs", "encode"): latin1_encode,
  }
  for pkg in ("numpy.core", "numpy._core"):
    allowed[(f"{pkg}.multiarray", "_reconstruct")] = multiarray._reconstruct
    allowed[(f"{pkg}.multiarray", "scalar")] = multiarray.scalar
    allowed[(f"{pkg}.numeric", "_frombuffer")] = numeric._frombuffer  # pickle protocol 5 arrays
  return allowed


class _SafeUnpickler(pickle.Unpickler):
  """Unpickler that resolves only ``_allowed_globals``: loading cannot call anything else."""

  _ALLOWED: dict | None = None

  def __init__(self, file: BinaryIO, where: str, fix: str):
    # latin1: the original files were written by Python 2, whose str holds raw bytes.
    super().__init__(file, encoding="latin1")
    self._where, self._fix = where, fix
    if _SafeUnpickler._ALLOWED is None:
      _SafeUnpickler._ALLOWED = _allowed_globals()

  def find_class(self, module: str, name: str):
    obj = self._ALLOWED.get((module, name))
    if obj is None:
      raise DataError(f"{self._where} refers to {module}.{name}, which could run code; refused "
                      f"(only numpy arrays are allowed): {self._fix} from a trusted place.")
    return obj


def load(file: BinaryIO, where: str, fix: str):
  """The object pickled in ``file``, numpy arrays and plain Python values only (Python 2's str read as latin-1).

  Raises:
    DataError: the pickle refers to anything else (``where`` names the file, ``fix`` what to do). Truncation and
      corruption raise the unpickler's own errors, which the caller words for its dataset.
  """
  return _SafeUnpickler(file, where, fix).load()
