"""The checkpoint loop both trainers stand on: train a chunk, validate, write a row, checkpoint.

A trainer supplies its compiled chunk of steps, its validation and its metrics row;
:func:`train_until` does the rest, the same way for episodes and for metric-learning
batches: resume from ``last``, write the row before the checkpoints (so a run killed in
between resumes from the previous ``last`` and rewrites the same row), keep ``best`` by a
named validation score (the earliest of ties; an undefined score ranks lowest), keep
``last``, and show a progress bar.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

import tqdm

from fewshot.rundir import RunDir
from fewshot.train_state import TrainState


@dataclasses.dataclass(frozen=True)
class Schedule:
  """How long to train and how often to checkpoint; ``best_by`` names the validation score of a row."""

  total_steps: int
  steps_per_checkpoint: int
  best_by: str
  step_key: str = "step"  # the row's field holding the step count ("episode" for few-shot runs)


def score(row: dict, best_by: str) -> float:
  """A row's validation score; an undefined one (null) ranks below every defined one."""
  value = row.get(best_by)
  return -math.inf if value is None else value


def train_until(rundir: RunDir, state: TrainState, schedule: Schedule,
                train_chunk: Callable[[TrainState, int], tuple[TrainState, object]],
                make_row: Callable[[TrainState, object], dict],
                postfix: Callable[[dict, dict], dict] = lambda row, best: {},
                progress: bool = True, desc: str | None = None, unit: str = "step") -> tuple[TrainState, dict]:
  """Train ``state`` in ``rundir`` to ``schedule.total_steps``; returns the last state and the best row.

  ``train_chunk(state, steps)`` trains that many steps (donating ``state``), ``make_row(state,
  chunk_outputs)`` validates and returns the checkpoint's metrics row; the loop adds the
  chunk's wall time as ``seconds``. ``postfix(row, best)`` is what the progress bar shows.
  """
  state, rows = rundir.resume(state, schedule.step_key)
  best = max(rows, key=lambda r: score(r, schedule.best_by), default=None)  # max keeps the earliest of ties
  bar = tqdm.tqdm(total=schedule.total_steps, initial=int(state.step), unit=unit, disable=not progress, desc=desc)
  while int(state.step) < schedule.total_steps:
    start = time.perf_counter()
    steps = min(schedule.steps_per_checkpoint, schedule.total_steps - int(state.step))
    state, outputs = train_chunk(state, steps)
    row = {**make_row(state, outputs), "seconds": time.perf_counter() - start}
    rows.append(row)
    rundir.write_metrics(rows)
    if best is None or score(row, schedule.best_by) > score(best, schedule.best_by):
      best = row
      rundir.save_checkpoint("best", int(state.step), state)
    rundir.save_checkpoint("last", int(state.step), state)
    bar.update(steps)
    bar.set_postfix(postfix(row, best))
  bar.close()
  return state, best
