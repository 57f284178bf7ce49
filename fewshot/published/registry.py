"""What a published result is, as data: its source, its protocol as published, its numbers, and what fewshot's run of
it does otherwise.

An :class:`Entry` trains one or more models (:class:`Model`: a run's options beside the entry's ``options``) under a
named :class:`Schedule` in each of its arms (``Entry.arms``: a label and the options that set the arm apart, by
default the softmax and the DR head), then tests each :class:`Cell` on a model's final checkpoint. Where
``retrain`` is set the protocol is Snell et al.'s: a run on the training classes chooses its length on the validation
split (``--patience``), and a second run trains that long on train + val (``--train_splits train+val``); its last
checkpoint is what the cells test. Nothing here imports JAX: the command (:mod:`fewshot.reproduce`) trains, the page
(:mod:`fewshot.published.page`) reads the records.
"""

from __future__ import annotations

import dataclasses

from fewshot.analysis.verdicts import UNLIKE
from fewshot.errors import ConfigError


def head_arms(*heads: str) -> dict[str, dict]:
  """Arms that differ only by their head (labelled by it), as ProtoNet's entries compare them.

  >>> head_arms("softmax", "dr")
  {'softmax': {'head': 'softmax'}, 'dr': {'head': 'dr'}}
  """
  return {head: {"head": head} for head in heads}


@dataclasses.dataclass(frozen=True)
class Model:
  """A model the protocol trains: its name (``1-shot``) and its options (``shot``, ``way``, ...)."""

  name: str
  options: dict


@dataclasses.dataclass(frozen=True)
class RunsOf:
  """Another entry's runs that stand in for a schedule's: trained under the same options (a test checks that each
  model and arm's options are equal), read from that entry's schedule's folders; ``models`` maps this entry's model
  names to that entry's, and ``retrains`` says whether that entry tests final runs on train + val.
  """

  entry: str
  schedule: str
  models: dict
  retrains: bool = False


@dataclasses.dataclass(frozen=True)
class Schedule:
  """How long a protocol trains: its options (``episodes``, ``patience``, ...) and what it is, in words; options None:
  the published schedule is not known (figures quoted without their training), so it is named and never run.
  """

  name: str
  options: dict | None
  about: str
  _: dataclasses.KW_ONLY  # the rest by name: a positional value would silently land in the wrong field
  # Where the entry retrains: False trains the final runs on train + val for the schedule's ``episodes`` at once,
  # with no select run to choose the length (a fixed length declared before the runs).
  selects: bool = True
  models: tuple[str, ...] | None = None  # the models it trains (None: all the entry's); the others' cells are not run
  retrain_beyond: int = 0  # episodes the final run trains past the select run's best (the code's best + patience)
  runs_of: RunsOf | None = None  # another entry's runs, where they are this schedule's too (trained once, read twice)
  # How its runs differ from the paper's protocol, as a verdict's first words: the length alone by default, more words
  # where they differ in more (so that the verdict itself says so); None only for the paper's own schedule, which
  # must say so.
  unlike: str | None = UNLIKE

  @property
  def published(self) -> bool:
    """Whether this is the paper's own schedule (the only one whose verdicts may read *equivalent*)."""
    return self.unlike is None


@dataclasses.dataclass(frozen=True)
class Cell:
  """A published number and how it is tested: on ``model``'s final checkpoint, with ``test`` (evaluate's options:
  ``test_way``, ``test_episodes``, ...), against ``value`` (in %, ± ``ci95`` where published) of ``measure``, one of
  the measures its entry's kind of run records (:attr:`fewshot.records.run_kinds.RunKind.measures`), read through
  that kind's reader.
  """

  name: str
  model: str
  test: dict
  value: float | None  # None: the paper's number is not at hand (the page shows ``direction``, what its text says)
  ci95: float | None = None
  direction: str | None = None  # what the paper's text states of this cell, where its number is not at hand
  measure: str = "test_accuracy"
  # The equivalence margin in points, declared with the entry before its runs: ``equivalent within ±margin`` needs
  # the 90% interval of ours − published inside it (fewshot.analysis.verdicts). None: no agreement word possible.
  margin: float | None = None
  code_value: float | None = None  # the authors' code as a third party ran it (Entry.code_runs), where public
  schedules: tuple[str, ...] | None = None  # the schedules whose runs it scores (None: every one)


