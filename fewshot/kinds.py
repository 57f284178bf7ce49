"""The kinds of run as the commands use them: each kind's row (:data:`fewshot.records.run_kinds.KINDS`) resolved.

A row names its options' class and what each command does with its runs as ``"module:name"`` strings;
:func:`resolve` imports one on use, so reading runs of one kind imports nothing of another (and no JAX: every
options class is options only).
"""

from __future__ import annotations

import importlib

from fewshot.errors import ConfigError
from fewshot.records.reading import read_runs
from fewshot.records.run_kinds import KINDS


def resolve(kind: str, field: str):
  """What ``KINDS[kind]``'s ``field`` names (``"module:name"``), imported."""
  module, _, name = getattr(KINDS[kind], field).partition(":")
  return getattr(importlib.import_module(module), name)


def read_runs_of(paths: list[str], kind: str, measurement: str | None = None) -> list:
  """The records of runs of one ``kind`` as ``analyze`` and ``plot`` read them; ``measurement``: a few-shot run's
  ``python -m fewshot.evaluate`` record to read as its results (:func:`fewshot.records.reading.measured`).
  """
  if measurement is not None and not KINDS[kind].measured:
    raise ConfigError(f"--measurement chooses a python -m fewshot.evaluate record; {KINDS[kind].label} runs have "
                      "none (their test results are in results.json): drop it.")
  return read_runs(paths, resolve(kind, "options").from_dict, measurement, kind=kind)
