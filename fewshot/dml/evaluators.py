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


@dataclasses.dataclass(frozen=True)
class Retrieval:
  """The test split retrieved against itself by each fold model's embedding (separated) and, with several fold
  models, by their re-normalised concatenation (the reality check's 512-d): one result per ``written`` run.
  """

  experiment: object  # fewshot.dml.experiment.Experiment (not imported: it builds its evaluators)
  written: tuple[int, ...] = (0,)

  def run(self, states: list) -> list[dict]:
    from fewshot.dml.experiment import retrieval

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
