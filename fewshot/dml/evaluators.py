"""The metric-learning experiment's evaluator, in big_vision's shape (as :mod:`fewshot.episodic.evaluators`):
built with what it measures, then ``run(states)`` on the fold models' checkpoints. The run's own test
(``results.json``) and ``python -m fewshot.evaluate`` of a metric-learning run go through it
(:meth:`fewshot.dml.experiment.Experiment.evaluator`):

    retrieval = experiment.evaluator("retrieval")
    [tested] = retrieval.run(fold_states)   # {"separated": [{"fold", "dim", "test"}, ...], "concatenated": {...}}
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fewshot import distances
from fewshot.analysis import stats
from fewshot.dml.metrics import retrieval_metrics

RECALL_AT = (1, 2, 4, 8)
REPORTED = ("precision_at_1", "r_precision", "map_at_r")  # what results.json averages over fold models


def retrieval(embeddings: np.ndarray, labels: np.ndarray) -> dict:
  """Retrieval metrics of a split against itself, the query left out of its own list; NaN as null."""
  recall_at = tuple(k for k in RECALL_AT if k < len(labels))
  m = retrieval_metrics(embeddings, labels, embeddings, labels, ref_includes_query=True, recall_at=recall_at)
  return {name: stats.finite_or_none(v) if isinstance(v, float) else v for name, v in m.as_dict().items()}


@dataclasses.dataclass(frozen=True)
class Retrieval:
  """The test split retrieved against itself by each fold model's embedding (separated) and, with several fold
  models, by their re-normalised concatenation (the reality check's 512-d): one result per ``written`` run.
  """

  experiment: object  # fewshot.dml.experiment.Experiment (not imported: it builds its evaluators)
  written: tuple[int, ...] = (0,)

  def run(self, states: list) -> list[dict]:
    test = self.experiment.test
    embedded = [self.experiment.embed(k, state, test, self.written) for k, state in enumerate(states)]  # [fold][run]
    out = []
    for i in range(len(self.written)):
      runs = [e[i] for e in embedded]
      tested = {"separated": [{"fold": k, "dim": int(e.shape[1]), "test": retrieval(e, test.labels)}
                              for k, e in enumerate(runs)]}
      if len(runs) > 1:
        # Each model's embedding is unit-length; their concatenation is re-normalised.
        concatenated = distances.l2_normalize(np.concatenate(runs, axis=1))
        tested["concatenated"] = {"dim": int(concatenated.shape[1]), "test": retrieval(concatenated, test.labels)}
      out.append(tested)
    return out
