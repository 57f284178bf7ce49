"""A configuration built into what training and evaluation run on (data, learner, keys), and the episodic method's
side of the one orchestration, :mod:`fewshot.training.trainer`: its chunk of episodes, its rows and its test. The
learner itself, and the episode shapes, come from :mod:`fewshot.episodic.learners`.
"""

from __future__ import annotations

import dataclasses
import sys

import jax
import jax.numpy as jnp
import numpy as np

from fewshot import convolutions, data
from fewshot.analysis import stats
from fewshot.config import Config
from fewshot.data import SPLITS, Split, catalog, omniglot
from fewshot.data.catalog import fits_on_device
from fewshot.episodic import cached_episodes, evaluators, learning, methods
from fewshot.episodic.learners import build_learner, test_shape, train_shape, val_shape
from fewshot.episodic.learning import EpisodicLearner
from fewshot.episodic.maml import MetaLearner
from fewshot.errors import DataError
from fewshot.training import class_draws, loop, seed_groups, sources
from fewshot.training.provenance import data_record
from fewshot.training.seed_groups import SeedGroup
from fewshot.training.train_state import KEY_STREAMS, TrainState, run_keys


def load_data(config: Config, splits: tuple[str, ...] = SPLITS) -> dict[str, Split]:
  """The requested splits of the config's dataset (class splits without val hold out training classes); under
  ``--train_splits train+val``, 'train' holds the validation classes too and there is no 'val'.
  """
  pooled = not config.validates and "train" in splits
  wanted = tuple(dict.fromkeys((*splits, "val") if pooled else splits))
  loaded = data.load_splits(config.dataset, config.data_dir, config.tfds_dir, wanted, image_size=config.image_size,
                            class_splits=config.class_splits, class_order=config.class_order, seed=config.split_seed,
                            bbox_crop=config.bbox_crop, rotations=config.rotations, split_lists=config.split_lists,
                            resize=config.resize)
  if pooled:
    loaded["train"] = Split.concatenate([loaded["train"], loaded.pop("val")])
  return {name: split for name, split in loaded.items() if name in splits and (config.validates or name != "val")}