@dataclasses.dataclass(frozen=True)
class Comparison:
  """A published figure of another method on the same task: a point to set ours beside, not a reproduction."""

  name: str
  value: float
  source: str
  verified: bool = True  # False: taken from a secondary source, not the paper's own text


@dataclasses.dataclass(frozen=True)
class Entry:
  """One published table (or part of one) that fewshot can run: see the module docstring."""

  name: str
  source: str  # paper and table
  protocol: str  # the protocol as published, in words
  dataset: str
  needs: str  # the files --data_dir must hold, in words (named in the refusal where they are missing)
  options: dict  # the options every model shares (fewshot.config.Config fields)
  models: tuple[Model, ...]
  schedules: tuple[Schedule, ...]
  cells: tuple[Cell, ...]
  differences: tuple[str, ...]  # what fewshot's run does otherwise than the paper, each in a sentence
  # The arms compared in every cell: label -> the options that set the arm apart (its runs' folders are named
  # <model>_<label>); the paper's two formulations by default.
  arms: dict = dataclasses.field(default_factory=lambda: head_arms("softmax", "dr"))
  retrain: bool = False
  comparisons: tuple[Comparison, ...] = ()
  not_comparable: str | None = None  # why fewshot cannot run the published protocol at all, where it cannot
  scored_on: str = "episodes"  # or "lake_runs": the cells score Lake-style one-shot runs (fewshot.episodic.lake)
  accelerator: bool = False  # its published schedule is far beyond a CPU's hours: run on a GPU or TPU
  notes: tuple[str, ...] = ()
  code: str | None = None  # the protocol as the authors' code runs it, where it differs from the paper's words
  code_runs: str | None = None  # who ran the authors' code publicly (the cells' code_value), marked third-party
  kind: str = "fewshot"  # the kind of run it trains (fewshot.records.run_kinds.KINDS), whose reader scores its cells

  def schedule(self, name: str | None) -> Schedule:
    """The schedule named ``name`` (None: the first, the paper's); a one-line ``ConfigError`` for another name."""
    if name is None:
      return self.schedules[0]
    for schedule in self.schedules:
      if schedule.name == name:
        return schedule
    raise ConfigError(f"{self.name} has no schedule {name!r}; choose one of "
                      f"{', '.join(s.name for s in self.schedules)}.")

  def runnable(self, name: str | None) -> Schedule:
    """The schedule named ``name`` as :meth:`schedule` finds it; a one-line ``ConfigError`` where it is not known."""
    schedule = self.schedule(name)
    if schedule.options is None:
      known = ", ".join(s.name for s in self.schedules if s.options is not None)
      raise ConfigError(f"{self.name}'s {schedule.name} schedule is not known ({schedule.about}), so it cannot be "
                        f"run; choose --schedule {known}.")
    return schedule

  def model(self, name: str) -> Model:
    return next(m for m in self.models if m.name == name)

  def models_of(self, schedule: Schedule) -> tuple[Model, ...]:
    """The models ``schedule`` trains (its ``models``; None: every one), in the entry's order."""
    return tuple(m for m in self.models if schedule.models is None or m.name in schedule.models)

  def run_options(self, model: Model, schedule: Schedule, arm: str) -> dict:
    """A model's training options under ``schedule`` in ``arm``: the entry's, the model's, the schedule's, the arm's."""
    return {**self.options, **model.options, **schedule.options, **self.arms[arm]}
