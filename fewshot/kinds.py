"""The kinds of run (:data:`fewshot.records.run_kinds.KINDS`) as the commands read them: each kind's options by its own class.

A few-shot run's options are a :class:`~fewshot.config.Config`, a metric-learning run's a
:class:`~fewshot.dml.config.DMLConfig`; both are options only, so reading runs imports no JAX.
"""

from __future__ import annotations

from fewshot.config import Config
from fewshot.dml.config import DMLConfig
from fewshot.errors import ConfigError
from fewshot.records.reading import read_runs

OPTIONS = {"fewshot": Config, "dml": DMLConfig}


def read_runs_of(paths: list[str], kind: str, measurement: str | None = None) -> list:
  """The records of runs of one ``kind`` as ``analyze`` and ``plot`` read them; ``measurement``: a few-shot run's
  ``python -m fewshot.evaluate`` record to read as its results (:func:`fewshot.records.reading.measured`).
  """
  if measurement is not None and kind != "fewshot":
    raise ConfigError("--measurement chooses a python -m fewshot.evaluate record; metric-learning runs have none "
                      "(their test retrieval is in results.json): drop it.")
  return read_runs(paths, OPTIONS[kind].from_dict, measurement, kind=kind)
