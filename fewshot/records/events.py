"""TensorBoard event files of a run: every number of each ``metrics.jsonl`` row as a scalar, under ``tensorboard/``.

    tensorboard --logdir runs/        # every run (and fold model) below, each its own TensorBoard run

``metrics.jsonl`` stays the record; the events are a view of it for watching runs live. They are written with
tensorboardX, which needs neither TensorFlow nor PyTorch (imported here on first write, so reading records needs
it not). A resumed run purges the events past its last checkpoint, which it trains again, so TensorBoard shows
each step once.
"""

from __future__ import annotations

import math
import pathlib

FOLDER = "tensorboard"


class EventWriter:
  """The scalars of one run directory's rows, step by step (``row[step_key]``)."""

  def __init__(self, run_path: pathlib.Path, step_key: str, resumed_step: int = 0):
    from tensorboardX import SummaryWriter  # only where a run trains

    self.step_key = step_key
    # purge_step: events at or past it, written before an interruption, are dropped when TensorBoard reads them.
    self._writer = SummaryWriter(str(pathlib.Path(run_path) / FOLDER), purge_step=resumed_step + 1 if resumed_step else None,
                                 flush_secs=30)

  def write(self, row: dict) -> None:
    step = int(row[self.step_key])
    for name, value in row.items():
      if name != self.step_key and isinstance(value, (int, float)) and not isinstance(value, bool) and \
          math.isfinite(value):
        self._writer.add_scalar(name, value, step)
    self._writer.flush()

  def close(self) -> None:
    self._writer.close()
