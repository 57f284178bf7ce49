"""Research use of a trained run from Python.

    import fewshot
    model = fewshot.load("runs/strokes_conv4_ProtoNet_DR_5w1s_seed0")
    z = model.embed(images)                                    # [n, D], BatchNorm in evaluation mode
    p = model.probabilities(support, support_labels, query)    # [n_query, way], the run's head
    p_s = model.probabilities(support, support_labels, query, head="softmax", classifier="nn")
    custom = fewshot.load("runs/strokes_conv4_cosine_5w1s_seed0", head=CosineHead())  # a head passed to training
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from fewshot import heads, method_rows
from fewshot.config import Config
from fewshot.episodic import learning, methods
from fewshot.episodic.learners import build_learner, check_values, with_values
from fewshot.episodic.learning import EpisodicLearner
from fewshot.episodic.maml import MetaLearner
from fewshot.errors import ConfigError, RunDirError
from fewshot.records.rundir import existing_checkpoint
from fewshot.training import compilation_cache, split_embedding
from fewshot.training.train_state import run_keys


@dataclasses.dataclass
class TrainedModel:
  """A backbone with its trained variables, and the head it was trained with."""

  config: Config
  learner: EpisodicLearner | MetaLearner
  variables: dict  # {"params": {"backbone": ..., **the head's, e.g. "rho"}, "batch_stats": ...}

  @property
  def theta(self) -> float | None:
    """The DR head's θ = exp(ρ) (:func:`fewshot.episodic.learning.theta`); None for a head without ρ, and for the
    softmax head, whose ρ is carried but takes no part in its logits.
    """
    return learning.theta(getattr(self.learner, "head", None), self.variables["params"])

  def embed(self, images: jax.Array) -> jax.Array:
    """Embeddings ``[n, D]`` of images ``[n, H, W, C]`` (uint8, or float in [0, 1]) as stored by ``fewshot.data``.

    The run's evaluation transform is applied first (image datasets: resize to
    ``int(1.15·size)``, centre crop, normalise), and with ``--test_shifts N`` each embedding is the
    mean over the image's shifts by up to N px, so ``embed(split.images)`` is what testing sees.
    """
    images = jnp.asarray(images)
    self._refuse_unless("embed", "embeds_once", "one embedding per image from the trained backbone")
    self._check_images(images, "images")
    view = (self.learner, self.config.test_shifts)
    return split_embedding.embed_batch(learning.view_embeddings, view, self.variables, images)

  def _refuse_unless(self, what: str, fact: str, needs: str) -> None:
    """A one-line ``ConfigError`` where the run's method row lacks ``fact`` (``embeds_once``, ``distance_head``)."""
    embed = ", embed its images with .embed" if methods.row(self.config.method).embeds_once else ""
    method_rows.require(self.config.method, fact, f"{what} needs {needs}",
                        f"test it with python -m fewshot.evaluate{embed}, or read its variables")

  def _check_images(self, images, name: str) -> None:
    """A one-line ``ConfigError`` for images the backbone cannot take (where Flax would fail deep inside)."""
    c = self.config
    resized = self.learner.augmentation.enabled  # image datasets: resized to the input side, any size goes in
    side = "H, W" if resized else f"{c.image_size}, {c.image_size}"
    if images.ndim != 4 or images.shape[-1] != c.channels or (not resized and images.shape[1:3] != c.input_shape[:2]):
      raise ConfigError(f"{name} must be [n, {side}, {c.channels}] ({c.dataset} images as fewshot.data stores them), "
                        f"got shape {tuple(images.shape)}.")

  def logits(self, support_images, support_labels, query_images, *, head=None, classifier=None,
             distance=None) -> jax.Array:
    """Query logits ``[n_query, way]`` under any head; defaults to the run's own.

    ``head`` is a ``--head`` name (completed by ``classifier`` and ``distance``, each the run's where not given)
    or a head value. The head's parameters are the trained ones where the run has them (the DR head's θ),
    else its initial ones. ``support_labels`` are episode labels in ``0..way-1``. Support and query are
    embedded with running BatchNorm statistics, as at test time.
    """
    self._refuse_unless("logits", "distance_head", "a distance head on one embedding per image")
    support_labels = _episode_labels(support_labels, len(support_images))
    way = int(support_labels.max()) + 1
    own = self.learner.head
    if head is None and classifier is None and distance is None:
      chosen = own
    elif head is None or isinstance(head, str):
      names = own if isinstance(own, heads.DistanceHead) else heads.DistanceHead()
      chosen = heads.DistanceHead(head or names.formulation, classifier or names.classifier, distance or names.distance)
    else:
      chosen = heads.resolve(head)
    params = {**chosen.init(jax.random.key(0)), **learning.head_params(self.variables["params"])}
    return chosen.logits(params, self.embed(support_images), support_labels, self.embed(query_images), way)

  def probabilities(self, support_images, support_labels, query_images, **head_options) -> jax.Array:
    """Class probabilities ``[n_query, way]``: the softmax of :meth:`logits`."""
    return jax.nn.softmax(self.logits(support_images, support_labels, query_images, **head_options), axis=-1)


