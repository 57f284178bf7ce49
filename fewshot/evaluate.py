"""Re-test the best checkpoint of a run: ``python -m fewshot.evaluate --workdir runs/<name>``.

Uses the run's own configuration and test key, so it reproduces the accuracy the run
reported; ``--test_episodes`` or ``--seed`` draw a different set of test episodes.
"""

from __future__ import annotations

import dataclasses

from absl import flags, logging

from fewshot import cli
from fewshot.config import Config
from fewshot.errors import RunDirError
from fewshot.experiment import Experiment
from fewshot.rundir import existing_run


def define_flags() -> None:
  """Define the command-line flags (only when run as a program, so importing this module defines none)."""
  flags.DEFINE_string("workdir", None, "run directory written by python -m fewshot.train", required=True)
  flags.DEFINE_integer("test_episodes", None, "test episodes (default: the run's)")
  flags.DEFINE_integer("test_query", None, "query images per class (default: the run's)")
  flags.DEFINE_integer("seed", None, "seed of the test episodes (default: the run's)")
  flags.DEFINE_string("data_dir", None, "the dataset's folder, if it moved since training")
  flags.DEFINE_string("tfds_dir", None, "where prepared datasets live, if not where the run's did "
                      "(a dataset not prepared there yet is prepared there)")
  flags.DEFINE_string("checkpoint", "best", "which checkpoint to test: best or last")


FLAGS = flags.FLAGS


def evaluate(workdir: str, checkpoint: str = "best", **overrides) -> dict:
  """Test accuracy of a run's checkpoint; ``overrides`` replace config fields (None keeps the run's)."""
  rundir = existing_run(workdir)
  if checkpoint not in ("best", "last") or rundir.checkpoint_step(checkpoint) is None:
    raise RunDirError(f"{rundir.path} has no {checkpoint!r} checkpoint; use --checkpoint best or last after training.")
  config = Config.from_dict(rundir.read_config())
  config = dataclasses.replace(config, **{k: v for k, v in overrides.items() if v is not None})
  experiment = Experiment.build(config, splits=("test",))
  results = experiment.test(rundir.restore_checkpoint(checkpoint, experiment.init_state()))
  results.update(checkpoint=checkpoint, checkpoint_episode=rundir.checkpoint_step(checkpoint))
  return results


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  results = evaluate(FLAGS.workdir, FLAGS.checkpoint, test_episodes=FLAGS.test_episodes,
                     test_query=FLAGS.test_query, seed=FLAGS.seed, data_dir=FLAGS.data_dir,
                     tfds_dir=FLAGS.tfds_dir)
  print(f"{results['model']} ({FLAGS.checkpoint} checkpoint, episode {results['checkpoint_episode']}): test accuracy "
        f"{results['test_accuracy']:.2f}% ± {results['test_ci95']:.2f}% ({results['test_episodes']} episodes)")


if __name__ == "__main__":
  define_flags()
  cli.run(main)
