"""TensorBoard event files of a run: every number of each ``metrics.jsonl`` row as a scalar, under ``tensorboard/``.

    tensorboard --logdir runs/        # every run (and fold model) below, each its own TensorBoard run

``metrics.jsonl`` stays the record; the events are a view of it for watching runs live. They are written with
tensorboardX, which needs neither TensorFlow nor PyTorch (imported here on first write, so reading records needs
it not). A resumed run purges the events past its last checkpoint, which it trains again, so TensorBoard shows
each step once. Tags are grouped (:func:`tag`): ``train/`` (loss, accuracy, θ), ``val/``, ``diagnostics/`` (every
other number of a row) and ``time/``; when the run is tested, ``test/`` holds its results at the best checkpoint's
step, and the HPARAMS tab its options (:func:`write_results`).
"""

from __future__ import annotations

import math
import os
import pathlib
import time

FOLDER = "tensorboard"
_TRAINING = ("loss", "theta")  # a row's numbers that are training's without a train_ prefix


def tag(name: str) -> str:
  """A ``metrics.jsonl`` field's TensorBoard tag: ``train_loss`` -> ``train/loss``, ``val_accuracy`` ->
  ``val/accuracy``, ``seconds`` -> ``time/seconds``, a diagnostic (``norm_ratio``) -> ``diagnostics/norm_ratio``.

  >>> [tag(n) for n in ("train_loss", "theta", "val_map_at_r", "seconds", "con_alpha")]
  ['train/loss', 'train/theta', 'val/map_at_r', 'time/seconds', 'diagnostics/con_alpha']
  """
  for prefix in ("train", "val", "test"):
    if name.startswith(prefix + "_"):
      return f"{prefix}/{name[len(prefix) + 1:]}"
  if name in _TRAINING:
    return f"train/{name}"
  return "time/seconds" if name == "seconds" else f"diagnostics/{name}"


def _number(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# tensorboardX reads the clock again for the file name's second: a file opened in the last moments of a second
# could be named by the next second with this one's nanoseconds, and sort before a file opened just after it.
_SECOND_END_NS = 10**9 - 10**7


def _opening_time_ns() -> int:
  """Now, in nanoseconds, never within 10 ms of the next second (it waits for that second to begin)."""
  now = time.time_ns()
  if now % 10**9 >= _SECOND_END_NS:
    time.sleep((10**9 - now % 10**9) / 1e9)
    now = max(time.time_ns(), now - now % 10**9 + 10**9)
  return now


class EventWriter:
  """The scalars of one run directory's rows, step by step (``row[step_key]``), on disk when :meth:`write` returns.

  Written straight to the event file: tensorboardX's ``SummaryWriter`` hands its events to a thread through a queue,
  and the events still queued when SIGTERM's immediate exit came were lost while the checkpoint covering them stood.
  Each writer starts by purging from ``resumed_step + 1`` (a resumed run trains those steps again, from the start
  too), so TensorBoard shows each step once.
  """

  def __init__(self, run_path: pathlib.Path, step_key: str, resumed_step: int = 0):
    from tensorboardX.event_file_writer import EventsWriter  # only where a run trains
    from tensorboardX.proto.event_pb2 import Event, SessionLog

    folder = pathlib.Path(run_path) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    self.step_key = step_key
    # Files are named by the second they open; the nanoseconds after it keep a file opened in the same second (a run
    # resumed at once) apart and in order, so that TensorBoard, reading them by name, purges in the order written.
    self._file = EventsWriter(str(folder / "events"), f".{_opening_time_ns() % 10**9:09d}.{os.getpid()}")
    self._file.write_event(Event(wall_time=time.time(), step=resumed_step + 1,
                                 session_log=SessionLog(status=SessionLog.START)))
    self._file.flush()

  def write(self, row: dict) -> None:
    from tensorboardX import summary
    from tensorboardX.proto.event_pb2 import Event

    step = int(row[self.step_key])
    for name, value in row.items():
      if name not in (self.step_key, "epoch") and _number(value):
        self._file.write_event(Event(wall_time=time.time(), step=step, summary=summary.scalar(tag(name), value)))
    self._file.flush()

  def close(self) -> None:
    self._file.close()


def write_results(run_path: pathlib.Path, options: dict, results: dict, step: int | None) -> None:
  """A tested run's numbers as ``test/`` scalars at ``step`` (its best checkpoint's), and its options with them in
  TensorBoard's HPARAMS tab (options that are no number, string or flag are shown as text).
  """
  from tensorboardX import SummaryWriter
  from tensorboardX.summary import hparams

  numbers = {tag(name if name.startswith("test_") else f"test_{name}"): value for name, value in results.items()
             if _number(value)}
  shown = {name: value if isinstance(value, (int, float, str, bool)) else str(value) for name, value in options.items()}
  # A file of its own (event files are named by the second they were opened: the training's may share it), and the
  # HPARAMS summaries written into it rather than through add_hparams, which opens yet another file.
  with SummaryWriter(str(pathlib.Path(run_path) / FOLDER), filename_suffix=".results") as writer:
    for name, value in numbers.items():
      writer.add_scalar(name, value, step or 0)
    for summary in hparams(shown, numbers):
      writer.file_writer.add_summary(summary, step)
