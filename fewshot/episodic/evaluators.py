"""The episodic experiment's evaluators, in big_vision's shape: built with what they measure, then
``run(state) -> dict`` on a run's (or a seed group's stacked) train state. The run's own test (``results.json``),
``python -m fewshot.evaluate`` and the scoring of Lake's one-shot runs all go through them
(:meth:`fewshot.episodic.experiment.Experiment.evaluator`):

    test = experiment.evaluator("episodes", episodes=1000, shifts=3)
    results = test.run(state)   # {"model", "test_accuracy", "test_ci95", "test_episodes", "test_query"}

* ``episodes``: the test split's episodes, each embedded apart (the paper's protocol);
* ``cached``: the same episodes over the test split embedded once (:mod:`fewshot.episodic.cached_episodes`);
* ``lake``: Lake et al.'s one-shot runs, read from a file or drawn (:mod:`fewshot.episodic.lake`).

``shifts`` is ``--test_shifts``: each test image embedded as the mean over its translations. It is the test's
argument, never the learner's, so training and validation embed one view.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fewshot.analysis import stats
from fewshot.episodic import cached_episodes, lake, learning
from fewshot.episodic.learners import test_shape
from fewshot.training import progress as progress_lines


def summary(accuracies: np.ndarray, prefix: str = "") -> dict:
  """Test accuracy (%) ± 95% interval over per-episode accuracies (fractions), and their count."""
  mean, half_width = stats.mean_confidence_interval(100.0 * np.asarray(accuracies))
  return {f"{prefix}test_accuracy": mean, f"{prefix}test_ci95": half_width, f"{prefix}test_episodes": len(accuracies)}


@dataclasses.dataclass(frozen=True)
class Episodes:
  """The test split's episodes, each embedded apart: one result per ``written`` run (a dict for a lone run)."""

  experiment: object  # fewshot.episodic.experiment.Experiment (not imported: it builds its evaluators)
  episodes: int
  shifts: int = 0
  written: tuple[int, ...] = (0,)

  def run(self, state) -> dict | list[dict]:
    config = self.experiment.config
    # A test with shifts embeds its images for minutes: a line (or bar) where the experiment shows its progress,
    # counting a lone run's distinct images embedded, or a group's episodes tested.
    views, group = (2 * self.shifts + 1) ** 2, self.experiment.group is not None
    what = ("test episodes", "episode") if group else ("test images embedded", "image")
    shown = self.experiment.shows_progress and self.shifts > 0
    # None where nothing is shown: a reported test runs in spans, which a silent one need not pay for.
    report = progress_lines.batches(f"{config.model_name}: {what[0]} ({views} shifted views of each image)", what[1],
                                    shown) if shown else None
    accuracies = self.experiment.accuracies(state, "test", self.episodes, self.written, self.shifts, report)
    results = [{"model": config.model_name, **summary(run_accuracies), "test_query": config.test_query}
               for run_accuracies in (accuracies[None] if self.experiment.group is None else accuracies)]
    return results[0] if self.experiment.group is None else results


@dataclasses.dataclass(frozen=True)
class CachedEpisodes:
  """The same episodes as :class:`Episodes`, gathered from the test split embedded once (a lone run's)."""

  experiment: object
  episodes: int
  shifts: int = 0
  prefix: str = ""  # "cached_" where it is reported beside the per-episode test

  def run(self, state) -> dict:
    variables, source = learning.model_variables(state), self.experiment.sources["test"]
    learner = self.experiment.learner
    embeddings = cached_episodes.embed_split(learner, variables, source.images, shifts=self.shifts)
    accuracies = cached_episodes.cached_episode_accuracies(learner, variables, embeddings, source.layout,
                                                           self.experiment.keys["test"], self.episodes,
                                                           test_shape(self.experiment.config))
    return summary(np.asarray(accuracies), self.prefix)


@dataclasses.dataclass(frozen=True)
class LakeRuns:
  """Lake et al.'s one-shot runs (:func:`fewshot.episodic.lake.read_runs`, or
  :func:`~fewshot.episodic.lake_design.design_runs`' runs of his design) scored by the trained run's head and by
  1-NN on its embedding (a lone training run's, not a seed group's).
  """

  config: object  # the trained run's fewshot.config.Config
  learner: object
  runs: tuple
  shifts: int = 0
  source: str | None = None  # where the runs were read from (None: drawn)

  def run(self, state) -> dict:
    return lake.score(self.config, self.learner, learning.model_variables(state), self.runs, self.shifts,
                      self.source)
