"""Statistics of accuracies and of training diagnostics (pure functions of arrays)."""

from __future__ import annotations

import numpy as np


def mean_confidence_interval(values, z: float = 1.96) -> tuple[float, float]:
  r"""Mean and the half-width :math:`z \sigma / \sqrt{n}` of its normal-approximation interval.

  :math:`\sigma` is the population standard deviation (``ddof=0``), as in the few-shot
  literature's 600-episode protocol (Chen et al., 2019).
  """
  values = np.asarray(values, dtype=np.float64)
  if values.ndim != 1 or values.size == 0:
    raise ValueError(f"need a non-empty 1-D array of values, got shape {values.shape}.")
  return float(values.mean()), float(z * values.std() / np.sqrt(values.size))
