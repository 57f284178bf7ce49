"""The episodic methods' steps and learners: each row of :data:`fewshot.method_rows.METHODS` resolved.

A method is a module of pure functions of a frozen learner (static under ``jax.jit``), all on the same stages
(sources, the compiled chunk, the checkpoint loop, the run records):

* ``init_state(learner, key, input_shape) -> TrainState``, ``check_shapes(learner, input_shape)`` and
  ``check_splits(learner, splits)`` (its own checks of the loaded splits, beside the episodes' own);
* ``train_chunk(learner, state, source, key, episodes) -> (state, metrics, diagnosed)``: its compiled chunk of
  episodes, per-episode ``{"loss", "accuracy"}``, and the update diagnostics of the chunk's last episode (``{}``
  for a method whose row says it records none, with ``NO_DIAGNOSTICS`` saying why);
* ``episode_accuracies(learner, variables, source, key, episodes, shape, shifts)``: per-episode query accuracy
  (``shifts``: ``--test_shifts``, the test's argument);
* ``lowered_step(learner, input_shape, stored_shape)``: one step lowered, for a seed group's memory check;
* ``model_variables(state)``;
* ``RUN_FIX``: what a single run too large for the memory is told to change (None: a single run is not checked),
  and ``DIVERGED_FIX``: what a run whose loss diverged is told to change.

ProtoNet's heads (:mod:`fewshot.episodic.learning`) are the ``protonet`` row; MAML and ANIL
(:mod:`fewshot.episodic.maml`) are two rows of one module; Baseline++ (:mod:`fewshot.episodic.baseline_pp`) is
the proof that a new method is its module plus its row.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from fewshot.method_rows import METHODS, Method


def row(name: str) -> Method:
  """The row of method ``name`` (one of :data:`fewshot.method_rows.METHODS`)."""
  return METHODS[name]


def get(name: str) -> ModuleType:
  """The module of method ``name``'s steps."""
  return importlib.import_module(METHODS[name].steps)


def learner(name: str):
  """Method ``name``'s ``(config, head, backbone) -> learner``."""
  module, _, function = METHODS[name].learner.partition(":")
  return getattr(importlib.import_module(module), function)