def _episode_labels(labels, num_support: int) -> jax.Array:
  """Support labels checked to be episode labels: one per support image, every class of ``0..way-1`` present."""
  values = np.asarray(labels)
  if values.ndim != 1 or len(values) != num_support or not np.issubdtype(values.dtype, np.integer):
    raise ConfigError(f"support_labels must be one integer label per support image ({num_support}), got an array of "
                      f"shape {values.shape} and dtype {values.dtype}.")
  present = np.unique(values)
  if present[0] != 0 or len(present) != present[-1] + 1:
    shown = ", ".join(map(str, present[:10])) + (", ..." if len(present) > 10 else "")
    raise ConfigError(f"support_labels must be episode labels 0..way-1 with every class present, got classes "
                      f"{shown}; relabel them, e.g. np.unique(labels, return_inverse=True)[1].")
  return jnp.asarray(values)


def build(config: Config, input_shape: tuple[int, ...] | None = None, seed: int | None = None, *, head=None,
          backbone=None) -> TrainedModel:
  """An untrained model of a configuration, initialised as ``python -m fewshot.train`` would.

  ``input_shape`` is the backbone's input (after the transforms); default the config's. ``head`` and
  ``backbone`` are values as ``fewshot.train.train`` takes them.
  """
  compilation_cache.enable()
  config = with_values(config, head, backbone)
  check_values(config, head, backbone)  # a value the configuration records and that is not passed
  learner = build_learner(config, head, backbone)
  input_shape = config.input_shape if input_shape is None else input_shape
  state = methods.get(config.method).init_state(learner, run_keys(config.seed if seed is None else seed)["init"],
                                                tuple(input_shape))
  return TrainedModel(config, learner, learning.model_variables(state))


def load(workdir: str, checkpoint: str = "best", *, head=None, backbone=None,
         test_shifts: int | None = None) -> TrainedModel:
  """The trained model in a run directory (its ``best`` or ``last`` checkpoint).

  A run of a head or backbone passed as a value from Python (recorded as ``custom:<name>``) needs the same
  value again: ``fewshot.load(workdir, head=my_head)``; without it, a one-line ``ConfigError`` says so.
  ``test_shifts`` replaces the run's ``--test_shifts`` in :meth:`TrainedModel.embed` (None keeps it).
  """
  rundir = existing_checkpoint(workdir, checkpoint)
  return load_run(rundir, rundir.read_config(), checkpoint, head=head, backbone=backbone, test_shifts=test_shifts)


def load_run(rundir, record: dict, checkpoint: str = "best", *, head=None, backbone=None,
             test_shifts: int | None = None) -> TrainedModel:
  """:func:`load` of a run directory its caller opened (``existing_checkpoint``), with its ``config.json`` as read
  (``record``): a command that checked the run first reads it once.
  """
  config, learner, state = restore_run(rundir, record, checkpoint, head=head, backbone=backbone,
                                       test_shifts=test_shifts)
  return TrainedModel(config, learner, learning.model_variables(state))


def restore_run(rundir, record: dict, checkpoint: str = "best", *, head=None, backbone=None,
                test_shifts: int | None = None):
  """``(config, learner, state)`` of a run's checkpoint: what :func:`load_run` wraps, and what an evaluator
  (:mod:`fewshot.episodic.evaluators`) runs on.
  """
  config = rundir.read_options(Config.from_dict, record)
  input_shape = _input_shape(rundir, record)
  if test_shifts is not None:
    config = dataclasses.replace(config, test_shifts=test_shifts)
  compilation_cache.enable()
  check_values(config, head, backbone)
  learner = build_learner(config, head, backbone)
  like = methods.get(config.method).init_state(learner, run_keys(config.seed)["init"], input_shape)
  return config, learner, rundir.checkpoints.restore(checkpoint, like)


def _input_shape(rundir, record: dict) -> tuple[int, int, int]:
  """The backbone's input recorded beside the options (``input_shape``), refused in one line where edited away."""
  shape = record.get("input_shape")
  if not (isinstance(shape, list) and len(shape) == 3 and all(type(n) is int and n > 0 for n in shape)):
    raise RunDirError(f"{rundir.config_path}: input_shape is {shape!r}, not [height, width, channels]; restore the "
                      "file from a backup, or train the run anew in a new --workdir.")
  return tuple(shape)
