"""The one orchestration above the checkpoint loop: what both training commands do with a method's experiment.

:func:`train_runs` lays the runs over the experiment's devices, records their configurations, trains each of the
experiment's models through :func:`fewshot.training.loop.train_until`, restores their best checkpoints, and writes
the runs' results. A method supplies only its :class:`Experiment` (built before anything is written): the episodic
one (:mod:`fewshot.episodic.experiment`) and the metric-learning one (:mod:`fewshot.dml.experiment`, whose fold
models are its ``models``) implement the same methods; a third method needs only its own.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax

from fewshot.training import loop, provenance
from fewshot.training.progress import say, start_lines
from fewshot.training.runs import Runs


class Experiment(Protocol):
  """What :func:`train_runs` asks of a method, built from a configuration before anything is written.

  ``models`` names each model a run trains one after another in the checkpoint loop, by the sub-folder of the run
  directory it writes (``(None,)``: one model, in the run directory itself); ``model`` below is an index into it.
  Values of a seed group are held the state's way (stacked on the run axis); ``written`` are the positions on that
  axis of the runs this process writes (:attr:`fewshot.training.runs.Runs.written`).
  """

  config: Any  # the run's options (a dataclass with dataset, precision and seed)
  group: Any  # the seed group's layout on the devices (fewshot.training.seed_groups.SeedGroup), or None
  data: dict  # how the dataset was split (fewshot.training.provenance.data_record)
  input_shape: tuple[int, ...]  # what the backbone sees, as config.json records it
  computation: dict  # how the backbone computes where an option left it to the backend ({"conv": "im2col_flip"})
  models: tuple[str | None, ...]
  name: str  # what the progress lines call the runs (the model's or the loss's name)
  tested_on: str  # what the best checkpoints are tested on ("600 test episodes")

  def check(self) -> None:
    """Refuse (or warn about) what only tracing shows, before anything is written."""

  def checkpointing(self) -> loop.Checkpointing:
    """How long each model trains, how often it checkpoints, and the row's names."""

  def initial_state(self, model: int = 0) -> Any:
    """The model as initialised (also the structure its checkpoints restore into)."""

  def train_chunk(self, model: int, state: Any, steps: int) -> tuple[Any, Any]:
    """``steps`` training steps (donating ``state``): the new state and the chunk's outputs."""

  def rows(self, model: int, state: Any, outputs: Any, written: tuple[int, ...]) -> list[dict]:
    """Each written run's metrics row at this checkpoint (its validation included)."""

  def progress_fields(self, row: dict, best: dict) -> dict:
    """What a checkpoint's progress line shows of the first written run's row and best row."""

  def results(self, best_states: list, best_rows: list[list[dict]], written: tuple[int, ...]) -> list[dict]:
    """Each written run's results from every model's best checkpoint (``best_states[model]``, held the state's
    way) and best row (``best_rows[model][run]``), its test made by one of its evaluators.
    """

  def evaluator(self, name: str, **options) -> Evaluator:
    """The evaluator ``name`` over this experiment, built with ``options``: what re-tests a checkpoint."""


class Evaluator(Protocol):
  """One way of testing a checkpoint (big_vision's shape): built with what it measures, then run on a state."""

  def run(self, state: Any) -> dict | list[dict]:
    """The measurement of ``state`` (a run's, a group's stacked, or a list of fold models')."""


def train_runs(experiment: Experiment, runs: Runs, progress: bool = True) -> list[dict | None]:
  """Train, validate and test ``runs`` (opened for ``experiment.config``); every run's results in seed order, None
  for a run another process writes.
  """
  experiment.check()
  runs = runs.on(experiment.group)
  c = experiment.config
  models = [runs.under(folder) for folder in experiment.models]
  for model_runs in models:  # before anything is written
    loop.check_continued(model_runs, experiment.checkpointing())
  extended = runs.extensions()
  runs.begin(input_shape=list(experiment.input_shape), computation=experiment.computation,
             provenance=provenance.provenance(), data=experiment.data)
  desc = experiment.name if len(runs.configs) == 1 else f"{experiment.name} x{len(runs.configs)} seeds"
  start = start_lines(desc, runs, c.dataset, experiment.data, c.precision)
  if extended:
    start.append(f"{desc}: continued with {', '.join(extended)}")
  bests = []  # [model][run]
  for k, (folder, model_runs) in enumerate(zip(experiment.models, models)):
    _, best, stops = loop.train_until(
        model_runs, experiment.initial_state(k), experiment.checkpointing(),
        lambda state, steps, k=k: experiment.train_chunk(k, state, steps),
        lambda state, outputs, k=k: experiment.rows(k, state, outputs, runs.written),
        experiment.progress_fields, progress=progress, desc=desc if folder is None else f"{desc} {folder}",
        start=tuple(start) if k == 0 else ())
    # Where a run stopped for want of a better score, its results say so (stopped_at); else it trained them all.
    bests.append([row if experiment.checkpointing().patience is None else {**row, "stopped_at": stop}
                  for row, stop in zip(best, stops)])
  checkpoints = "checkpoints" if len(models) > 1 else "checkpoint"
  say(f"{desc}: testing the best {checkpoints} on {experiment.tested_on}", progress and jax.process_index() == 0)
  states = [model_runs.restore("best", experiment.initial_state(k)) for k, model_runs in enumerate(models)]
  return runs.finish(experiment.results(states, bests, runs.written))
