"""Comparing runs from their records: statistics, the DR paper's tables, arms of seeds, listings.

* :mod:`~fewshot.analysis.measures`: the training diagnostics by name, and what "properly learned" means for each;
* :mod:`~fewshot.analysis.stats`: confidence intervals, geometric means, proportions, Mann–Whitney, Fisher, Welch
  (pure functions of arrays, scipy.stats underneath);
* :mod:`~fewshot.analysis.curves`: what a validation curve says in one number (how fast a run learned);
* :mod:`~fewshot.analysis.tables`: tables as text, markdown, LaTeX or CSV;
* :mod:`~fewshot.analysis.pairs`: the DR paper's tables of run pairs;
* :mod:`~fewshot.analysis.arms`: two arms of seed groups compared;
* :mod:`~fewshot.analysis.retrieval_arms`: two arms of metric-learning runs compared by their test retrieval;
* :mod:`~fewshot.analysis.retrieval_runs`: metric-learning runs as ``analyze`` shows them: one run's rows and test
  retrieval, the arms of several, a listing;
* :mod:`~fewshot.analysis.arm_tables`: runs grouped into arms by configuration, one arm's tables and several arms';
* :mod:`~fewshot.analysis.listing`: a row per run, the options in which the runs differ, and its results;
* :mod:`~fewshot.analysis.paired`: the paired per-seed tests (exact sign-flip, Holm, power);
* :mod:`~fewshot.analysis.verdicts`: ours beside a published number (prediction interval, verdict in fixed words);
* :mod:`~fewshot.analysis.figures`: what a figure of runs says in words (labels, seed groups and bands, caption,
  colours by model), for :mod:`fewshot.plot` to draw; no matplotlib here.
* :mod:`~fewshot.analysis.retrieval_figures`: the figures of metric-learning runs (validation MAP@R and the loss
  against epochs, a curve per fold model), for :mod:`fewshot.plot` to draw.

A rule of this folder (``tests/test_architecture.py``): importing any of it loads no JAX, Flax, orbax or
TensorFlow Datasets, so ``python -m fewshot.analyze`` and ``plot`` start in a moment. It reads runs through
:mod:`fewshot.records` and nothing else of the package.

May import: kernel, records (docs/architecture.md, "Layers").
"""
