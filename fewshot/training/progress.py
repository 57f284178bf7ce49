"""Where a run stands while it trains: a progress bar on a terminal, one plain line per checkpoint in a log.

Under ``nohup``, SLURM or any redirect, stderr is no terminal: a bar would write carriage returns and cursor
escapes into the log, and nothing at all was written until the run ended. There, each checkpoint prints one line,
flushed at once::

    ProtoNet_DR x5 seeds: episode 300/2000, seed 0, loss 0.412, val 88.10%, best 88.10%, elapsed 0:01:12, ETA 0:06:48

A seed group's line shows its first run's numbers, named by that run's seed.
"""

from __future__ import annotations

import datetime
import sys
import time

import tqdm

from fewshot.training import provenance


def _clock(seconds: float) -> str:
  """``H:MM:SS`` (days before it where needed), or years for times past what a clock shows."""
  if seconds >= 10 ** 8:  # three years and more: timedelta's digits say nothing (and overflow far beyond)
    return f"{seconds / 31_557_600:.3g} years"
  return str(datetime.timedelta(seconds=round(seconds)))


class Progress:
  """One loop's progress: ``update`` after each checkpoint with the fields to show (the first run's)."""

  def __init__(self, total: int, done: int, desc: str | None, unit: str, step_key: str, shown: bool):
    self.total, self.done, self.start_done, self.step_key = total, done, done, step_key
    self.desc = desc or "training"
    # disable=None: shown on a terminal only; off one, the plain lines below take its place.
    self.bar = tqdm.tqdm(total=total, initial=done, unit=unit, disable=None if shown else True, desc=desc)
    self.lines = shown and self.bar.disable
    self.started = time.perf_counter()

  def update(self, steps: int, fields: dict) -> None:
    self.done += steps
    self.bar.update(steps)
    self.bar.set_postfix(fields)
    if self.lines:
      print(self.line(fields), file=sys.stderr, flush=True)

  def line(self, fields: dict) -> str:
    """The plain line of the last checkpoint: where the run stands, its fields, the time so far and still to go."""
    elapsed = time.perf_counter() - self.started
    rate = (self.done - self.start_done) / elapsed if elapsed > 0 else 0.0
    eta = _clock((self.total - self.done) / rate) if rate > 0 else "?"
    shown = "".join(f", {name} {value}" for name, value in fields.items())
    return (f"{self.desc}: {self.step_key} {self.done}/{self.total}{shown}, elapsed {_clock(elapsed)}, "
            f"ETA {eta}")

  def close(self) -> None:
    self.bar.close()


def batches(desc: str, unit: str, shown: bool, every_s: float = 30.0):
  """``update(done, total)`` for a long loop of batches (a test's embedding with ``--test_shifts``): a bar on a
  terminal, else a line at most every ``every_s`` seconds and at the end; nothing where not ``shown``.
  """
  held: dict = {}

  def update(done: int, total: int) -> None:
    if not shown:
      return
    if "bar" not in held:
      held["bar"], held["said"] = Progress(total, 0, desc, unit, unit, shown), -every_s
    bar = held["bar"]
    bar.bar.update(done - bar.done)
    bar.done = done
    elapsed = time.perf_counter() - bar.started
    if bar.lines and (elapsed - held["said"] >= every_s or done >= total):  # off a terminal: throttled lines
      held["said"] = elapsed
      print(bar.line({}), file=sys.stderr, flush=True)
    if done >= total:
      bar.close()

  return update


def say(line: str, shown: bool = True) -> None:
  """A status line of a training command (its devices, its data, its test), on stderr, flushed at once."""
  if shown:
    print(line, file=sys.stderr, flush=True)


def start_lines(desc: str, runs, dataset: str, data: dict, precision: str) -> list[str]:
  """The first lines a training command writes, once its runs have resumed (a run that cannot resume says so in
  its one line alone): what trains where (its runs, the backend and devices, the backbone's ``--precision``), and
  how the dataset was split.
  """
  written = runs.written_dirs
  others = f" and {len(written) - 1} more runs" if len(written) > 1 else ""
  return [f"{desc}: training {written[0].path}{others} on {provenance.devices()}, backbone in {precision}",
          provenance.describe_data(dataset, data)]
