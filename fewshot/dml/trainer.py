"""The metric-learning trainer behind ``python -m fewshot.dml.train``: data, folds, the fold models' training,
validation and test (:mod:`fewshot.dml.train` is its command line; the protocol is described there).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from fewshot import backbones, data, distances
from fewshot.analysis import stats
from fewshot.augment.augmentation import Augmentation
from fewshot.data import Split, holdout
from fewshot.dml import embedding
from fewshot.dml.config import DMLConfig
from fewshot.dml.embedding import Embedder, MetricLearner
from fewshot.dml.losses import Loss, get_loss
from fewshot.dml.metrics import retrieval_metrics
from fewshot.dml.samplers import BatchShape
from fewshot.errors import ConfigError
from fewshot.records.rundir import RunDir
from fewshot.training import class_draws, distributed, loop, seed_groups, sources
from fewshot.training.train_state import adam_by_part, fold_keys

RECALL_AT = (1, 2, 4, 8)
REPORTED = ("precision_at_1", "r_precision", "map_at_r")


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
    class_draws.check_fits(train, "training" if len(folds) == 1 else f"fold {k} training", ("--classes", config.classes))
  return folds, splits["test"]


def retrieval(embeddings: np.ndarray, labels: np.ndarray) -> dict:
  """Retrieval metrics of a split against itself, the query left out of its own list; NaN as null."""
  recall_at = tuple(k for k in RECALL_AT if k < len(labels))
  m = retrieval_metrics(embeddings, labels, embeddings, labels, ref_includes_query=True, recall_at=recall_at)
  return {name: stats.finite_or_none(v) if isinstance(v, float) else v for name, v in m.as_dict().items()}


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


def _percent(fraction: float | None) -> str:
  """A retrieval metric as the final results print it: a percentage."""
  return "n/a" if fraction is None else f"{100 * fraction:.2f}%"


def _mean(values: list) -> float | None:
  return None if any(v is None for v in values) else float(np.mean(values))


class Trainer:
  """One run's (or seed group's) config, data, and a learner per number of training classes (so folds share
  compiles); ``run`` trains.

  ``placement`` (see :func:`fewshot.training.sources.place`) says where training images live;
  validation and test splits are embedded from host memory in chunks either way. With
  ``seeds``, every fold trains the group's runs as one vmapped program (:mod:`fewshot.training.seed_groups`). ``loss`` is
  a user's :class:`~fewshot.dml.losses.Loss`, which ``config.loss`` records as ``custom:<name>``.
  """

  def __init__(self, config: DMLConfig, progress: bool = True, placement: str = "auto",
               seeds: tuple[int, ...] | None = None, data_parallel: bool | None = None, loss: Loss | None = None):
    self.loss = get_loss(config.loss if loss is None else loss)
    config = config if loss is None else dataclasses.replace(config, loss=self.loss.label)  # what the run records
    self.config, self.progress, self.placement = config, progress, placement
    self.folds, self.test = load_data(config)
    self.image_shape = self.test.image_shape
    image = config.dataset in data.IMAGE_DATASETS  # augmented always: the reality check trains with it
    self.augmentation = Augmentation.for_dataset(config.image_size, self.image_shape[-1], image, augment=image)
    self.group = None if seeds is None else seed_groups.RunPlacement.over(len(seeds))
    if self.group is not None:
      self.group.check_processes()
    self.seeds = (config.seed,) if seeds is None else tuple(self.group.pad(list(seeds)))
    self.indices = (0,) if seeds is None else tuple(self.group.local_runs())
    self.data_mesh = _data_mesh(config, data_parallel, seeds is not None)

  @functools.lru_cache(maxsize=None)
  def learner(self, num_classes: int) -> MetricLearner:
    c = self.config
    model = Embedder(backbones.get_backbone(c.backbone), embedding_dim=c.embedding_dim)
    sharding = None if self.data_mesh is None else NamedSharding(self.data_mesh, PartitionSpec("data"))
    return MetricLearner(model, BatchShape(c.classes, c.per_class), loss=self.loss,
                         miner=None if c.miner == "none" else c.miner, num_classes=num_classes,
                         optimizer=adam_by_part({"model": c.learning_rate, "loss": c.loss_learning_rate}),
                         augmentation=self.augmentation, batch_sharding=sharding)

  def _runs(self, per_run: list):
    """One run's value (replicated over the devices when data parallel), or the group's stacked over its run axis."""
    if self.group is not None:
      return self.group.stack(per_run)
    return per_run[0] if self.data_mesh is None else jax.device_put(per_run[0], NamedSharding(self.data_mesh,
                                                                                               PartitionSpec()))

  def _run_values(self, values) -> list:
    """Each written run's slice of a value with a leading run axis (the value itself for one run)."""
    return [values] if self.group is None else [seed_groups.unstack(values, i) for i in self.indices]

  def _embedded(self, fold: int, state, split: Split) -> list[np.ndarray]:
    """Each written run's embeddings of ``split``."""
    embedded = self.embed(fold, state, split)
    return [embedded] if self.group is None else list(embedded)

  def fold_dir(self, rundir: RunDir, fold: int) -> RunDir:
    return rundir if self.config.folds == 1 else RunDir(rundir.path / f"fold{fold}")

  def initial_state(self, fold: int):
    """Fold model ``fold`` as initialised, before any training (also the structure checkpoints restore into)."""
    learner = self.learner(self.folds[fold][0].num_classes)
    return self._runs([embedding.init_state(learner, fold_keys(s, fold)[0], self.image_shape) for s in self.seeds])

  def embed(self, fold: int, state, split: Split) -> np.ndarray:
    learner = self.learner(self.folds[fold][0].num_classes)
    variables = embedding.model_variables(state)
    return embedding.embed_all(learner, variables, split.images, runs=None if self.group is None else self.indices)

  def train_fold(self, rundirs: list[RunDir], fold: int) -> list[dict]:
    """Train (or finish training) one fold model of each run; returns each run's best validation row."""
    c, (train, val_split) = self.config, self.folds[fold]
    learner = self.learner(train.num_classes)
    train_key = self._runs([fold_keys(s, fold)[1] for s in self.seeds])
    if self.group is None:
      replicated = None if self.data_mesh is None else NamedSharding(self.data_mesh, PartitionSpec())
      source = sources.place(train, self.placement, device=replicated)
    else:
      source = sources.place(train, self.placement, device=self.group.replicated, run_sharding=self.group.runs)

    def make_rows(state, losses):
      step = seed_groups.local_step(state.step)
      embedded = self._embedded(fold, state, val_split)
      rows = []
      for run_losses, run_embedded in zip(self._run_values(losses), embedded):
        val = retrieval(run_embedded, val_split.labels)
        rows.append({"epoch": step // c.steps_per_epoch, "step": step,
                     "loss": stats.finite_or_none(float(np.mean(run_losses))),
                     **{f"val_{name}": val[name] for name in REPORTED}})
      return rows

    schedule = loop.Schedule(c.epochs * c.steps_per_epoch, c.steps_per_epoch, best_by="val_map_at_r")
    runs = loop.Runs(tuple(self.fold_dir(rundirs[i], fold) for i in self.indices), self.group, self.indices)
    _, bests = loop.train_until(
        runs, self.initial_state(fold), schedule,
        lambda state, steps: embedding.train_chunk(learner, state, source, train_key, steps), make_rows,
        lambda row, best: dict(loss=row["loss"], val_map_at_r=_percent(row["val_map_at_r"]),
                               best=_percent(best["val_map_at_r"])),
        progress=self.progress, desc=c.loss if c.folds == 1 else f"{c.loss} fold {fold}")
    return bests

  def best_test_embeddings(self, rundirs: list[RunDir], fold: int) -> list[np.ndarray]:
    """Each written run's test embeddings by its best checkpoint of fold ``fold``."""
    runs = loop.Runs(tuple(self.fold_dir(rundirs[i], fold) for i in self.indices), self.group, self.indices)
    initial = self.initial_state(fold)
    best = runs.join([d.restore_checkpoint("best", s) for d, s in zip(runs.dirs, runs.states(initial))])
    return self._embedded(fold, best, self.test)

  def run(self, rundirs: list[RunDir]) -> list[dict | None]:
    """Train every fold of every run, test, write results; each run's results (None for another host's)."""
    c = self.config
    if c.custom_loss:  # a user's loss is traced once before anything is written (the registered ones are tested)
      embedding.check_loss(self.learner(self.folds[0][0].num_classes), self.image_shape)
    configs = [dataclasses.replace(c, seed=s) for s in self.seeds]
    distributed.barrier("fewshot: every process checked the group's run directories")  # before any is written
    for i in self.indices:
      rundirs[i].record_config({**configs[i].to_dict(), "image_shape": list(self.image_shape)})
    bests = [self.train_fold(rundirs, fold) for fold in range(len(self.folds))]  # [fold][run]
    embeddings = [self.best_test_embeddings(rundirs, fold) for fold in range(len(self.folds))]
    results = [None] * len(rundirs)
    for k, i in enumerate(self.indices):
      results[i] = write_results(c, self.test, [b[k] for b in bests], [e[k] for e in embeddings], rundirs[i])
    return results


def write_results(c: DMLConfig, test: Split, bests: list[dict], embeddings: list[np.ndarray], rundir: RunDir) -> dict:
  """One run's results.json from each fold model's best validation row and test embeddings."""
  separated = [{"fold": k, "best_epoch": best["epoch"], "best_val_map_at_r": best["val_map_at_r"],
                "dim": int(e.shape[1]), "test": retrieval(e, test.labels)}
               for k, (best, e) in enumerate(zip(bests, embeddings))]
  results = {"dataset": c.dataset, "loss": c.loss, "miner": c.miner, "folds": c.folds,
             "test_classes": test.num_classes, "test_images": len(test.labels), "separated": separated,
             "separated_mean": {name: _mean([s["test"][name] for s in separated]) for name in REPORTED}}
  if c.folds > 1:
    # Each model's embedding is unit-length; their concatenation is re-normalised (the reality check's 512-d).
    concatenated = distances.l2_normalize(np.concatenate(embeddings, axis=1))
    results["concatenated"] = {"dim": int(concatenated.shape[1]), "test": retrieval(concatenated, test.labels)}
  results["workdir"] = str(rundir.path)
  rundir.write_results(results)
  return results
