"""The checkpoint loop both experiments stand on: train a chunk, validate, write a row, checkpoint.

An experiment supplies its compiled chunk of steps, its validation and its metrics rows;
:func:`train_until` does the rest, the same way for episodes and for metric-learning
batches, for one run and for a seed group (:mod:`fewshot.training.seed_groups`): resume from ``last``,
write the row before the checkpoints (so a run killed in between resumes from the previous
``last`` and rewrites the same row; a group's runs keep their previous ``last`` until every run has saved the
new one, so a group stopped between two runs' saves resumes from the step all hold), keep ``best`` by a named
validation score (the earliest of ties; an undefined score ranks lowest), keep ``last``, write each row to
TensorBoard too (:mod:`fewshot.records.events`), and show where training stands (a bar on a terminal, a line per
checkpoint in a log: :mod:`fewshot.training.progress`). A row whose training loss is not finite stops the run
before its state is saved (:class:`~fewshot.errors.TrainingError`), so ``last`` keeps the last finite one; Ctrl-C
stops it with one line saying where (:func:`interrupted_message`, printed by :mod:`fewshot.runner`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

import jax

from fewshot import runner
from fewshot.errors import Interrupted, TrainingError
from fewshot.records.events import EventWriter
from fewshot.records.reuse import group_start
from fewshot.training import distributed, seed_groups
from fewshot.training.progress import Progress, say
from fewshot.training.runs import Runs
from fewshot.training.train_state import TrainState


@dataclasses.dataclass(frozen=True)
class Checkpointing:
  """How long to train and how often to checkpoint; ``best_by`` names the validation score of a row."""

  total_steps: int
  checkpoint_every: int
  best_by: str
  step_key: str = "step"  # the row's field holding the step count ("episode" for few-shot runs)
  loss_key: str = "loss"  # the row's training loss ("train_loss" for few-shot runs): a non-finite one stops the run
  unit: str = "step"  # what the progress bar counts ("ep" for few-shot runs)
  # Stop a run once this many checkpoints in a row bring no better score (None: train all total_steps). A seed group
  # trains on until every run has stopped; a stopped run keeps its best and writes its rows and last checkpoint on
  # (its slot of the group trains on), so it resumes with the group.
  patience: int | None = None
  diverged_fix: str = "lower --learning_rate"  # what a diverged run is told to change (its method's rates)


def finite(value) -> bool:
  """A defined, finite number (rows hold an undefined value as None or NaN)."""
  return value is not None and math.isfinite(value)


def score(row: dict, best_by: str) -> float:
  """A row's validation score; an undefined one (null) ranks below every defined one."""
  value = row.get(best_by)
  return -math.inf if value is None else value


def stopped_at(rows: list[dict], checkpointing: Checkpointing) -> int | None:
  """The step at which a run stops for want of a better score: the row ``checkpointing.patience`` rows after its best so
  far (the earliest of ties); None where it never does (or the checkpointing has no patience).

  >>> rows = [{"step": s, "val": v} for s, v in zip((1, 2, 3, 4), (0.5, 0.7, 0.6, 0.7))]
  >>> stopped_at(rows, Checkpointing(4, 1, best_by="val", patience=2))
  4
  """
  if checkpointing.patience is None:
    return None
  tally = None
  for row in rows:
    tally = _tally(tally, row, checkpointing)
    if tally[1] >= checkpointing.patience:
      return row[checkpointing.step_key]
  return None


def _tally(tally: tuple[float, int] | None, row: dict, checkpointing: Checkpointing) -> tuple[float, int]:
  """(the best score so far, the checkpoints since it) once ``row`` is counted; None before the first row. The loop
  carries it from checkpoint to checkpoint, so a long checkpointing's patience costs one comparison per row.
  """
  value = score(row, checkpointing.best_by)
  return (value, 0) if tally is None or value > tally[0] else (tally[0], tally[1] + 1)


def _watch(tally, stop, row: dict, checkpointing: Checkpointing):
  """``(tally, stop)`` after a new row: :func:`stopped_at` over the rows so far, without reading them again."""
  if stop is not None or checkpointing.patience is None:
    return tally, stop
  tally = _tally(tally, row, checkpointing)
  return tally, (row[checkpointing.step_key] if tally[1] >= checkpointing.patience else None)


