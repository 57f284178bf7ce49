"""Metric-learning training: ``python -m fewshot.dml.train --dataset cars196 --loss triplet --miner semi_hard``.

The reality check's protocol (SPEC §7): the training classes are cut into 4
class-disjoint folds; each fold model trains on 3 of them and is validated (P@1,
R-Precision, MAP@R) on the 4th every epoch, keeping its best checkpoint by validation
MAP@R. The best checkpoints are then tested on the test classes, each model alone
("separated") and, with ``--folds 4``, the 4 models' L2-normalised embeddings
concatenated and re-normalised ("concatenated"). ``--folds 1`` trains fold model 0
only, or, where the dataset has a 'val' split (strokes, omniglot, mini_imagenet),
trains on all of 'train' and validates on 'val'.

Folds are contiguous blocks of the training split's class order (its labels, the
dataset's default order) under ``--class_order default``; under ``--class_order random``
the split's classes are first permuted by ``--split_seed`` (the split holds its classes
sorted, so without this the folds would keep the default order's related classes together).

Run directory (``--folds 1``: the fold's files are at the top)::

  <workdir>/config.json                 the resolved configuration (+ image_shape)
  <workdir>/results.json                test metrics of the best checkpoint(s)
  <workdir>/fold<k>/metrics.jsonl       one row per epoch: loss, validation metrics, seconds
  <workdir>/fold<k>/checkpoints/{last,best}
"""

from __future__ import annotations

import functools

import numpy as np
from absl import flags, logging

from fewshot import backbones, cli, data, distances, loop, options, sources, stats
from fewshot import rundir as rundirs
from fewshot.augment import Augmentation
from fewshot.data import Split, holdout
from fewshot.dml import embedding
from fewshot.dml.config import DMLConfig
from fewshot.dml.embedding import Embedder, MetricLearner
from fewshot.dml.metrics import retrieval_metrics
from fewshot.dml.samplers import BatchShape
from fewshot.rundir import RunDir
from fewshot.train_state import adam_by_part, fold_keys

RECALL_AT = (1, 2, 4, 8)
REPORTED = ("precision_at_1", "r_precision", "map_at_r")


def define_flags() -> None:
  """Define the command-line flags (only when run as a program, so importing this module defines none)."""
  options.define_flags(DMLConfig)
  options.define_run_flags("runs/dml_<dataset>_<backbone>_<loss>_seed<seed>")


FLAGS = flags.FLAGS


def fold_splits(config: DMLConfig, splits: dict[str, Split]) -> list[tuple[Split, Split]]:
  """(training, validation) split of each fold model that this run trains."""
  if config.folds == 1 and "val" in splits:
    return [(splits["train"], splits["val"])]
  return [holdout.class_fold(splits["train"], k, holdout.NUM_FOLDS, config.class_order, config.split_seed)
          for k in range(config.folds)]


def load_data(config: DMLConfig) -> tuple[list[tuple[Split, Split]], Split]:
  splits = data.load_splits(config.dataset, config.data_dir, config.tfds_dir, image_size=config.image_size,
                            protocol=config.protocol, class_order=config.class_order, seed=config.split_seed)
  folds = fold_splits(config, splits)
  for k, (train, _) in enumerate(folds):
    sources.check_fits(train, "training" if len(folds) == 1 else f"fold {k} training", ("--classes", config.classes))
  return folds, splits["test"]


def retrieval(embeddings: np.ndarray, labels: np.ndarray) -> dict:
  """Retrieval metrics of a split against itself, the query left out of its own list; NaN as null."""
  recall_at = tuple(k for k in RECALL_AT if k < len(labels))
  m = retrieval_metrics(embeddings, labels, embeddings, labels, ref_includes_query=True, recall_at=recall_at)
  return {name: stats.finite_or_none(v) if isinstance(v, float) else v for name, v in m.as_dict().items()}


def _mean(values: list) -> float | None:
  return None if any(v is None for v in values) else float(np.mean(values))


