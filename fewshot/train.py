"""Episodic training: ``python -m fewshot.train --way 5 --shot 1 --head dr``.

Trains a backbone with a few-shot head, validates every ``--eval_every`` episodes,
keeps the best checkpoint by validation accuracy, and ends with the test accuracy of
that checkpoint over ``--test_episodes`` episodes (mean ± 95% interval).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from absl import flags, logging

from fewshot import backbones, cli, data, episodic, loop, sources, stats
from fewshot import rundir as rundirs
from fewshot.config import Config
from fewshot.experiment import Experiment
from fewshot.train_state import TrainState


def define_flags() -> None:
  """Define the command-line flags (only when run as a program, so importing this module defines none)."""
  flags.DEFINE_string("dataset", "strokes", f"one of {', '.join(data.DATASETS)}")
  flags.DEFINE_string("data_dir", None, "folder with the dataset's files (omniglot: its zips or extracted folders)")
  flags.DEFINE_string("tfds_dir", None, "where prepared datasets live (default $TFDS_DATA_DIR or ~/tensorflow_datasets)")
  flags.DEFINE_string("backbone", "conv4", f"one of {', '.join(backbones.BACKBONES)}")
  flags.DEFINE_string("head", "softmax", "softmax (logits -d^2) or dr (distance ratio, logits -theta log d)")
  flags.DEFINE_string("classifier", "proto", "proto (distance to the class mean) or nn (to the nearest support point)")
  flags.DEFINE_integer("way", 5, "classes per episode")
  flags.DEFINE_integer("shot", 1, "support images per class")
  flags.DEFINE_integer("query", 16, "query images per class in training and validation episodes")
  flags.DEFINE_integer("test_query", 15, "query images per class in test episodes (15 in the reference protocol)")
  flags.DEFINE_integer("episodes", None, "training episodes (default: the paper's 60,000/50,000, or 2,000 on small datasets)")
  flags.DEFINE_integer("eval_every", 100, "episodes between checkpoints (validation, metrics row, checkpoint)")
  flags.DEFINE_integer("val_episodes", 100, "validation episodes per checkpoint")
  flags.DEFINE_integer("test_episodes", 600, "test episodes for the final accuracy")
  flags.DEFINE_float("learning_rate", 1e-3, "Adam learning rate")
  flags.DEFINE_string("centring", "points", "centring of the diagnostics: points (the paper) or features (the reference code)")
  flags.DEFINE_string("psi_classifier", "model", "class distance of the diagnostics' psi: model (the paper) or proto (the reference code)")
  flags.DEFINE_integer("seed", 0, "seed of initialisation and of every episode")
  flags.DEFINE_integer("image_size", None, "the backbone's input side (default 28 on strokes/omniglot, else 84 with "
                       "conv4, 224 with resnet18); image datasets are stored at int(1.15*size)")
  flags.DEFINE_string("protocol", None, "class splits of cub, mini_imagenet, cars196, sop: fewshot (train/val/test) or "
                      "dml (train/test halves; val holds out every 4th training class); of omniglot: default (60/20/20), "
                      "vinyals (1028/172/423 in a --split_seed order) or background_evaluation (Lake's alphabets; "
                      "val held out as under dml); default the dataset's")
  flags.DEFINE_string("class_order", "default", "default, or random: classes permuted by --split_seed before splitting")
  flags.DEFINE_integer("split_seed", 0, "seed of --class_order random")
  flags.DEFINE_bool("rotations", False, "omniglot: each character at 0/90/180/270 degrees, four classes (Vinyals et al.)")
  flags.DEFINE_bool("bbox_crop", False, "crop images to their bounding boxes before resizing (cub, cars196)")
  flags.DEFINE_bool("augment", None, "the paper's training augmentation on the device (default: on for the "
                    "image datasets, off for strokes/omniglot)")
  flags.DEFINE_enum("placement", "auto", sources.PLACEMENTS, "where split images live: on the device, streamed "
                    "from host memory, or auto (on the device when a split fits 4 GiB); the episodes are the same")
  flags.DEFINE_string("workdir", None, "run directory (default runs/<dataset>_<backbone>_<model>_<way>w<shot>s_seed<seed>)")
  flags.DEFINE_bool("resume", False, "continue the run in --workdir from its last checkpoint")


FLAGS = flags.FLAGS


def _theta(state: TrainState) -> float:
  return float(np.exp(np.asarray(state.params["rho"])))


def train(config: Config, workdir: str, resume: bool = False, progress: bool = True, placement: str = "auto") -> dict:
  """Train, validate and test one configuration; returns the results written to results.json."""
  rundir = rundirs.open_for_training(workdir, config, resume)
  experiment = Experiment.build(config, placement=placement)  # fails on bad data before anything is written
  if rundir.checkpoint_step("last") is None:
    rundir.write_config({**config.to_dict(), "image_shape": list(experiment.image_shape)})

  def train_chunk(state, episodes):
    state, metrics, diagnosed = episodic.train_chunk(experiment.learner, state, experiment.sources["train"],
                                                     experiment.keys["train"], episodes)
    return state, (metrics, diagnosed)

  def make_row(state, outputs):
    train_metrics, diagnosed = outputs
    val = 100.0 * experiment.accuracies(state, "val", config.val_episodes)
    return {
        "episode": int(state.step),
        "train_loss": float(np.mean(train_metrics["loss"])),
        "train_accuracy": float(100.0 * np.mean(train_metrics["accuracy"])),
        "theta": _theta(state),
        "val_accuracy": float(val.mean()),
        "val_ci95": stats.mean_confidence_interval(val)[1],
        # Undefined diagnostics (e.g. an update that did not move the embedding) are
        # recorded as null: JSON has no NaN.
        **{name: stats.finite_or_none(float(value)) for name, value in diagnosed.items()},
    }

  def postfix(row, best):
    return dict(loss=f"{row['train_loss']:.3f}", val=f"{row['val_accuracy']:.2f}%", best=f"{best['val_accuracy']:.2f}%")

  schedule = loop.Schedule(config.episodes, config.eval_every, best_by="val_accuracy", step_key="episode")
  _, best = loop.train_until(rundir, experiment.init_state(), schedule, train_chunk, make_row, postfix,
                             progress=progress, desc=config.model_name, unit="ep")
  results = experiment.test(rundir.restore_checkpoint("best", experiment.init_state()))
  results.update(best_episode=best["episode"], best_val_accuracy=best["val_accuracy"], workdir=str(rundir.path))
  rundir.write_results(results)
  return results


def format_results(config: Config, results: dict) -> str:
  return (
      f"{results['model']} {config.dataset} {config.way}-way {config.shot}-shot: test accuracy "
      f"{results['test_accuracy']:.2f}% ± {results['test_ci95']:.2f}% ({results['test_episodes']} episodes, "
      f"best checkpoint at episode {results['best_episode']})"
  )


def config_from_flags() -> Config:
  names = [f.name for f in dataclasses.fields(Config)]
  return Config(**{name: FLAGS[name].value for name in names})


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  config = config_from_flags()
  workdir = FLAGS.workdir or f"runs/{config.run_name}"
  results = train(config, workdir, resume=FLAGS.resume, placement=FLAGS.placement)
  print(format_results(config, results))
  print(f"run directory: {results['workdir']}")


if __name__ == "__main__":
  define_flags()
  cli.run(main)
