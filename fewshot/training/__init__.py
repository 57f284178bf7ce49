"""What both methods stand on: the train state, the draws, where a split lives, the compiled chunk, the loop, and
the one orchestration above it.

* :mod:`~fewshot.training.train_state`: ``TrainState`` (step, parameters, BatchNorm statistics, optimiser state),
  the run's keys, the paper's Adam;
* :mod:`~fewshot.training.class_draws`: which classes, and which images of each, a step draws from a split;
* :mod:`~fewshot.training.sources`: where a split's images live while training (on the device, or streamed from
  host memory in blocks), behind one interface;
* :mod:`~fewshot.training.loop`: the checkpoint loop (train a chunk, validate, write a row, checkpoint, resume);
* :mod:`~fewshot.training.chunks`: the compiled chunk, one driver for both experiments' step functions (one run, or a
  seed group vmapped over its run axis);
* :mod:`~fewshot.training.split_embedding`: a whole split embedded in padded batches (evaluation);
* :mod:`~fewshot.training.runs`: the runs one training call writes: opened, recorded, restored, finished;
* :mod:`~fewshot.training.trainer`: ``train_runs(experiment, runs)``, what both training commands do with a
  method's experiment (the interface a method implements: ``trainer.Experiment``);
* :mod:`~fewshot.training.seed_groups`: runs of one configuration under several seeds as one compiled program,
  their run axis sharded over the devices;
* :mod:`~fewshot.training.run_flags`: what both training commands share: where a run goes (``--workdir``,
  ``--resume``, ``--seeds``, ``--config``, a launch's hosts) and their ``main``, one run or a seed group;
* :mod:`~fewshot.training.distributed`: several processes (hosts) training one seed group;
* :mod:`~fewshot.training.peers`: a process of several that stops (killed, interrupted, failed) stops the
  others, each with one line;
* :mod:`~fewshot.training.compilation_cache`: JAX's persistent compilation cache, on by default;
* :mod:`~fewshot.training.progress`: where a run stands while it trains (a bar on a terminal, a line per checkpoint
  in a log);
* :mod:`~fewshot.training.provenance`: the versions, commit and devices a run trains on, and how its data was split.

Imports JAX, :mod:`fewshot.records` and :mod:`fewshot.data`; never :mod:`fewshot.episodic` or :mod:`fewshot.dml`,
which stand on it. Nothing is re-exported here, so that the light modules (``distributed``'s flag checks, ``peers``,
``compilation_cache``) import without JAX.

May import: kernel, data, records (docs/architecture.md, "Layers").
"""
