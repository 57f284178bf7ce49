"""The metric-learning experiment's evaluators, in big_vision's shape (as :mod:`fewshot.episodic.evaluators`):
built with what they measure, then ``run(states)`` on the fold models' checkpoints. The run's own test
(``results.json``) and ``python -m fewshot.evaluate`` of a metric-learning run go through them
(:meth:`fewshot.dml.experiment.Experiment.evaluator`):

    retrieval = experiment.evaluator("retrieval")
    [tested] = retrieval.run(fold_states)   # {"separated": [{"fold", "dim", "test"}, ...], "concatenated": {...}}
    episodes = experiment.evaluator("episodes", way=5, shot=1, query=15, episodes=600, seed=0)
    [tested] = episodes.run(fold_states)    # the same shape, each "test" a few-shot test accuracy ± its interval

``episodes`` tests an embedder as a few-shot learner is tested: N-way K-shot episodes of the test split, each query
given the class of the nearest mean support embedding (ProtoNet's rule, squared Euclidean distance).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from fewshot import distances
from fewshot.analysis import stats
from fewshot.dml.metrics import retrieval_metrics
from fewshot.training import class_draws
from fewshot.training.train_state import run_keys

RECALL_AT = (1, 2, 4, 8)
REPORTED = ("precision_at_1", "r_precision", "map_at_r")  # what results.json averages over fold models


def retrieval(embeddings: np.ndarray, labels: np.ndarray) -> dict:
  """Retrieval metrics of a split against itself, the query left out of its own list; NaN as null."""
  recall_at = tuple(k for k in RECALL_AT if k < len(labels))
  m = retrieval_metrics(embeddings, labels, embeddings, labels, ref_includes_query=True, recall_at=recall_at)
  return {name: stats.finite_or_none(v) if isinstance(v, float) else v for name, v in m.as_dict().items()}


@dataclasses.dataclass(frozen=True)
class Retrieval:
  """The test split retrieved against itself by each fold model's embedding (separated) and, with several fold
  models, by their re-normalised concatenation (the reality check's 512-d): one result per ``written`` run.
  """

  experiment: object  # fewshot.dml.experiment.Experiment (not imported: it builds its evaluators)
  written: tuple[int, ...] = (0,)

  def run(self, states: list) -> list[dict]:
    labels = self.experiment.test.labels
    return by_fold_models(self.experiment, states, self.written, lambda embedded: retrieval(embedded, labels))


def by_fold_models(experiment, states: list, written: tuple[int, ...], score) -> list[dict]:
  """``score`` (of a test split's embeddings) of each fold model's embedding (separated) and, with several, of their
  re-normalised concatenation; one result per ``written`` run.
  """
  embedded = [experiment.embed(k, state, experiment.test, written) for k, state in enumerate(states)]  # [fold][run]
  out = []
  for i in range(len(written)):
    runs = [e[i] for e in embedded]
    tested = {"separated": [{"fold": k, "dim": int(e.shape[1]), "test": score(e)} for k, e in enumerate(runs)]}
    if len(runs) > 1:
      # Each model's embedding is unit-length; their concatenation is re-normalised.
      concatenated = distances.l2_normalize(np.concatenate(runs, axis=1))
      tested["concatenated"] = {"dim": int(concatenated.shape[1]), "test": score(concatenated)}
    out.append(tested)
  return out


@functools.partial(jax.jit, static_argnums=(3, 4, 5))
def _episode_accuracies(embeddings: jax.Array, layout: class_draws.ClassLayout, keys: jax.Array, way: int, shot: int,
                        query: int) -> jax.Array:
  def one(key):
    _, indices = class_draws.sample_class_images(key, layout, way, shot + query)  # [way, shot + query]
    drawn = embeddings[indices]
    prototypes = drawn[:, :shot].mean(axis=1)  # [way, D]
    queries = drawn[:, shot:].reshape(way * query, -1)
    nearest = jnp.argmin(distances.squared_euclidean(queries, prototypes), axis=1)
    return jnp.mean(nearest == jnp.repeat(jnp.arange(way), query))

  return jax.vmap(one)(keys)


def prototype_accuracies(embeddings, layout: class_draws.ClassLayout, key: jax.Array, episodes: int, way: int,
                         shot: int, query: int) -> np.ndarray:
  """Per-episode query accuracy (fractions) of nearest-prototype classification over a split embedded once.

  Episode ``i`` is keyed ``fold_in(key, i)`` and draws ``way`` classes and ``shot + query`` distinct images of each
  (:func:`fewshot.training.class_draws.sample_class_images`); a query is right where the mean of its class's
  ``shot`` support embeddings is the nearest by squared Euclidean distance.

      layout = class_draws.ClassLayout.from_split(split)          # split.images embedded as ``embeddings``
      prototype_accuracies(embeddings, layout, jax.random.key(0), 600, 5, 1, 15).mean()   # 0.93
  """
  keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(episodes))
  return np.asarray(_episode_accuracies(jnp.asarray(embeddings), layout, keys, way, shot, query))


def episodes_summary(accuracies: np.ndarray) -> dict:
  """Test accuracy (%) ± its 95% interval over the episodes, and their count."""
  mean, half_width = stats.mean_confidence_interval(100.0 * np.asarray(accuracies))
  return {"test_accuracy": mean, "test_ci95": half_width, "test_episodes": len(accuracies)}


@dataclasses.dataclass(frozen=True)
class Episodes:
  """Few-shot episodes of the test split classified by each fold model's embedding (separated) and, with several,
  by their re-normalised concatenation: ``way``-way ``shot``-shot, ``query`` queries per class, ``episodes`` of
  them keyed by the few-shot test's key of ``seed`` (:func:`fewshot.training.train_state.run_keys`).
  """

  experiment: object  # fewshot.dml.experiment.Experiment
  way: int = 5
  shot: int = 1
  query: int = 15
  episodes: int = 600
  seed: int = 0
  written: tuple[int, ...] = (0,)

  def run(self, states: list) -> list[dict]:
    test = self.experiment.test
    class_draws.check_fits(test, "test", ("--test_way", self.way), {"--shot": self.shot, "--test_query": self.query})
    layout, key = class_draws.ClassLayout.from_split(test), run_keys(self.seed)["test"]
    score = lambda e: episodes_summary(prototype_accuracies(e, layout, key, self.episodes, self.way, self.shot,
                                                            self.query))
    return by_fold_models(self.experiment, states, self.written, score)
