"""Episodic training: ``python -m fewshot.train --way 5 --shot 1 --head dr``.

Trains a backbone with a few-shot head, validates every ``--eval_every`` episodes,
keeps the best checkpoint by validation accuracy, and ends with the test accuracy of
that checkpoint over ``--test_episodes`` episodes (mean ± 95% interval).

``--seeds 0-7`` trains the configuration under several seeds as one seed group
(:mod:`fewshot.training.seed_groups`): one compiled program, the runs sharded over the devices, each
run written to its own directory exactly as a single run is. It prints each run's results, then one line: the
group's test accuracy as mean ± 95% Student-t interval across its seeds.

JAX, Flax and the data loaders are imported inside the functions that train, so the command
checks its flags, configuration and run directory in about a second before loading them.
"""

from __future__ import annotations

import sys

from fewshot import choices, options, runner
from fewshot.analysis import tables
from fewshot.config import Config
from fewshot.errors import ConfigError
from fewshot.training import compilation_cache, run_flags
from fewshot.training.runs import Runs


def define_flags() -> None:
  """Define the command-line flags (only when run as a program, so importing this module defines none)."""
  options.define_flags(Config)
  run_flags.define_run_flags("runs/<dataset>_<backbone>_<model>_<way>w<shot>s_seed<seed>")


def train(config: Config, workdir: str, resume: bool = False, progress: bool = True, placement: str = "auto", *,
          head=None, backbone=None) -> dict:
  """Train, validate and test one configuration; returns the results written to results.json.

  ``head`` (a :class:`fewshot.heads.Head` value) and ``backbone`` (a flax module, images ``[n, H, W, C]`` to
  embeddings ``[n, D]``) replace the configuration's; the run records them as ``custom:<name>``
  (:func:`fewshot.episodic.learners.with_values`), and ``fewshot.load`` takes them again.
  """
  return _train(config, None, [workdir], resume, progress, placement, head, backbone)[0]


def train_group(config: Config, seeds: tuple[int, ...], workdirs: list[str], resume: bool = False,
                progress: bool = True, placement: str = "auto", *, head=None, backbone=None) -> list[dict | None]:
  """Train ``config`` under each of ``seeds`` as one seed group, run ``k`` in ``workdirs[k]``; returns each
  run's results, in the order of ``seeds`` (None for a run another host holds). ``head``, ``backbone``: see
  :func:`train`.
  """
  if len(seeds) != len(workdirs):
    raise ConfigError(f"a group of {len(seeds)} seeds needs as many run directories, got {len(workdirs)}.")
  return _train(config, tuple(seeds), workdirs, resume, progress, placement, head, backbone)


def _train(config: Config, seeds: tuple[int, ...] | None, workdirs: list[str], resume: bool, progress: bool,
           placement: str, head=None, backbone=None) -> list[dict | None]:
  choices.require_values(config, {"head": head, "backbone": backbone},
                         "pass it to fewshot.train.train(config, workdir, {kind}=...), or choose a built-in --{kind}.")
  if head is not None or backbone is not None:
    from fewshot.episodic.learners import with_values  # JAX: only for values passed from Python

    config = with_values(config, head, backbone)
  runs = Runs.open(config, seeds, workdirs, resume, checkpoint_every=config.eval_every)
  completed = runs.completed() if resume else None
  if completed is not None:  # nothing to train or test: said, not silently tested again
    if progress:
      which = workdirs[0] if len(workdirs) == 1 else f"the group's {len(workdirs)} runs"
      print(f"{which}: trained to --episodes {config.episodes} and tested already; its results follow (raise "
            "--episodes with --resume to train further, and --patience where it stopped early, python -m fewshot.evaluate to test again).", file=sys.stderr)
    return completed
  from fewshot.episodic.experiment import Experiment  # the training machinery: once the options and directories passed
  from fewshot.training import trainer

  compilation_cache.enable()
  # Fails on bad data, or a backbone or head returning the wrong shapes, and writes nothing.
  experiment = Experiment.build(config, placement=placement, seeds=seeds, head=head, backbone=backbone,
                                progress=progress)
  return trainer.train_runs(experiment, runs, progress)


def format_results(config: Config, results: dict) -> str:
  return (
      f"{results['model']} {config.dataset} {config.test_way}-way {config.shot}-shot: test accuracy "
      f"{results['test_accuracy']:.2f}% ± {results['test_ci95']:.2f}% ({results['test_episodes']} episodes, "
      f"best checkpoint at episode {results['best_episode']}"
      f"{'; tested on the validation classes, the data holding no others' if results.get('tested_on') == 'val' else ''})"
  )


def format_group(config: Config, seeds: tuple[int, ...], results: list[dict]) -> str:
  """The line after a seed group's results: its test accuracy's mean ± 95% t-interval across the seeds."""
  return tables.group_line(seeds, len(results), {"test accuracy": [r.get("test_accuracy") for r in results]})


def main(argv):
  del argv
  run_flags.train_from_flags(Config, train, train_group, format_results, format_group)


if __name__ == "__main__":
  define_flags()
  runner.run(main)