@dataclasses.dataclass
class Experiment:
  """Everything a configuration builds before training: data placed for the device, learner, keys; the episodic
  method's side of :class:`fewshot.training.trainer.Experiment` (one model per run, trained on episodes).

  With ``group`` (a :class:`~fewshot.training.seed_groups.SeedGroup`) it builds a seed group: the runs of
  ``seeds``, whose keys and states are stacked on a leading run axis sharded over the devices.
  """

  config: Config
  learner: EpisodicLearner | MetaLearner
  sources: dict[str, sources.DeviceSource | sources.HostSource]
  input_shape: tuple[int, ...]  # the backbone's input (after the transforms), not the stored images'
  keys: dict[str, jax.Array]  # one run's keys, or a group's [R] keys per stream
  group: SeedGroup | None = None
  seeds: tuple[int, ...] = ()  # the runs' seeds, a group's padded to its run axis
  data: dict = dataclasses.field(default_factory=dict)  # how the dataset was split (provenance.data_record)
  models: tuple[str | None, ...] = (None,)  # one model, in the run directory itself
  shows_progress: bool = False  # whether its long tests (with --test_shifts) say how far they are

  @classmethod
  def build(cls, config: Config, splits: tuple[str, ...] = SPLITS, placement: str = "auto",
            seeds: tuple[int, ...] | None = None, head=None, backbone=None, progress: bool = False) -> Experiment:
    """Load the splits, check they can supply the episodes, and build the learner (writes nothing).

    ``placement`` (see :func:`fewshot.training.sources.place`) changes where images live, never
    which episodes a run sees, so it is not part of the config. ``seeds`` builds a seed
    group of ``config`` (whose own seed is then unused). ``head`` and ``backbone`` are values passed from
    Python (:func:`with_values`); their output shapes are checked here, before anything is trained or written.
    ``progress``: its tests with ``--test_shifts`` say how far they are (they take minutes).
    """
    return cls(config, *_built(config, splits, placement, seeds, head, backbone), shows_progress=progress)

  # ---- the method's side of fewshot.training.trainer.Experiment ----------------------------------------------------
  @property
  def name(self) -> str:
    return self.config.model_name

  @property
  def tested_on(self) -> str:
    on = " of the validation classes (the data hold no others)" if self.data.get("test_is_val") else ""
    return f"{self.config.test_episodes} test episodes{on}"

  @property
  def computation(self) -> dict:
    return convolutions.used(self.learner.backbone)

  @property
  def method(self):
    """The run's method: the module of its steps (:mod:`fewshot.episodic.methods`)."""
    return methods.get(self.config.method)

  def check(self) -> None:
    """One line on stderr when the head has no class distance: the diagnostics built on psi will be null."""
    if methods.row(self.config.method).diagnoses and self.learner.psi_head is None:
      print(f"warning: head {self.learner.head.name} has no class_distances, so psi_con, psi_div, con_alpha, "
            "div_alpha and con_div are recorded as null (alpha and norm_ratio need none; --psi_classifier proto "
            "measures psi with Euclidean prototypes instead).", file=sys.stderr)

  def checkpointing(self) -> loop.Checkpointing:
    # Without validation the last checkpoint is the one tested: the best by its episode.
    best_by = "val_accuracy" if self.config.validates else "episode"
    return loop.Checkpointing(self.config.episodes, self.config.eval_every, best_by=best_by, step_key="episode",
                         loss_key="train_loss", unit="ep", patience=self.config.patience,
                         diverged_fix=self.method.DIVERGED_FIX)

  def initial_state(self, model: int = 0) -> TrainState:
    del model  # one model per run
    # Each run of a group initialised as it would be alone (its own compiled init), then stacked.
    states = [self.method.init_state(self.learner, run_keys(seed)["init"], self.input_shape) for seed in self.seeds]
    return states[0] if self.group is None else self.group.stack(states)

  def train_chunk(self, model: int, state: TrainState, episodes: int):
    state, metrics, diagnosed = self.method.train_chunk(self.learner, state, self.sources["train"],
                                                        self.keys["train"], episodes)
    return state, (metrics, diagnosed)

  def rows(self, model: int, state: TrainState, outputs, written: tuple[int, ...]) -> list[dict]:
    if self.config.validates:
      val = 100.0 * self.accuracies(state, "val", self.config.val_episodes, written)
      val = [val] if self.group is None else list(val)
    else:
      val = [None] * len(written)
    per_run = seed_groups.each_run({"metrics": outputs[0], "diagnosed": outputs[1], "rho": state.params.get("rho")},
                                   self.group, written)
    # The chunk's mean loss and accuracy are taken on the device (as runs before seed groups did: same bits).
    per_run = [{**v, **jax.device_get({"diagnosed": v["diagnosed"], "rho": v["rho"]})} for v in per_run]
    return [_row(seed_groups.local_step(state.step), {**v, "val": run_val}) for v, run_val in zip(per_run, val)]

  def progress_fields(self, row: dict, best: dict) -> dict:
    if row["val_accuracy"] is None:  # trained on train+val: nothing validates
      return dict(loss=f"{row['train_loss']:.3f}")
    return dict(loss=f"{row['train_loss']:.3f}", val=f"{row['val_accuracy']:.2f}%", best=f"{best['val_accuracy']:.2f}%")

  def results(self, best_states: list, best_rows: list[list[dict]], written: tuple[int, ...]) -> list[dict]:
    tested = self.evaluator("episodes", written=written).run(best_states[0])
    stopped = {} if self.config.patience is None else {"stopped_at": None}
    # A method without the update diagnostics says so where a reader of its records looks (not a row of nulls).
    said = {} if methods.row(self.config.method).diagnoses else {"diagnostics": self.method.NO_DIAGNOSTICS}
    if self.data.get("test_is_val"):  # a reader of results.json alone must see that val was its test
      said["tested_on"] = "val"
    return [{**result, "best_episode": best["episode"], "best_val_accuracy": best["val_accuracy"],
             **{key: best.get(key) for key in stopped}, **said}
            for result, best in zip([tested] if self.group is None else tested, best_rows[0])]

  # ---- evaluation -------------------------------------------------------------------------------------------------
  def evaluator(self, name: str, **options):
    """The evaluator ``name`` of :mod:`fewshot.episodic.evaluators` over this experiment: ``episodes`` and
    ``cached`` default to the run's ``--test_episodes`` and ``--test_shifts``; ``lake`` takes ``runs`` (and
    ``source``).
    """
    if name == "lake":
      return evaluators.LakeRuns(self.config, self.learner, **{"shifts": self.config.test_shifts, **options})
    chosen = {"episodes": evaluators.Episodes, "cached": evaluators.CachedEpisodes}[name]
    return chosen(self, **{"episodes": self.config.test_episodes, "shifts": self.config.test_shifts, **options})

  def accuracies(self, state: TrainState, split: str, num_episodes: int, written: tuple[int, ...] = (0,),
                 shifts: int = 0, progress=None) -> np.ndarray:
    """Per-episode accuracy on a split, ``[num_episodes]`` (``[len(written), num_episodes]`` for a group: its
    ``written`` runs); the same episodes every call (fixed key). ``shifts`` is the test's ``--test_shifts``
    (:mod:`fewshot.episodic.evaluators`): validation embeds one view, so a run trains and chooses its checkpoints
    exactly as it would without the option. A lone run's test with ``shifts`` embeds each image its episodes draw
    once (:func:`fewshot.episodic.cached_episodes.drawn_episode_accuracies`): the same accuracies at the cost of the
    distinct images tested, where embedding every draw apart paid ``(2·shifts + 1)²`` views of each draw again;
    ``progress(done, all)`` follows that embedding (the long part of such a test), or a group's episodes.
    """
    shape = {"train": train_shape, "val": val_shape, "test": test_shape}[split](self.config)
    variables = learning.model_variables(state)
    if shifts and self.group is None:  # only a method that embeds once tests shifted views (Config)
      source = self.sources[split]
      return np.asarray(cached_episodes.drawn_episode_accuracies(self.learner, variables, source.images,
                                                                 source.layout, self.keys[split], num_episodes,
                                                                 shape, shifts, progress))
    accuracies = self.method.episode_accuracies(self.learner, variables, self.sources[split], self.keys[split],
                                                num_episodes, shape, shifts, progress)
    if self.group is None:
      return np.asarray(accuracies)
    per_run = [np.asarray(a) for a in seed_groups.each_run(accuracies, self.group, written)]
    return np.asarray(per_run, accuracies.dtype).reshape(len(per_run), num_episodes)

  def test(self, state: TrainState, written: tuple[int, ...] = (0,)) -> dict | list[dict]:
    """Test results of a run (of each ``written`` run of a group): the ``episodes`` evaluator's."""
    return self.evaluator("episodes", written=written).run(state)


