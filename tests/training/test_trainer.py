"""A third method needs only its own experiment: a stand-in, in numpy, trained by ``trainer.train_runs``.

The stand-in fits a running mean ``m`` to the training numbers (all 4) by gradient steps on ``(m - x)² / 2`` at rate
1/2 from 0 (2, 3, 3.5, 3.75, ...: exact in float32), validates it on numbers whose mean is 3.75 and tests it on
numbers whose mean is 3.5. So its rows, its best checkpoint (step 4 of 8) and its results are known before it trains.
"""

from __future__ import annotations

import dataclasses

import flax.struct
import numpy as np

from fewshot.options import RunOptions
from fewshot.records.rundir import RunDir
from fewshot.training import loop
from fewshot.training.runs import Runs
from fewshot.training.trainer import train_runs

NUMBERS = {"train": np.full(8, 4.0, np.float32), "val": np.array([3.5, 4.0], np.float32),
           "test": np.array([3.0, 4.0], np.float32)}


@dataclasses.dataclass(frozen=True)
class MeanConfig(RunOptions):
  dataset: str = "numbers"
  precision: str = "float32"
  seed: int = 0
  steps: int = 8
  checkpoint_every: int = 2


@flax.struct.dataclass
class MeanState:
  step: np.ndarray  # int32 scalar: the loop counts, checkpoints and resumes by it
  mean: np.ndarray


@dataclasses.dataclass(frozen=True)
class Distance:
  """The stand-in's one evaluator: how far the mean lies from a split's numbers' mean."""

  numbers: np.ndarray

  def run(self, state: MeanState) -> dict:
    return {"test_distance": float(abs(state.mean - self.numbers.mean())), "mean": float(state.mean)}


class MeanExperiment:
  """Every member :class:`fewshot.training.trainer.Experiment` asks for, and nothing of few-shot or metric learning."""

  group = None  # one run
  models = (None,)  # one model, in the run directory itself
  input_shape = (1,)
  computation = {}  # no backbone
  name = "running mean"
  tested_on = "the test numbers"

  def __init__(self, config: MeanConfig):
    self.config = config
    self.data = {**{name: {"classes": 1, "images": len(x)} for name, x in NUMBERS.items()},
                 "total": {"classes": 3, "images": sum(len(x) for x in NUMBERS.values())}}
    self.chunks = 0  # chunks trained: none where a resume has nothing left to do

  def check(self) -> None:
    pass

  def checkpointing(self) -> loop.Checkpointing:
    return loop.Checkpointing(self.config.steps, self.config.checkpoint_every, best_by="val")

  def initial_state(self, model: int = 0) -> MeanState:
    return MeanState(step=np.zeros((), np.int32), mean=np.zeros((), np.float32))

  def train_chunk(self, model: int, state: MeanState, steps: int):
    self.chunks += 1
    mean, losses = state.mean, []
    for _ in range(steps):
      losses.append(float(np.mean((mean - NUMBERS["train"]) ** 2) / 2))
      mean = np.float32(mean - 0.5 * np.mean(mean - NUMBERS["train"]))  # the gradient of the loss above
    return state.replace(step=state.step + steps, mean=np.asarray(mean, np.float32)), np.array(losses)

  def rows(self, model: int, state: MeanState, outputs, written: tuple[int, ...]) -> list[dict]:
    distance = self.evaluator("distance", split="val").run(state)["test_distance"]
    return [{"step": int(state.step), "loss": float(outputs[-1]), "mean": float(state.mean), "val": -distance}]

  def progress_fields(self, row: dict, best: dict) -> dict:
    return {"val": row["val"], "best": best["val"]}

  def results(self, best_states: list, best_rows: list[list[dict]], written: tuple[int, ...]) -> list[dict]:
    return [{**self.evaluator("distance").run(best_states[0]), "best_step": best_rows[0][0]["step"]}]

  def evaluator(self, name: str, split: str = "test") -> Distance:
    assert name == "distance", name
    return Distance(NUMBERS[split])


def test_a_stand_in_experiment_trains_through_train_runs_and_resumes_to_nothing(tmp_path):
  config, workdir = MeanConfig(), str(tmp_path / "run")
  (results,) = train_runs(MeanExperiment(config), Runs.open(config, None, [workdir], resume=False), progress=False)

  rundir = RunDir(workdir)
  rows = [{k: v for k, v in row.items() if k != "seconds"} for row in rundir.read_metrics()]
  assert rows == [{"step": 2, "loss": 2.0, "mean": 3.0, "val": -0.75},
                  {"step": 4, "loss": 0.125, "mean": 3.75, "val": 0.0},
                  {"step": 6, "loss": 0.0078125, "mean": 3.9375, "val": -0.1875},
                  {"step": 8, "loss": 0.00048828125, "mean": 3.984375, "val": -0.234375}]
  assert rundir.checkpoints.step("best") == 4 and rundir.checkpoints.step("last") == 8
  # Tested from the best checkpoint (3.75 from the test mean 3.5), not the last.
  assert results == {"test_distance": 0.25, "mean": 3.75, "best_step": 4, "workdir": str(rundir.path)}
  assert rundir.read_results() == results
  recorded = rundir.read_config()
  assert recorded["steps"] == 8 and recorded["data"]["total"] == {"classes": 3, "images": 12}

  before = {p: p.read_bytes() for p in (rundir.metrics_path, rundir.config_path, rundir.results_path)}
  runs = Runs.open(config, None, [workdir], resume=True)
  assert runs.completed() == [results]  # what the commands read before building an experiment
  again = MeanExperiment(config)
  assert train_runs(again, runs, progress=False) == [results]
  assert again.chunks == 0 and {p: p.read_bytes() for p in before} == before
  assert rundir.checkpoints.steps("best") == [4] and rundir.checkpoints.steps("last") == [8]
