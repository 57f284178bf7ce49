"""Comparing runs from their records: statistics, the DR paper's tables, two arms of seeds.

* :mod:`~fewshot.analysis.measures`: the training diagnostics by name, and what "properly learned" means for each;
* :mod:`~fewshot.analysis.stats`: confidence intervals, geometric means, proportions, Mann–Whitney, Fisher, Welch
  (pure functions of arrays, scipy.stats underneath);
* :mod:`~fewshot.analysis.tables`: tables as text, markdown, LaTeX or CSV;
* :mod:`~fewshot.analysis.arms`: two arms of seed groups compared;
* :mod:`~fewshot.analysis.figures`: what a figure of runs says in words (labels, seed groups and bands, caption),
  for :mod:`fewshot.plot` to draw; no matplotlib here.

A rule of this folder (``tests/test_architecture.py``): importing any of it loads no JAX, Flax, orbax or
TensorFlow Datasets, so ``python -m fewshot.analyze`` and ``plot`` start in a moment. It reads runs through
:mod:`fewshot.records` and nothing else of the package.
"""