def _row(episode: int, v: dict) -> dict:
  """A checkpoint's metrics row of one run from its chunk outputs and validation accuracies."""
  return {
      "episode": episode,
      "train_loss": float(jnp.mean(v["metrics"]["loss"])),
      "train_accuracy": float(100.0 * jnp.mean(v["metrics"]["accuracy"])),
      "theta": None if v["rho"] is None else float(np.exp(v["rho"])),  # a head without the DR's rho has no theta
      "val_accuracy": None if v["val"] is None else float(v["val"].mean()),
      "val_ci95": None if v["val"] is None else stats.mean_confidence_interval(v["val"])[1],
      # Undefined diagnostics (e.g. an update that did not move the embedding) are recorded as null: JSON has no NaN.
      **{name: stats.finite_or_none(float(value)) for name, value in v["diagnosed"].items()},
  }


def _built(config: Config, splits: tuple[str, ...], placement: str, seeds: tuple[int, ...] | None, head, backbone):
  """What :meth:`Experiment.build` builds, after ``config``, in the order of its fields."""
  learner = build_learner(config, head, backbone)
  method = methods.get(config.method)
  method.check_shapes(learner, config.input_shape)
  loaded = load_data(config, splits)
  shapes = {"train": train_shape(config), "val": val_shape(config), "test": test_shape(config)}
  for name, split in loaded.items():
    shape = shapes[name]
    query_flag = "--test_query" if name == "test" else "--query"
    way_flag = "--way" if name == "train" or config.test_way == config.way else "--test_way"
    class_draws.check_fits(split, name, (way_flag, shape.way), {"--shot": shape.shot, query_flag: shape.query})
  method.check_splits(learner, loaded)
  stored = next(iter(loaded.values())).image_shape
  if stored[-1] != config.channels:
    raise DataError(f"{config.dataset} images have {stored[-1]} channels where {config.channels} were expected.")
  superclasses = {}
  if config.within_alphabet and "train" in loaded:
    superclasses["train"] = omniglot.alphabets(loaded["train"].class_names)
    class_draws.check_superclasses_fit(superclasses["train"], "train", "--way", config.way)
  shared = sum(split.images.nbytes for split in loaded.values() if fits_on_device(split.images.nbytes))
  group, padded = seed_groups.form(seeds, config.seed, lambda: method.lowered_step(learner, config.input_shape,
                                                                                   stored), shared, method.RUN_FIX)
  where = {} if group is None else {"device": group.replicated, "run_sharding": group.runs}
  # The learner is initialised on what the backbone sees, after the transforms.
  placed = {name: sources.place(split, placement, superclasses=superclasses.get(name), **where)
            for name, split in loaded.items()}
  keys = run_keys(config.seed) if group is None else {
      stream: group.stack([run_keys(seed)[stream] for seed in padded]) for stream in KEY_STREAMS}
  return learner, placed, config.input_shape, keys, group, padded, _data(config, loaded)


def _data(config: Config, loaded: dict[str, Split]) -> dict:
  """How the dataset was split (provenance.data_record), with the files it was truly read from and, for class
  splits read from lists, the lists' SHA-256 (two runs on different lists are not one protocol).
  """
  record = data_record(loaded, config.data_dir, *data.files(config.dataset, config.data_dir))
  if config.class_splits in catalog.LISTED_CLASS_SPLITS:
    record["class_lists_sha256"] = omniglot.listed(config.class_splits, config.split_lists).sha256
  return record