def check_continued(runs: Runs, checkpointing: Checkpointing) -> None:
  """Refuse, in one line and before anything is written, a resume that would leave a run's record saying what did
  not happen: a lower ``--patience`` than a run trained on past (it would have stopped sooner), or a longer
  ``--episodes`` where every run stopped early and would still stop where it did (nothing would train).
  """
  if checkpointing.patience is None:  # no run stops: every resume trains on
    return
  key, stopped = checkpointing.step_key, []
  for rundir, config in zip(runs.written_dirs, (runs.configs[i] for i in runs.written)):
    rows = rundir.read_metrics() if rundir.holds_run() else []
    saved = rundir.read_config() if rows else {}
    before = saved.get("patience")
    new = stopped_at(rows, checkpointing)
    old = stopped_at(rows, dataclasses.replace(checkpointing, patience=before))
    if new is not None and (old is None or new < old):
      kept = "leave --patience out (it trained without one)" if before is None else (
          f"pass --patience {before} or more (or none)")
      raise TrainingError(f"{rundir.path} trained to {key} {old or rows[-1][key]} under "
                          f"{'no --patience' if before is None else f'--patience {before}'}; --patience "
                          f"{checkpointing.patience} would have stopped it at {new}: {kept}, or train the shorter rule in "
                          "a new --workdir.")
    extended = rows and saved.get("episodes") != getattr(config, "episodes", saved.get("episodes"))
    stopped.append((rundir, new, before) if new is not None and extended else None)
  if stopped and None not in stopped:
    rundir, new, before = stopped[0]
    raise TrainingError(f"{rundir.path} stopped at {key} {new}: its last {before} checkpoints brought no better "
                        f"{checkpointing.best_by} (--patience {before}), so a longer --episodes alone trains nothing; "
                        "raise --patience as well (or pass none) to train it further.")


def stop_line(desc: str, checkpointing: Checkpointing, stops: list[int | None], done: int) -> str | None:
  """What ends the training where every run stopped early for want of a better score; None where it trained on to
  the end (or to a stop that fell on the last checkpoint).
  """
  if None in stops or done >= checkpointing.total_steps:
    return None
  who = "stopped" if len(stops) == 1 else f"and every run of the group stopped (the last at {max(stops)})"
  return (f"{desc}: stopped at {checkpointing.step_key} {done} of {checkpointing.total_steps}, {who}: {checkpointing.patience} "
          f"checkpoints in a row brought no better {checkpointing.best_by} (--patience {checkpointing.patience}).")


def _tally_rows(rows: list[dict], checkpointing: Checkpointing) -> tuple[float, int] | None:
  tally = None
  for row in rows:
    tally = _tally(tally, row, checkpointing)
  return tally


def best_row(rows: list[dict], checkpointing: Checkpointing) -> dict | None:
  """A run's best row (the earliest of ties; an undefined score ranks lowest) up to where it stopped."""
  stop = stopped_at(rows, checkpointing)
  kept = rows if stop is None else [row for row in rows if row[checkpointing.step_key] <= stop]
  return max(kept, key=lambda row: score(row, checkpointing.best_by), default=None)  # max keeps the earliest of ties


def train_until(runs: Runs, state: TrainState, checkpointing: Checkpointing,
                train_chunk: Callable[[TrainState, int], tuple[TrainState, object]],
                make_rows: Callable[[TrainState, object], list[dict]],
                postfix: Callable[[dict, dict], dict] = lambda row, best: {},
                progress: bool = True, desc: str | None = None,
                start: tuple[str, ...] = ()) -> tuple[TrainState, list[dict], list[int | None]]:
  """Train ``state`` to ``checkpointing.total_steps`` (or until every run stopped, :func:`stopped_at`), writing each run's
  directory; returns the state, each run's best row and the step each stopped at (None: it trained them all).

  ``train_chunk(state, steps)`` trains that many steps (donating ``state``), ``make_rows(state,
  chunk_outputs)`` validates and returns each run's metrics row (in the order of ``runs.written``);
  the loop adds the chunk's wall time as ``seconds``. ``postfix(row, best)`` of the first run is
  what the progress bar (or, off a terminal, the checkpoint's line) shows, after that run's seed in a seed group
  (``seed 0, loss ...``); the ``start`` lines are printed
  once the runs have resumed.
  """
  # A group stopped between its runs' saves resumes from the step every run holds (each process reads all).
  first = group_start(list(runs.dirs), checkpointing.checkpoint_every)
  resumed = [rundir.resume(like, checkpointing.step_key, at=first)
             for rundir, like in zip(runs.written_dirs, runs.states(state))]
  state = runs.join([s for s, _ in resumed])
  rows = [r for _, r in resumed]
  bests = [best_row(r, checkpointing) for r in rows]
  stops = [stopped_at(r, checkpointing) for r in rows]
  tallies = [_tally_rows(r, checkpointing) for r in rows]
  done = seed_groups.local_step(state.step)
  _set_position(runs, checkpointing, done)
  shown = progress and jax.process_index() == 0  # one bar (or line) for all processes
  for line in start:
    say(line, shown)
  bar = Progress(checkpointing.total_steps, done, desc, checkpointing.unit, checkpointing.step_key, shown)
  events = [EventWriter(rundir.path, checkpointing.step_key, done) for rundir in runs.written_dirs]
  try:
    while done < checkpointing.total_steps and None in stops:
      started = time.perf_counter()
      # On the grid a run trained to this length from the start saves at: a run extended after a last, shorter
      # chunk (--episodes 45 → 85 at every 20) checkpoints at 60 and 80 as it would have, then at 85.
      steps = min(checkpointing.checkpoint_every - done % checkpointing.checkpoint_every, checkpointing.total_steps - done)
      state, outputs = train_chunk(state, steps)
      done += steps
      new_rows = [{**row, "seconds": time.perf_counter() - started} for row in make_rows(state, outputs)]
      _record_rows(runs, rows, new_rows, events)
      _stop_if_diverged(runs, checkpointing, new_rows, done, steps)
      _save_checkpoints(runs, checkpointing, state, new_rows, bests, done, stops)
      tallies, stops = map(list, zip(*(_watch(t, s, r[-1], checkpointing) for t, s, r in zip(tallies, stops, rows))))
      _set_position(runs, checkpointing, done)
      bar.update(steps, _first_runs_fields(runs, postfix(rows[0][-1], bests[0])) if rows else {})
  except KeyboardInterrupt:
    raise Interrupted(interrupted_message()) from None
  finally:
    bar.close()
    for writer in events:
      writer.close()
  line = stop_line(desc or "training", checkpointing, stops, done)
  if line is not None:
    say(line, shown)
  # Marked once training is done, not on an error: a peer's exit fails this process's collective while its signal
  # watcher still writes the line saying where training stopped. A stop from here on stops the test.
  _position["testing"] = True
  return state, bests, stops


