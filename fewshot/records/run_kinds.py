"""The kinds of run, one row each: what a run's records say of the command that wrote them and how to read them.

A kind's row names its command, the unit its metrics rows count (``episode``, ``epoch``), the options that tell
its ``config.json`` apart, and the options two of its runs must share to be compared as one protocol; and, as
``"module:name"`` strings the commands import on use (:func:`fewshot.kinds.resolve`), its options' class, its
experiment, and what each command does with its runs; and its records' reader (:mod:`fewshot.records.measures`), by
which a published cell reads the measure it names. The rows import nothing above the records, and a kind of one's
own is its module and its row: no command tests a kind by name.

    >>> KINDS[run_kind({"loss": "triplet", "folds": 4, "dataset": "cub"})].step
    'epoch'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from fewshot.records import measures


@dataclasses.dataclass(frozen=True)
class RunKind:
  """One kind of run: ``label`` (in sentences), its ``command``, the ``step`` its metrics rows count, the ``marks``
  (options only its runs record), its ``protocol`` (the options two runs must share to be one protocol) and
  whether ``python -m fewshot.evaluate``'s records of it can stand in for its results (``measured``: ``--measurement``).

  Then, each ``"module:name"``: ``options``, the class of its options (``from_dict``, ``to_dict``);
  ``experiment``, what its command trains (``fewshot.training.trainer.Experiment``); and what the commands do
  with its runs: ``report(found, folder, pairing, fmt, measurement, warning)`` and ``compare_arms(a, b, fmt, measurement)``
  (``python -m fewshot.analyze``, each ``(text, warning)``), ``list_tables(runs)`` and ``list_csv(runs)`` (its rows
  of ``analyze --list``: tables; CSV fields and records), ``figures(runs, out, fmt)`` (``python -m fewshot.plot``:
  ``(files, warning)``) and ``retest()`` (``python -m fewshot.evaluate``'s ``main`` for its runs).

  Last, ``measures``, what its tested records hold (``test_accuracy``, ``map_at_r``, ...), and ``measure``, the
  reader of one of them from a record (:mod:`fewshot.records.measures`).
  """

  label: str
  command: str
  step: str
  marks: frozenset[str]
  protocol: tuple[str, ...]
  measured: bool
  options: str
  experiment: str
  report: str
  compare_arms: str
  list_tables: str
  list_csv: str
  figures: str
  retest: str
  measures: tuple[str, ...]
  measure: Callable[[dict, str], tuple[float, float | None] | None]


# The protocol lists are the one list analysis derives its others from (analysis.arms.ARM_OPTIONS,
# analysis.figures.CAPTION_OPTIONS, analysis.retrieval_arms.ARM_OPTIONS): runs that differ in one are compared with a
# warning (records.reading.protocol_warning). A metric-learning run has no episodes; its protocol is Musgrave et
# al.'s (the embedding's size, the fold models, the class splits, the input side).
KINDS = {
    "fewshot": RunKind(
        "few-shot", "python -m fewshot.train", "episode", frozenset(), ("dataset", "way", "shot", "backbone"), True,
        options="fewshot.config:Config", experiment="fewshot.episodic.experiment:Experiment",
        report="fewshot.analyze:report_few_shot", compare_arms="fewshot.analyze:compare_few_shot_arms",
        list_tables="fewshot.analysis.listing:tables", list_csv="fewshot.analysis.listing:csv_listing",
        figures="fewshot.plot:few_shot_figures", retest="fewshot.evaluate:main_few_shot",
        measures=measures.FEW_SHOT_MEASURES, measure=measures.few_shot_measure),
    "dml": RunKind(
        "metric-learning", "python -m fewshot.dml.train", "epoch", frozenset({"loss", "folds"}),
        ("dataset", "backbone", "embedding_dim", "folds", "class_splits", "image_size"), False,
        options="fewshot.dml.config:DMLConfig", experiment="fewshot.dml.experiment:Experiment",
        report="fewshot.analyze:report_retrieval", compare_arms="fewshot.analyze:compare_retrieval_arms",
        list_tables="fewshot.analysis.retrieval_runs:tables", list_csv="fewshot.analysis.retrieval_runs:csv_listing",
        figures="fewshot.plot:plot_retrieval", retest="fewshot.evaluate:main_retrieval",
        measures=measures.RETRIEVAL_MEASURES, measure=measures.retrieval_measure),
}
DEFAULT = "fewshot"  # the kind of a record that carries no kind's marks (the first runs fewshot wrote)


def run_kind(record: dict) -> str:
  """The kind of the options of a run (saved, or ``config.to_dict()``): the kind whose marks it carries, else
  :data:`DEFAULT`.
  """
  marked = [name for name, kind in KINDS.items() if kind.marks and kind.marks <= record.keys()]
  return marked[0] if marked else DEFAULT
