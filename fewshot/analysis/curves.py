"""What a run's validation curve says in one number (pure functions of arrays)."""

from __future__ import annotations

import numpy as np


def training_speed(episodes, accuracy, fraction: float = 0.95, final_checkpoints: int = 5) -> tuple[int, float]:
  r"""How fast a run learned, from its validation curve: ``(episodes to reach fraction of final, mean accuracy)``.

  The final accuracy is the mean over the last ``final_checkpoints`` checkpoints (one checkpoint's is noisy); the
  first value is the episode of the first checkpoint at or above ``fraction`` of it, the second the curve's mean
  over its checkpoints, i.e. the area under it divided by its length (checkpoints are evenly spaced). A run that
  learns faster reaches the mark earlier and has the larger mean. Used for the DR paper's claim that DR trains
  faster (Sec. 3.2, Figures 2-3).

  >>> training_speed([100, 200, 300, 400], [50.0, 96.0, 99.0, 101.0], final_checkpoints=2)  # final 100: 95 at 200
  (200, 86.5)
  """
  episodes, accuracy = np.asarray(episodes), np.asarray(accuracy, np.float64)
  if episodes.shape != accuracy.shape or episodes.ndim != 1 or episodes.size == 0:
    raise ValueError(f"need one accuracy per checkpoint, got {episodes.shape} episodes and {accuracy.shape} values.")
  final = accuracy[-final_checkpoints:].mean()
  reached = np.flatnonzero(accuracy >= fraction * final)
  return int(episodes[reached[0]]), float(accuracy.mean())