def _first_runs_fields(runs: Runs, fields: dict) -> dict:
  """What the progress shows: the first written run's fields, named by its seed where a group trains several."""
  if len(runs.dirs) == 1:
    return fields
  return {"seed": runs.configs[runs.written[0]].seed, **fields}


def _record_rows(runs: Runs, rows: list[list[dict]], new_rows: list[dict], events: list[EventWriter]) -> None:
  """Append each run's new row to its metrics.jsonl (written whole) and to its TensorBoard events."""
  for k, rundir in enumerate(runs.written_dirs):
    rows[k].append(new_rows[k])
    rundir.write_metrics(rows[k])
    events[k].write(new_rows[k])


def _stop_if_diverged(runs: Runs, checkpointing: Checkpointing, new_rows: list[dict], done: int, steps: int) -> None:
  """A non-finite training loss stops the run before its state is saved, so ``last`` keeps the last finite one."""
  key = checkpointing.step_key
  for rundir, row in zip(runs.written_dirs, new_rows):
    if not finite(row.get(checkpointing.loss_key)):
      saved = done - steps
      kept = f"checkpoints/last keeps {key} {saved}" if saved else "no checkpoint was saved"
      value = row.get(checkpointing.loss_key)  # a row records a non-finite value as null
      said = "not finite" if value is None else f"{value} (not finite)"
      raise TrainingError(f"training stopped: the training loss at {key} {done} of {rundir.path} is {said}: the run "
                          f"diverged; {kept}; {checkpointing.diverged_fix} and train again in a new --workdir.")


def _save_checkpoints(runs: Runs, checkpointing: Checkpointing, state: TrainState, new_rows: list[dict], bests: list,
                      done: int, stops: list[int | None]) -> None:
  """``best`` where the row beats the best so far (the earliest of ties stays) in a run not yet stopped, and
  ``last``, for each run.
  """
  for k, (rundir, run_state) in enumerate(zip(runs.written_dirs, runs.states(state))):
    improves = bests[k] is None or score(new_rows[k], checkpointing.best_by) > score(bests[k], checkpointing.best_by)
    if stops[k] is None and improves:
      bests[k] = new_rows[k]
      rundir.checkpoints.save("best", done, run_state)
    rundir.checkpoints.save("last", done, run_state)
  if runs.group is not None:  # the one before goes once every process has saved this step
    distributed.barrier(f"fewshot: every run saved {checkpointing.step_key} {done}")
  for rundir in runs.written_dirs:
    rundir.checkpoints.commit(done)


# Where the loop stands (its runs and last checkpoint), for the line Ctrl-C prints: the command-line
# entry points print it from their own thread while this one waits on the device (fewshot.runner).
_position: dict = {}


def _set_position(runs: Runs, checkpointing: Checkpointing, saved: int) -> None:
  _position.update(runs=runs, checkpointing=checkpointing, saved=saved, testing=False)


def interrupted_message(cause: str = "interrupted", resume: str = "with --resume") -> str:
  """One line saying where training stopped (``cause``: what stopped it) and that the same command ``resume``
  continues it (``again`` for a command without ``--resume``, as ``fewshot.reproduce``).
  """
  if not _position or not _position["runs"].written_dirs:
    return f"{cause}."
  runs, checkpointing, saved = _position["runs"], _position["checkpointing"], _position["saved"]
  others = f" and {len(runs.written_dirs) - 1} more runs" if len(runs.written_dirs) > 1 else ""
  hosts = " on every host" if jax.process_count() > 1 else ""  # a group across processes resumes together
  if _position.get("testing"):  # --resume of a trained run tests it (and of a tested one reports its results)
    return (f"{cause}: {runs.written_dirs[0].path}{others} finished training ({checkpointing.step_key} {saved}) and "
            f"stopped while testing its best checkpoint; run the same command {resume}{hosts} to test it.")
  where = (f"stopped at {checkpointing.step_key} {saved} of {checkpointing.total_steps}, its last checkpoint" if saved else
           "stopped before its first checkpoint")
  return f"{cause}: {runs.written_dirs[0].path}{others} {where}; run the same command {resume}{hosts} to continue."


runner.AT_EXIT.where = interrupted_message  # the line a command prints when it is stopped