class Trainer:
  """One run's config, data, and a learner per number of training classes (so folds share compiles); ``run`` trains.

  ``placement`` (see :func:`fewshot.sources.place`) says where training images live;
  validation and test splits are embedded from host memory in chunks either way.
  """

  def __init__(self, config: DMLConfig, progress: bool = True, placement: str = "auto"):
    self.config, self.progress, self.placement = config, progress, placement
    self.folds, self.test = load_data(config)
    self.image_shape = self.test.image_shape
    image = config.dataset in data.IMAGE_DATASETS  # augmented always: the reality check trains with it
    self.augmentation = Augmentation.for_dataset(config.image_size, self.image_shape[-1], image, augment=image)

  @functools.lru_cache(maxsize=None)
  def learner(self, num_classes: int) -> MetricLearner:
    c = self.config
    model = Embedder(backbones.get_backbone(c.backbone), embedding_dim=c.embedding_dim)
    return MetricLearner(model, BatchShape(c.classes, c.per_class), loss=c.loss,
                         miner=None if c.miner == "none" else c.miner, num_classes=num_classes,
                         optimizer=adam_by_part({"model": c.learning_rate, "loss": c.loss_learning_rate}),
                         augmentation=self.augmentation)

  def fold_dir(self, rundir: RunDir, fold: int) -> RunDir:
    return rundir if self.config.folds == 1 else RunDir(rundir.path / f"fold{fold}")

  def initial_state(self, fold: int):
    """Fold model ``fold`` as initialised, before any training (also the structure checkpoints restore into)."""
    learner = self.learner(self.folds[fold][0].num_classes)
    return embedding.init_state(learner, fold_keys(self.config.seed, fold)[0], self.image_shape)

  def embed(self, fold: int, state, split: Split) -> np.ndarray:
    learner = self.learner(self.folds[fold][0].num_classes)
    return embedding.embed_all(learner, embedding.model_variables(state), split.images)

  def train_fold(self, rundir: RunDir, fold: int) -> dict:
    """Train (or finish training) one fold model; returns its best validation row."""
    c, (train, val_split) = self.config, self.folds[fold]
    learner, train_key = self.learner(train.num_classes), fold_keys(self.config.seed, fold)[1]
    source = sources.place(train, self.placement)

    def make_row(state, losses):
      val = retrieval(self.embed(fold, state, val_split), val_split.labels)
      return {"epoch": int(state.step) // c.steps_per_epoch, "step": int(state.step),
              "loss": stats.finite_or_none(float(np.mean(losses))), **{f"val_{name}": val[name] for name in REPORTED}}

    schedule = loop.Schedule(c.epochs * c.steps_per_epoch, c.steps_per_epoch, best_by="val_map_at_r")
    _, (best,) = loop.train_until(
        loop.Runs((self.fold_dir(rundir, fold),)), self.initial_state(fold), schedule,
        lambda state, steps: embedding.train_chunk(learner, state, source, train_key, steps),
        lambda state, losses: [make_row(state, losses)],
        lambda row, best: dict(loss=row["loss"], val_map_at_r=row["val_map_at_r"]),
        progress=self.progress, desc=c.loss if c.folds == 1 else f"{c.loss} fold {fold}")
    return best

  def best_test_embedding(self, rundir: RunDir, fold: int) -> np.ndarray:
    state = self.fold_dir(rundir, fold).restore_checkpoint("best", self.initial_state(fold))
    return self.embed(fold, state, self.test)

  def run(self, rundir: RunDir) -> dict:
    c = self.config
    if not rundir.holds_run():
      rundir.write_config({**c.to_dict(), "image_shape": list(self.image_shape)})
    bests = [self.train_fold(rundir, fold) for fold in range(len(self.folds))]
    embeddings = [self.best_test_embedding(rundir, fold) for fold in range(len(self.folds))]
    separated = [{"fold": k, "best_epoch": best["epoch"], "best_val_map_at_r": best["val_map_at_r"],
                  "dim": int(e.shape[1]), "test": retrieval(e, self.test.labels)}
                 for k, (best, e) in enumerate(zip(bests, embeddings))]
    results = {"dataset": c.dataset, "loss": c.loss, "miner": c.miner, "folds": c.folds,
               "test_classes": self.test.num_classes, "test_images": len(self.test.labels), "separated": separated,
               "separated_mean": {name: _mean([s["test"][name] for s in separated]) for name in REPORTED}}
    if c.folds > 1:
      # Each model's embedding is unit-length; their concatenation is re-normalised (the reality check's 512-d).
      concatenated = distances.l2_normalize(np.concatenate(embeddings, axis=1))
      results["concatenated"] = {"dim": int(concatenated.shape[1]), "test": retrieval(concatenated, self.test.labels)}
    results["workdir"] = str(rundir.path)
    rundir.write_results(results)
    return results


def train(config: DMLConfig, workdir: str, resume: bool = False, progress: bool = True,
          placement: str = "auto") -> dict:
  """Train, validate and test one configuration; returns the results written to results.json."""
  rundir = rundirs.open_for_training(workdir, config, resume)
  return Trainer(config, progress, placement).run(rundir)  # Trainer fails on bad data before anything is written


def format_results(config: DMLConfig, results: dict) -> str:
  def metrics(m):
    return ", ".join(f"{name} " + ("n/a" if m[name] is None else f"{100 * m[name]:.2f}") for name in REPORTED)

  lines = [f"{config.dataset} {config.loss} ({results['test_classes']} test classes): test retrieval, %"]
  for s in results["separated"]:
    lines.append(f"  fold {s['fold']} ({s['dim']}-d, best epoch {s['best_epoch']}): {metrics(s['test'])}")
  if "concatenated" in results:
    lines.append(f"  separated mean: {metrics(results['separated_mean'])}")
    lines.append(f"  concatenated ({results['concatenated']['dim']}-d): {metrics(results['concatenated']['test'])}")
  return "\n".join(lines)


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  config = options.from_flags(DMLConfig)
  results = train(config, FLAGS.workdir or f"runs/{config.run_name}", resume=FLAGS.resume, placement=FLAGS.placement)
  print(format_results(config, results))
  print(f"run directory: {results['workdir']}")


if __name__ == "__main__":
  define_flags()
  cli.run(main)
