"""Stopping on the validation split, retraining on train + val, and a finished run trained further (issue 37)."""

import json

import numpy as np
import pytest

from fewshot.config import Config
from fewshot.errors import ConfigError, RunDirError
from fewshot.records.rundir import RunDir
from fewshot.train import train, train_group
from fewshot.training import loop

import tiny_run

TINY = {**tiny_run.TINY, "episodes": 8, "val_episodes": 2, "test_episodes": 2}


def _stop_by_hand(values, patience):
  """The rule as written in words: stop at the first checkpoint that is the patience-th in a row without a strictly
  better value than every one before it.
  """
  without = 0
  for k, value in enumerate(values):
    without = 0 if k == 0 or value > max(values[:k]) else without + 1
    if without == patience:
      return k
  return None


@pytest.mark.parametrize("seed", range(20))
def test_stopped_at_follows_the_rule_on_random_curves(seed):
  rng = np.random.default_rng(seed)
  values = [float(v) for v in rng.integers(0, 5, 12)]  # ties are common: the earliest of them is the best
  patience = int(rng.integers(1, 4))
  rows = [{"step": 10 * (k + 1), "val": v} for k, v in enumerate(values)]
  checkpointing = loop.Checkpointing(120, 10, best_by="val", patience=patience)
  k = _stop_by_hand(values, patience)
  assert loop.stopped_at(rows, checkpointing) == (None if k is None else rows[k]["step"])
  kept = values if k is None else values[:k + 1]
  assert loop.best_row(rows, checkpointing)["step"] == 10 * (int(np.argmax(kept)) + 1)
  assert loop.stopped_at(rows, loop.Checkpointing(120, 10, best_by="val")) is None  # no patience: never
  # The loop carries the tally row by row from any resumed prefix instead of reading every row again.
  cut = int(rng.integers(0, len(rows)))
  tally, stop = loop._tally_rows(rows[:cut], checkpointing), loop.stopped_at(rows[:cut], checkpointing)
  for row in rows[cut:]:
    tally, stop = loop._watch(tally, stop, row, checkpointing)
  assert stop == loop.stopped_at(rows, checkpointing)


def test_a_run_with_patience_stops_there_and_tests_its_best(tmp_path):
  results = train(Config(**{**TINY, "episodes": 40, "patience": 1}), tmp_path / "run", progress=False)
  rows = RunDir(tmp_path / "run").read_metrics()
  vals = [r["val_accuracy"] for r in rows]
  stop = _stop_by_hand(vals, 1)
  assert results["stopped_at"] == (None if stop is None else rows[stop]["episode"])
  assert len(rows) == (20 if stop is None else stop + 1)  # alone, it trains no further than its stop
  assert results["best_episode"] == rows[int(np.argmax(vals))]["episode"]


@pytest.mark.slow
def test_a_group_stops_when_every_run_has_and_each_keeps_the_best_a_run_alone_keeps(tmp_path):
  config = Config(**{**TINY, "episodes": 30, "patience": 1})
  grouped = train_group(config, (0, 1), [str(tmp_path / "g0"), str(tmp_path / "g1")], progress=False)
  for seed, result in zip((0, 1), grouped):
    alone = train(config.with_seed(seed), tmp_path / f"alone{seed}", progress=False)
    for key in ("best_episode", "stopped_at", "best_val_accuracy"):
      assert result[key] == alone[key], (seed, key)
    assert result["test_accuracy"] == pytest.approx(alone["test_accuracy"], abs=1e-4)


@pytest.mark.slow
def test_train_plus_val_trains_on_both_validates_nothing_and_tests_the_last_checkpoint(tmp_path):
  results = train(Config(**{**TINY, "train_splits": "train+val"}), tmp_path / "run", progress=False)
  rundir = RunDir(tmp_path / "run")
  record = json.loads(rundir.config_path.read_text())
  assert "val" not in record["data"]
  pooled = Config(**TINY)  # the same data with its validation classes held out
  from fewshot.episodic.experiment import load_data

  split = load_data(pooled)
  assert record["data"]["train"]["classes"] == split["train"].num_classes + split["val"].num_classes
  assert all(r["val_accuracy"] is None for r in rundir.read_metrics())
  assert results["best_episode"] == TINY["episodes"] == rundir.checkpoints.step("best")


def test_train_plus_val_is_refused_with_patience_and_without_a_validation_split():
  with pytest.raises(ConfigError, match="--patience stops on the validation split"):
    Config(**TINY, train_splits="train+val", patience=3)
  with pytest.raises(ConfigError, match="needs class splits with a validation split of their own"):
    Config(dataset="omniglot", class_splits="background_evaluation", train_splits="train+val")


@pytest.mark.slow  # 18 s: three runs; resuming a finished run is the default tier's
def test_a_finished_run_trained_further_is_the_run_trained_that_long_from_the_start(tmp_path):
  short, long = Config(**TINY), Config(**{**TINY, "episodes": 16})
  train(short, tmp_path / "extended", progress=False)
  extended = train(long, tmp_path / "extended", resume=True, progress=False)
  whole = train(long, tmp_path / "whole", progress=False)
  strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
  assert strip(RunDir(tmp_path / "extended").read_metrics()) == strip(RunDir(tmp_path / "whole").read_metrics())
  assert {k: v for k, v in extended.items() if k != "workdir"} == {k: v for k, v in whole.items() if k != "workdir"}
  assert json.loads((tmp_path / "extended" / "config.json").read_text())["episodes"] == 16
  with pytest.raises(RunDirError, match="would end it before its last checkpoint: pass --episodes 16 or more"):
    train(short, tmp_path / "extended", resume=True, progress=False)
  with pytest.raises(RunDirError, match="differs in --episodes"):  # without --resume, another length is another run
    train(Config(**{**TINY, "episodes": 20}), tmp_path / "extended", progress=False)


