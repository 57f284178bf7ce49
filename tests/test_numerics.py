"""The numerics policy (fewshot/numerics.py, docs/numerics.md), checked on the lowered programs, so a CPU checks what
a GPU or TPU would run: every matrix product and convolution of the results-bearing math says ``HIGHEST``, and in a
whole training step only the backbone's follow ``--precision``.

A product that names no precision lowers as ``DEFAULT`` (TF32 on NVIDIA GPUs, one bfloat16 pass on TPUs), so a new
one that does not say fails here, whichever function it is added to.
"""

from __future__ import annotations

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot import choices, distances, heads, numerics
from fewshot.augment import Augmentation, Distortion
from fewshot.backbones import Conv4
from fewshot.dml import clustering, knn, miners
from fewshot.dml import embedding as dml_embedding
from fewshot.dml.losses import LOSSES
from fewshot.dml.samplers import BatchShape
from fewshot.episodic import diagnostics, learning
from fewshot.episodic.episodes import EpisodeShape

_PRODUCT = re.compile(r"stablehlo\.(dot_general|convolution)\b.*?(?:precision = \[(\w+), \w+\]|"
                      r"precision_config = \[#stablehlo<precision (\w+)>)")
_ANY_PRODUCT = re.compile(r"stablehlo\.(dot_general|convolution)\b")


def products(lowered) -> list[tuple[str, str]]:
  """``(operation, precision)`` of every matrix product and convolution in a lowered program (``DEFAULT`` where
  none is named).
  """
  text = lowered.as_text()
  found = []
  for line in text.splitlines():
    if not _ANY_PRODUCT.search(line):
      continue
    match = _PRODUCT.search(line)
    found.append((match.group(1), match.group(2) or match.group(3)) if match else
                 (_ANY_PRODUCT.search(line).group(1), "DEFAULT"))
  return found


def not_exact(fn, *args) -> list[tuple[str, str]]:
  """The products of ``fn(*args)`` and of its gradient in the first argument that are not ``HIGHEST``."""
  value = jax.jit(fn).lower(*args)
  gradient = jax.jit(jax.grad(lambda *a: jnp.sum(fn(*a)))).lower(*args)
  return [p for p in products(value) + products(gradient) if p[1] != "HIGHEST"]


X = np.random.default_rng(0).normal(size=(12, 6)).astype(np.float32)
Y = np.random.default_rng(1).normal(size=(7, 6)).astype(np.float32)
LABELS = np.repeat(np.arange(3), 4).astype(np.int32)
PAIRWISE = [name for name in dir(distances) if callable(getattr(distances, name)) and not name.startswith("_")
            and name not in {"l2_normalize", "Array"}]


def test_the_checker_catches_a_product_that_does_not_say():
  assert not_exact(lambda x, y: x @ y.T, X, Y) == [("dot_general", "DEFAULT")] * 2  # the value and its gradient
  conv = lambda x, k: jax.lax.conv_general_dilated(x, k, (1, 1), "SAME")
  assert {p for p in not_exact(conv, X[None, None], X[None, None, :3, :3])} == {("convolution", "DEFAULT")}
  assert not_exact(numerics.matmul, X, Y.T) == []


@pytest.mark.parametrize("name", PAIRWISE)
def test_every_pairwise_distance_is_exact(name):
  assert not_exact(getattr(distances, name), X, Y) == []


@pytest.mark.parametrize("head", choices.HEADS)
@pytest.mark.parametrize("classifier", choices.CLASSIFIERS)
@pytest.mark.parametrize("distance", choices.DISTANCES)
def test_every_head_is_exact(head, classifier, distance):
  value = heads.resolve(head, classifier, distance)
  params = value.init(jax.random.key(0))
  assert not_exact(lambda s, q: value.logits(params, s, LABELS, q, 3), X, Y) == []
  assert not_exact(lambda s, q: heads.log_class_distances(value, s, LABELS, q, 3), X, Y) == []


@pytest.mark.parametrize("classifier", choices.CLASSIFIERS)
def test_the_diagnostics_are_exact(classifier):
  query_labels = np.arange(7) % 3
  diagnose = lambda s, q: jnp.stack(list(diagnostics.episode_diagnostics(
      s, q, 1.1 * s + 0.01, q * 0.9, LABELS, query_labels, 3, classifier=classifier).values()))
  assert not_exact(diagnose, X, Y) == []


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_every_metric_learning_loss_is_exact(name):
  loss = LOSSES[name]
  params = {} if loss.init is None else loss.init(jax.random.key(0), 3, X.shape[1])
  unit = distances.l2_normalize(X)
  assert not_exact(lambda e, labels: loss.fn(e, labels, **params), unit, jnp.asarray(LABELS)) == []


