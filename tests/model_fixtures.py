"""Small splits and model variables for the learners' tests, built without compiling a step."""

import jax
import numpy as np
from flax.traverse_util import flatten_dict, unflatten_dict

from fewshot.data.split import Split
from fewshot.episodic import learning


def random_split(shape, classes=10, per_class=9):
  """``classes`` classes of ``per_class`` random uint8 images of ``shape``, labels sorted."""
  rng = np.random.default_rng(0)
  labels = np.repeat(np.arange(classes), per_class).astype(np.int32)
  images = rng.integers(0, 256, (len(labels), *shape), dtype=np.uint8)
  return Split(images, labels, tuple(f"c{i}" for i in range(classes)))


def moved_variables(learner, input_shape):
  """Initial variables with running statistics away from (0, 1), as after training (without compiling a step)."""
  variables = learning.model_variables(learning.init_state(learner, jax.random.key(0), input_shape))
  rng = np.random.default_rng(1)
  moved = lambda name, x: (rng.normal(0.0, 0.1, x.shape) if name[-1] == "mean" else rng.uniform(0.5, 2.0, x.shape))
  stats = {name: moved(name, x).astype(np.float32) for name, x in flatten_dict(variables["batch_stats"]).items()}
  return {**variables, "batch_stats": unflatten_dict(stats)}
