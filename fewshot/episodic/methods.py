"""The episodic methods, one row each: what the experiment, ``fewshot.load`` and evaluation call for a run's method.

A method is a module of pure functions of a frozen learner (static under ``jax.jit``), all on the same stages
(sources, the compiled chunk, the checkpoint loop, the run records):

* ``init_state(learner, key, input_shape) -> TrainState`` and ``check_shapes(learner, input_shape)``;
* ``train_chunk(learner, state, source, key, episodes) -> (state, metrics, diagnosed)``: its compiled chunk of
  episodes, per-episode ``{"loss", "accuracy"}``, and the update diagnostics of the chunk's last episode (``{}``
  for a method that records none);
* ``episode_accuracies(learner, variables, source, key, episodes, shape, shifts)``: per-episode query accuracy
  (``shifts``: ``--test_shifts``, the test's argument);
* ``lowered_step(learner, input_shape, stored_shape)``: one step lowered, for a seed group's memory check;
* ``model_variables(state)`` and ``DIAGNOSES``: whether its rows carry the diagnostics;
* ``RUN_FIX``: what a single run too large for the memory is told to change (None: a single run is not checked),
  and ``DIVERGED_FIX``: what a run whose loss diverged is told to change.

ProtoNet's heads (:mod:`fewshot.episodic.learning`) are the ``protonet`` row; MAML and ANIL
(:mod:`fewshot.episodic.maml`) are two rows of one module. A new method is its module plus a row here and its
learner's options in :func:`fewshot.episodic.learners.build_learner`.
"""

from __future__ import annotations

from types import ModuleType

from fewshot.choices import METHODS
from fewshot.episodic import learning, maml

MODULES: dict[str, ModuleType] = {"protonet": learning, "maml": maml, "anil": maml}
assert tuple(MODULES) == METHODS  # the light names of fewshot.choices (the command line's) are these rows


def get(name: str) -> ModuleType:
  """The module of method ``name`` (one of :data:`fewshot.choices.METHODS`)."""
  return MODULES[name]