@pytest.mark.parametrize("miner", sorted(miners.MINERS))
def test_every_miner_is_exact(miner):
  mined = lambda e: miners.MINERS[miner](e, LABELS)
  assert [p for p in products(jax.jit(mined).lower(X)) if p[1] != "HIGHEST"] == []


def test_retrieval_neighbours_and_kmeans_are_exact():
  for distance in (distances.euclidean_matmul, distances.squared_euclidean_matmul, distances.cosine_distance):
    lowered = jax.jit(lambda q, r: knn.nearest_neighbours(q, r, 3, distance=distance)).lower(Y, X)
    assert [p for p in products(lowered) if p[1] != "HIGHEST"] == []
  assert [p for p in products(jax.jit(lambda x, c: clustering._assign(x, c, 4)).lower(X, Y))
          if p[1] != "HIGHEST"] == []


def _learner(precision: str) -> learning.EpisodicLearner:
  return learning.EpisodicLearner(Conv4(features=8, depth=2, conv="lax"), EpisodeShape(3, 1, 2), head="dr",
                                  precision=precision)


def _whole_step(learner):
  """The training step with its diagnostics, lowered on 28 px episodes."""
  state = jax.eval_shape(lambda: learning.init_state(learner, jax.random.key(0), (28, 28, 1)))
  images = jax.ShapeDtypeStruct((3, 3, 28, 28, 1), jnp.uint8)

  def step(state, images, key):
    return learning._train_on_draw(learner, state, key, 0, jnp.arange(3), images, 0)

  return jax.jit(step).lower(state, images, jax.ShapeDtypeStruct((), jax.random.key(0).dtype))


@pytest.mark.parametrize("conv", ["lax", "im2col", "map", "im2col_grad", "im2col_flip"])
def test_a_training_step_runs_the_backbone_at_its_precision_and_the_rest_exact(conv):
  learner = _learner("tensorfloat32")
  learner = dataclasses.replace(learner, backbone=Conv4(features=8, depth=2, conv=conv))
  found = products(_whole_step(learner))
  backbone = [p for p in found if p[1] == "HIGH"]
  # 2 layers: forward, the diagnostics' second forward, and the kernel's and the input's gradients.
  assert len(backbone) >= 2 * 3, found
  assert {p[1] for p in found} <= {"HIGH", "HIGHEST"}, found
  # Under float32, the default, everything is exact.
  assert {p[1] for p in products(_whole_step(_learner("float32")))} == {"HIGHEST"}


def test_evaluation_follows_the_same_policy():
  learner = _learner("tensorfloat32")
  state = jax.eval_shape(lambda: learning.init_state(learner, jax.random.key(0), (28, 28, 1)))
  images = lambda n: jax.ShapeDtypeStruct((n, 28, 28, 1), jnp.uint8)
  labels = lambda n: jax.ShapeDtypeStruct((n,), jnp.int32)
  episode = learning.Episode(support_images=images(3), support_labels=labels(3), query_images=images(6),
                             query_labels=labels(6), classes=labels(3))
  lowered = jax.jit(lambda v, e: learning.episode_accuracy(learner, v, e, 1)).lower(learning.model_variables(state),
                                                                                  episode)
  found = products(lowered)
  assert "HIGH" in {p[1] for p in found} and {p[1] for p in found} <= {"HIGH", "HIGHEST"}, found


@pytest.mark.parametrize("augmentation", ["paper", "distort"])
def test_the_augmentations_resample_exactly(augmentation):
  if augmentation == "paper":
    augment, images = Augmentation.paper(84, 3), jax.ShapeDtypeStruct((4, 96, 96, 3), jnp.uint8)
  else:
    augment = Augmentation.for_dataset(28, 1, False, False, Distortion())
    images = jax.ShapeDtypeStruct((4, 28, 28, 1), jnp.uint8)
  key = jax.ShapeDtypeStruct((), jax.random.key(0).dtype)
  found = products(jax.jit(augment.train).lower(key, images)) + products(jax.jit(augment.eval).lower(images))
  assert found and {p[1] for p in found} == {"HIGHEST"}, found


def test_a_metric_learning_step_runs_the_embedder_at_its_precision_and_the_loss_exact():
  learner = dml_embedding.MetricLearner(dml_embedding.Embedder(Conv4(features=8, depth=2, conv="lax"), 4),
                                        BatchShape(3, 2), loss="npair", precision="tensorfloat32")
  found = products(dml_embedding.lowered_step(learner, (28, 28, 1)))
  assert {p[1] for p in found} == {"HIGH", "HIGHEST"}, found  # npair's positives and similarities are exact
