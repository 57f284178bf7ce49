"""Deep metric learning: losses, miners, the C x M batch, retrieval metrics, and its experiment.

* the losses and what they reduce with: :mod:`~fewshot.dml.losses` (a subpackage, one module per family),
  :mod:`~fewshot.dml.loss_specs` (one row per loss: its name, where its function lives, its facts),
  :mod:`~fewshot.dml.miners`, :mod:`~fewshot.dml.tuples`, :mod:`~fewshot.dml.masked`;
* evaluation, exact and blocked: :mod:`~fewshot.dml.metrics` (retrieval), :mod:`~fewshot.dml.knn`,
  :mod:`~fewshot.dml.pair_similarities`, :mod:`~fewshot.dml.clustering`, :mod:`~fewshot.dml.verification`;
* training: :mod:`~fewshot.dml.samplers` (the C x M batch), :mod:`~fewshot.dml.embedding` (``MetricLearner`` and its
  pure steps), :mod:`~fewshot.dml.config` (``DMLConfig``), :mod:`~fewshot.dml.experiment` (the method's side
  of :mod:`fewshot.training.trainer`: fold models, their rows and the retrieval test), its evaluator
  :mod:`~fewshot.dml.evaluators` (``retrieval``, ``run(states) -> [dict]``), :mod:`~fewshot.dml.retest` (what
  ``python -m fewshot.evaluate`` does with a metric-learning run), and the command :mod:`~fewshot.dml.train`.

Losses, miners and metrics are pure functions of arrays and import only :mod:`fewshot.distances` (shared with the
few-shot heads) and :mod:`fewshot.heads`; the experiment stands on :mod:`fewshot.training`, :mod:`fewshot.records`,
:mod:`fewshot.augment` and :mod:`fewshot.data`, never on :mod:`fewshot.episodic`.

May import: kernel, research, data, augment, records, analysis, training (docs/architecture.md, "Layers").
"""
