"""The figures of metric-learning runs (``python -m fewshot.dml.train``): what ``python -m fewshot.plot`` draws of them.

Each figure is one field of the runs' rows against epochs (:class:`Curves`), every run on one axis and, where a run
trained several fold models, a curve per fold model (:func:`curves`); runs of one configuration under several seeds
are drawn as their median with the band of their middle half of seeds, labelled, styled and captioned as a few-shot
run's figures are (:mod:`fewshot.analysis.figures`). A few-shot run's other figures (the norm ratio, the alpha
ratios) have no counterpart here: a metric-learning run records no update diagnostics.

>>> [figure.name for figure in FIGURES]
['val_map_at_r', 'loss']
"""

from __future__ import annotations

import dataclasses

from fewshot.records.reading import Run, fold_runs


@dataclasses.dataclass(frozen=True)
class Curves:
  """A figure of one row field against the checkpoints, a curve per run (or fold model, or seed group)."""

  name: str  # its file's name, without the format's suffix
  key: str  # the rows' field drawn
  ylabel: str
  title: str


FIGURES = (Curves("val_map_at_r", "val_map_at_r", "validation MAP@R", "Validation MAP@R"),
           Curves("loss", "loss", "training loss", "Training loss (each epoch's mean)"))


def curves(runs: list[Run]) -> list[Run]:
  """The runs as their figures draw them: each fold model's rows a run of their own (its ``fold`` set)."""
  return [fold for run in runs for fold in fold_runs(run)]
