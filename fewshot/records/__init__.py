"""Run directories, the unit of record: configuration, metrics rows, checkpoints, results, written whole.

* :mod:`~fewshot.records.rundir`: one run's directory (``RunDir``) and the rule for reading one (``existing_run``);
* :mod:`~fewshot.records.reuse`: the rule for reusing one (``open_for_training``, a seed group's
  ``open_group_for_training``), where a stopped group resumes (``group_start``);
* :mod:`~fewshot.records.files`: atomic, strict-JSON writes with the user's permissions;
* :mod:`~fewshot.records.checkpoints`: a run's ``last`` and ``best`` checkpoints (orbax, or the local ones);
* :mod:`~fewshot.records.local_checkpoints`: checkpoints a process writes alone (a seed group over several hosts);
* :mod:`~fewshot.records.held_output`: what orbax prints during a save, held until its outcome is known;
* :mod:`~fewshot.records.damage`: a damaged checkpoint told from a bug, in the words of what was read;
* :mod:`~fewshot.records.run_kinds`: the kinds of run, one row each (command, step unit, marks, protocol);
* :mod:`~fewshot.records.reading`: a run's records as analysis reads them;
* :mod:`~fewshot.records.measurements`: the file name of an evaluate measurement (one per set of options);
* :mod:`~fewshot.records.measures`: a tested record's measure (test accuracy, MAP@R, ...), read by its kind's row;
* :mod:`~fewshot.records.writer_lock`: one writer per run directory (a training holds its ``.lock``);
* :mod:`~fewshot.records.events`: the TensorBoard view of the rows.

A rule of this folder (``tests/test_architecture.py``): importing any of it loads no JAX, Flax, orbax or
TensorFlow Datasets. Reading and writing checkpoints imports orbax (or Flax) inside the functions that do it.

May import: kernel (docs/architecture.md, "Layers").
"""
