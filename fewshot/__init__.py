"""fewshot: few-shot episodic learning and deep metric learning in JAX/Flax.

``fewshot.load``, ``fewshot.build`` and ``fewshot.TrainedModel`` (:mod:`fewshot.api`) are imported on first use,
so that light tools (``python -m fewshot.analyze``) start without the model machinery. How the package is organised,
and what each folder may import: docs/architecture.md.
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
