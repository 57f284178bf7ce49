"""The kinds of run, one row each: what a run's records say of the command that wrote them and how to read them.

A kind's row names its command, the unit its metrics rows count (``episode``, ``epoch``), the options that tell
its ``config.json`` apart, and the options two of its runs must share to be compared as one protocol. The
commands map each kind to its options' class (:mod:`fewshot.kinds`); everything below them reads the row.

    >>> KINDS[run_kind({"loss": "triplet", "folds": 4, "dataset": "cub"})].step
    'epoch'
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class RunKind:
  """One kind of run: ``label`` (in sentences), its ``command``, the ``step`` its metrics rows count, the ``marks``
  (options only its runs record) and its ``protocol`` (the options two runs must share to be one protocol).
  """

  label: str
  command: str
  step: str
  marks: frozenset[str]
  protocol: tuple[str, ...]


# The protocol lists are the one list analysis derives its others from (analysis.arms.ARM_OPTIONS,
# analysis.figures.CAPTION_OPTIONS, analysis.retrieval_arms.ARM_OPTIONS): runs that differ in one are compared with a
# warning (records.reading.protocol_warning). A metric-learning run has no episodes; its protocol is Musgrave et
# al.'s (the embedding's size, the fold models, the class splits, the input side).
KINDS = {
    "fewshot": RunKind("few-shot", "python -m fewshot.train", "episode", frozenset(),
                       ("dataset", "way", "shot", "backbone")),
    "dml": RunKind("metric-learning", "python -m fewshot.dml.train", "epoch", frozenset({"loss", "folds"}),
                   ("dataset", "backbone", "embedding_dim", "folds", "class_splits", "image_size")),
}
DEFAULT = "fewshot"  # the kind of a record that carries no kind's marks (the first runs fewshot wrote)


def run_kind(record: dict) -> str:
  """The kind of the options of a run (saved, or ``config.to_dict()``): the kind whose marks it carries, else
  :data:`DEFAULT`.
  """
  marked = [name for name, kind in KINDS.items() if kind.marks and kind.marks <= record.keys()]
  return marked[0] if marked else DEFAULT
