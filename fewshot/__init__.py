"""fewshot: few-shot episodic learning and deep metric learning in JAX/Flax.

``fewshot.load``, ``fewshot.build`` and ``fewshot.TrainedModel`` (:mod:`fewshot.api`) are imported on first use,
so that light tools (``python -m fewshot.analyze``) start without the model machinery. How the package is organised,
and what each folder may import: docs/architecture.md.

* the kernel: :mod:`~fewshot.errors` (errors by kind), :mod:`~fewshot.choices` (the names options choose among),
  :mod:`~fewshot.method_rows` (the episodic methods, a row each), :mod:`~fewshot.options` (option fields, which generate the flags), :mod:`~fewshot.usage` (``--help`` by heading,
  ``--config`` replay), :mod:`~fewshot.runner` (every command's runner: one line and exit 2 for bad input);
* research: :mod:`~fewshot.distances`, :mod:`~fewshot.heads` (their confidence around 2-D prototypes in
  :mod:`~fewshot.landscape`), :mod:`~fewshot.backbones` (with the convolution forms of
  :mod:`~fewshot.convolutions`), :mod:`~fewshot.numerics` (which products are exact float32);
  :mod:`~fewshot.config` (a few-shot run's options); :mod:`~fewshot.api` (a trained run from Python);
* the commands: :mod:`~fewshot.train`, :mod:`~fewshot.evaluate`, :mod:`~fewshot.analyze`, :mod:`~fewshot.plot`,
  :mod:`~fewshot.reproduce`, :mod:`~fewshot.kinds` (each kind of run's options, as the commands read runs) and
  :mod:`~fewshot.lake_scoring` (a run scored on Lake's one-shot runs: ``evaluate --lake_runs``, ``--lake_design``);
* the folders: :mod:`~fewshot.data`, :mod:`~fewshot.augment`, :mod:`~fewshot.records`, :mod:`~fewshot.analysis`,
  :mod:`~fewshot.published`, :mod:`~fewshot.training`, :mod:`~fewshot.episodic`, :mod:`~fewshot.dml`.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"
_API = ("TrainedModel", "build", "load")
__all__ = [*_API, "__version__"]


def __getattr__(name: str):
  if name in _API:
    return getattr(importlib.import_module("fewshot.api"), name)
  raise AttributeError(f"module 'fewshot' has no attribute {name!r}")