def test_resuming_a_finished_run_says_it_is_complete_and_tests_nothing_again(tmp_path, capsys, monkeypatch):
  """Issue 42: ``--resume`` on a finished run re-tested it silently (45 s)."""
  first = train(Config(**TINY), tmp_path / "run", progress=False)
  events = {p: p.read_bytes() for p in (tmp_path / "run" / "tensorboard").rglob("*") if p.is_file()}
  from fewshot.episodic import experiment  # noqa: PLC0415

  monkeypatch.setattr(experiment.Experiment, "build", lambda *a, **k: pytest.fail("built again"))
  again = train(Config(**TINY), tmp_path / "run", resume=True)
  assert again == first and "trained to --episodes 8 and tested already" in capsys.readouterr().err
  # Nor does TensorBoard show its test twice (issue 42, item 9): not one event file written or added.
  assert {p: p.read_bytes() for p in (tmp_path / "run" / "tensorboard").rglob("*") if p.is_file()} == events != {}


def _stopped_run(path, capsys=None):
  """A run that --patience 1 stops early (2-episode validation ties often), its results and what it printed."""
  config = Config(**{**TINY, "episodes": 40, "patience": 1})
  results = train(config, path, progress=capsys is not None)
  assert results["stopped_at"] is not None and results["stopped_at"] < 40, "the fixture needs a run that stops"
  return config, results, capsys.readouterr().err if capsys is not None else ""


def test_an_early_stop_says_why_and_a_longer_episodes_alone_is_refused_naming_patience(tmp_path, capsys):
  """Issue 56 item 6: the stop had no word (the last line read "episode 10/40 … ETA"), and ``--resume --episodes
  80`` of a stopped run trained nothing, re-tested it and rewrote config.json to say 80 episodes.
  """
  config, results, said = _stopped_run(tmp_path / "run", capsys)
  stop = results["stopped_at"]
  assert f"stopped at episode {stop} of 40, stopped: 1 checkpoints in a row brought no better val_accuracy" in said
  before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
  from fewshot.errors import TrainingError  # noqa: PLC0415

  with pytest.raises(TrainingError) as raised:
    train(Config(**{**config.to_dict(), "episodes": 80}), tmp_path / "run", resume=True, progress=False)
  assert f"stopped at episode {stop}" in str(raised.value) and "raise --patience as well" in str(raised.value)
  assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()} == before


@pytest.mark.slow  # two runs and a resume
def test_a_stopped_run_with_more_patience_is_the_run_trained_with_it_from_the_start_and_less_is_refused(tmp_path):
  """``--resume --patience 3`` of a run --patience 1 stopped was refused (so it could never train further)."""
  from fewshot.errors import TrainingError  # noqa: PLC0415

  config, results, _ = _stopped_run(tmp_path / "run")
  patient = Config(**{**config.to_dict(), "patience": 3})
  further = train(patient, tmp_path / "run", resume=True, progress=False)
  whole = train(patient, tmp_path / "whole", progress=False)
  strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
  rows = strip(RunDir(tmp_path / "run").read_metrics())
  assert rows == strip(RunDir(tmp_path / "whole").read_metrics()) and rows[-1]["episode"] > results["stopped_at"]
  assert {k: v for k, v in further.items() if k != "workdir"} == {k: v for k, v in whole.items() if k != "workdir"}
  assert json.loads((tmp_path / "run" / "config.json").read_text())["patience"] == 3
  before = (tmp_path / "whole" / "config.json").read_bytes()
  with pytest.raises(TrainingError, match=f"--patience 1 would have stopped it at {results['stopped_at']}"):
    train(config, tmp_path / "whole", resume=True, progress=False)  # it trained on past that stop under 3
  assert (tmp_path / "whole" / "config.json").read_bytes() == before


@pytest.mark.slow  # two runs and a resume
def test_a_run_extended_after_a_short_last_chunk_checkpoints_on_the_grid_a_run_that_long_from_the_start_does(tmp_path):
  """Extending a 9-episode run (checkpoints every 2: 2, 4, 6, 8, 9) to 13 saved at 11 and 13, where a 13-episode
  run saves at 10 and 12: another checkpoint grid, another possible best.
  """
  train(Config(**{**TINY, "episodes": 9}), tmp_path / "extended", progress=False)
  train(Config(**{**TINY, "episodes": 13}), tmp_path / "extended", resume=True, progress=False)
  train(Config(**{**TINY, "episodes": 13}), tmp_path / "whole", progress=False)
  steps = lambda run: [r["episode"] for r in RunDir(tmp_path / run).read_metrics()]  # noqa: E731
  assert steps("extended") == [2, 4, 6, 8, 9, 10, 12, 13] and steps("whole") == [2, 4, 6, 8, 10, 12, 13]
