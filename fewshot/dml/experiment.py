"""A metric-learning configuration built into what training and evaluation run on (folds, learners, placement), and
the method's side of the one orchestration, :mod:`fewshot.training.trainer`: its fold models' chunks, rows and test.

The reality check's protocol (Musgrave et al. 2020, "A Metric Learning Reality Check", Sec. 4; docs/protocol.md):
the training classes are cut into 4 class-disjoint folds and each fold model trains on three of them and is
validated on the fourth; ``--folds 1`` trains fold model 0 only, or, where the dataset has a ``val`` split, trains
on all of ``train`` and validates on ``val``.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from fewshot import backbones, convolutions, data
from fewshot.analysis import stats
from fewshot.augment.augmentation import Augmentation
from fewshot.data import Split, holdout
from fewshot.data.catalog import fits_on_device
from fewshot.dml import embedding, evaluators
from fewshot.dml.config import DMLConfig
from fewshot.dml.embedding import Embedder, MetricLearner
from fewshot.dml.evaluators import REPORTED, retrieval
from fewshot.dml.losses import Loss, get_loss
from fewshot.dml.samplers import BatchShape
from fewshot.errors import ConfigError
from fewshot.training import class_draws, loop, seed_groups, sources
from fewshot.training.provenance import data_record
from fewshot.training.train_state import adam_by_part, fold_keys


def fold_splits(config: DMLConfig, splits: dict[str, Split]) -> list[tuple[Split, Split]]:
  """(training, validation) split of each fold model that this run trains."""
  if config.folds == 1 and "val" in splits:
    return [(splits["train"], splits["val"])]
  return [holdout.class_fold(splits["train"], k, holdout.NUM_FOLDS, config.class_order, config.split_seed)
          for k in range(config.folds)]


def load_data(config: DMLConfig) -> tuple[list[tuple[Split, Split]], Split, dict[str, Split]]:
  """Each fold model's (training, validation) splits, the test split, and the dataset's splits they come from."""
  splits = data.load_splits(config.dataset, config.data_dir, config.tfds_dir, image_size=config.image_size,
                            class_splits=config.class_splits, class_order=config.class_order, seed=config.split_seed)
  folds = fold_splits(config, splits)
  for k, (train, _) in enumerate(folds):
    drawn = ("--classes", config.classes) if config.class_pool is None else ("--class_pool", config.class_pool)
    class_draws.check_fits(train, "training" if len(folds) == 1 else f"fold {k} training", drawn)
  return folds, splits["test"], splits


def _data_mesh(config: DMLConfig, data_parallel: bool | None, group: bool) -> Mesh | None:
  """The devices a batch is sharded over: all of them when several are present (or asked for), None otherwise.

  A seed group shards its runs instead, one run's batch per device.
  """
  devices = jax.devices()
  if group or data_parallel is False or (data_parallel is None and len(devices) == 1):
    return None
  if config.classes * config.per_class % len(devices):
    raise ConfigError(f"a batch of --classes {config.classes} x --per_class {config.per_class} images does not "
                      f"divide over {len(devices)} devices; choose a batch size that is a multiple of {len(devices)} "
                      "or pass --nodata_parallel.")
  return Mesh(np.array(devices), ("data",))


class Experiment:
  """Everything a metric-learning configuration builds before training (writes nothing): the fold models' splits
  and the test split, the augmentation, a learner per number of training classes (so folds share compiles), and,
  with ``seeds``, the seed group's layout on the devices (:mod:`fewshot.training.seed_groups`).

  ``placement`` (see :func:`fewshot.training.sources.place`) says where training images live; validation and test
  splits are embedded from host memory in batches either way. ``loss`` is a user's
  :class:`~fewshot.dml.losses.Loss`, which ``config.loss`` records as ``custom:<name>``.
  """

  def __init__(self, config: DMLConfig, placement: str = "auto", seeds: tuple[int, ...] | None = None,
               data_parallel: bool | None = None, loss: Loss | None = None):
    self.loss = get_loss(config.loss if loss is None else loss)
    config = config if loss is None else dataclasses.replace(config, loss=self.loss.label)  # what the run records
    self.config, self.placement = config, placement
    self._learners: dict[int, MetricLearner] = {}
    self.folds, self.test, splits = load_data(config)
    # How the dataset was split, and the files it was (and was not) read from: what config.json records.
    self.data = data_record(splits, config.data_dir, *data.files(config.dataset, config.data_dir))
    self.stored_shape = self.test.image_shape  # the images as stored: the learners transform them for the model
    image = config.dataset in data.IMAGE_DATASETS  # augmented always: the reality check trains with it
    self.augmentation = Augmentation.for_dataset(config.image_size, self.stored_shape[-1], image, augment=image)
    self.data_mesh = _data_mesh(config, data_parallel, seeds is not None)
    # Before anything is written: a group, or a run's batch, too large for the memory is refused.
    resident = [train.images.nbytes for train, _ in self.folds if fits_on_device(train.images.nbytes)]
    self.group, self.seeds = seed_groups.form(
        seeds, config.seed, lambda: embedding.lowered_step(self.fold_learner(0), self.stored_shape),
        max(resident, default=0), run_fix=f"use a smaller batch than --classes {config.classes} x --per_class "
                                          f"{config.per_class}")
    self.models = tuple(None if config.folds == 1 else f"fold{k}" for k in range(len(self.folds)))

  @property
  def input_shape(self) -> tuple[int, ...]:
    """What the backbone sees: the stored images after the evaluation transform (what ``config.json`` records)."""
    return jax.eval_shape(self.augmentation.eval, jax.ShapeDtypeStruct((1, *self.stored_shape), np.uint8)).shape[1:]

  @property
  def computation(self) -> dict:
    """How the backbone computes where ``--conv auto`` left it to the backend (what ``config.json`` records)."""
    return convolutions.used(self.fold_learner(0).embedder.backbone)

  def learner(self, num_classes: int) -> MetricLearner:
    """The learner of a fold with ``num_classes`` training classes: one per count, so that folds share compiles
    (kept by the experiment: a cache on the method would keep every experiment, and its images, alive).
    """
    if num_classes in self._learners:
      return self._learners[num_classes]
    c = self.config
    embedder = Embedder(backbones.get_backbone(c.backbone, c.conv), embedding_dim=c.embedding_dim)
    sharding = None if self.data_mesh is None else NamedSharding(self.data_mesh, PartitionSpec("data"))
    self._learners[num_classes] = MetricLearner(
        embedder, BatchShape(c.classes, c.per_class), loss=self.loss, miner=None if c.miner == "none" else c.miner,
        class_pool=c.class_pool,
        num_classes=num_classes, optimizer=adam_by_part({"model": c.learning_rate, "loss": c.loss_learning_rate}),
        augmentation=self.augmentation, batch_sharding=sharding, precision=c.precision)
    return self._learners[num_classes]

  def fold_learner(self, fold: int) -> MetricLearner:
    return self.learner(self.folds[fold][0].num_classes)

  def stack(self, per_run: list):
    """One run's value (replicated over the devices when data parallel), or the group's stacked over its run axis."""
    if self.group is not None:
      return self.group.stack(per_run)
    if self.data_mesh is None:
      return per_run[0]
    return jax.device_put(per_run[0], NamedSharding(self.data_mesh, PartitionSpec()))

  def initial_state(self, fold: int):
    """Fold model ``fold`` as initialised, before any training (also the structure checkpoints restore into)."""
    learner = self.fold_learner(fold)
    return self.stack([embedding.init_state(learner, fold_keys(s, fold)[0], self.stored_shape) for s in self.seeds])

  def train_keys(self, fold: int):
    return self.stack([fold_keys(s, fold)[1] for s in self.seeds])

  def train_source(self, fold: int):
    """Fold model ``fold``'s training split, placed where ``placement`` says (a copy on each device of a group)."""
    train = self.folds[fold][0]
    if self.group is not None:
      return sources.place(train, self.placement, device=self.group.replicated, run_sharding=self.group.runs)
    replicated = None if self.data_mesh is None else NamedSharding(self.data_mesh, PartitionSpec())
    return sources.place(train, self.placement, device=replicated)

  # ---- the method's side of fewshot.training.trainer.Experiment (its models: the fold models) ---------------------
  @property
  def name(self) -> str:
    return self.config.loss

  @property
  def tested_on(self) -> str:
    return f"{self.test.num_classes} test classes"

  def check(self) -> None:
    if self.config.custom_loss:  # a user's loss is traced once before anything is written (the registered ones are tested)
      embedding.check_loss(self.fold_learner(0), self.stored_shape)

  def checkpointing(self) -> loop.Checkpointing:
    c = self.config
    return loop.Checkpointing(c.epochs * c.steps_per_epoch, c.steps_per_epoch, best_by="val_map_at_r")

  def train_chunk(self, fold: int, state, steps: int):
    return embedding.train_chunk(self.fold_learner(fold), state, self.train_source(fold), self.train_keys(fold), steps)

  def rows(self, fold: int, state, losses, written: tuple[int, ...]) -> list[dict]:
    step, val_split = seed_groups.local_step(state.step), self.folds[fold][1]
    rows = []
    for run_losses, run_embedded in zip(seed_groups.each_run(losses, self.group, written),
                                        self.embed(fold, state, val_split, written)):
      # Embeddings that are not finite: the run diverged, and its null loss stops it (the loop's one rule for it).
      diverged = not np.isfinite(run_embedded).all()
      val = dict.fromkeys(REPORTED) if diverged else retrieval(run_embedded, val_split.labels)
      rows.append({"epoch": step // self.config.steps_per_epoch, "step": step,
                   "loss": None if diverged else stats.finite_or_none(float(np.mean(run_losses))),
                   **{f"val_{name}": val[name] for name in REPORTED}})
    return rows

  def progress_fields(self, row: dict, best: dict) -> dict:
    return dict(loss=f"{row['loss']:.4f}", val_map_at_r=_percent(row["val_map_at_r"]), best=_percent(best["val_map_at_r"]))

  def results(self, best_states: list, best_rows: list[list[dict]], written: tuple[int, ...]) -> list[dict]:
    tested = self.evaluator("retrieval", written=written).run(best_states)
    return [results(self.config, self.test, [rows[i] for rows in best_rows], run) for i, run in enumerate(tested)]

  def evaluator(self, name: str, **options):
    """The evaluator ``name`` of :mod:`fewshot.dml.evaluators` over this experiment (``retrieval``, ``episodes``)."""
    return {"retrieval": evaluators.Retrieval, "episodes": evaluators.Episodes}[name](self, **options)

  def embed(self, fold: int, state, split: Split, runs: tuple[int, ...] = (0,)) -> list[np.ndarray]:
    """Each of ``runs``' (positions on the run axis: this process's) embeddings of ``split`` by fold model ``fold``."""
    embedded = embedding.embed_split(self.fold_learner(fold), embedding.model_variables(state), split.images,
                                     runs=None if self.group is None else runs)
    return [embedded] if self.group is None else list(embedded)


def results(c: DMLConfig, test: Split, bests: list[dict], tested: dict) -> dict:
  """One run's results from each fold model's best validation row and the ``retrieval`` evaluator's test."""
  separated = [{"fold": s["fold"], "best_epoch": best["epoch"], "best_val_map_at_r": best["val_map_at_r"],
                "dim": s["dim"], "test": s["test"]} for best, s in zip(bests, tested["separated"])]
  out = {"dataset": c.dataset, "loss": c.loss, "miner": c.miner, "folds": c.folds,
         "test_classes": test.num_classes, "test_images": len(test.labels), "separated": separated,
         "separated_mean": {name: _mean([s["test"][name] for s in separated]) for name in REPORTED}}
  if "concatenated" in tested:
    out["concatenated"] = tested["concatenated"]
  return out


def _percent(fraction: float | None) -> str:
  """A retrieval metric as the progress bar shows it: a percentage."""
  return "n/a" if fraction is None else f"{100 * fraction:.2f}%"


def _mean(values: list) -> float | None:
  return None if any(v is None for v in values) else float(np.mean(values))
