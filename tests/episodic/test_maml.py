"""MAML and ANIL (issue 40): the inner loop against its closed form in numpy, the first-order meta-gradient by its
definition, the options each method takes; end to end (train, validate, test, resume, seed group) in the slow tier.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot import heads
from fewshot.config import Config
from fewshot.episodic import maml
from fewshot.episodic.episodes import Episode, EpisodeShape
from fewshot.errors import ConfigError

WAY, SHOT, QUERY, SIDE = 3, 2, 2, 4


class Flat(nn.Module):
  """Images as their own embeddings: no parameters, no BatchNorm, so the head's algebra is all there is."""

  @nn.compact
  def __call__(self, x):
    return x.reshape(x.shape[0], -1)


def _episode(seed: int = 0) -> Episode:
  rng = np.random.default_rng(seed)
  images = lambda n: jnp.asarray(rng.uniform(size=(n, SIDE, SIDE, 1)), jnp.float32)  # noqa: E731
  labels = lambda n: jnp.repeat(jnp.arange(WAY), n)  # noqa: E731
  return Episode(support_images=images(WAY * SHOT), support_labels=labels(SHOT), query_images=images(WAY * QUERY),
                 query_labels=labels(QUERY), classes=jnp.arange(WAY))


def _learner(**options) -> maml.MetaLearner:
  return maml.MetaLearner(Flat(), EpisodeShape(WAY, SHOT, QUERY), **{"adapt": "head", "inner_lr": 0.5, **options})


def _softmax(logits):
  e = np.exp(logits - logits.max(1, keepdims=True))
  return e / e.sum(1, keepdims=True)


def _numpy_steps(z, labels, steps, lr):
  """Plain gradient descent on the mean cross-entropy of a linear head that starts at zero."""
  w, b, y = np.zeros((z.shape[1], WAY)), np.zeros(WAY), np.eye(WAY)[labels]
  for _ in range(steps):
    error = (_softmax(z @ w + b) - y) / len(z)
    w, b = w - lr * z.T @ error, b - lr * error.sum(0)
  return w, b


@pytest.mark.parametrize("steps", [1, 3])
def test_the_inner_loop_is_gradient_descent_on_the_support_cross_entropy(steps):
  learner, episode = _learner(), _episode()
  state = maml.init_state(learner, jax.random.key(0), (SIDE, SIDE, 1))
  assert not np.any(state.params["head"]["w"]) and state.params["head"]["w"].shape == (SIDE * SIDE, WAY)
  fast = jax.jit(lambda p: maml.adapted(learner, p, state.batch_stats, episode, steps))(state.params)["head"]
  z = np.asarray(episode.support_images, np.float64).reshape(WAY * SHOT, -1)
  w, b = _numpy_steps(z, np.asarray(episode.support_labels), steps, 0.5)
  np.testing.assert_allclose(np.asarray(fast["w"]), w, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(np.asarray(fast["b"]), b, rtol=1e-5, atol=1e-7)


def _numpy_distance_steps(z, labels, steps, lr, head, theta):
  """Plain gradient descent on the mean cross-entropy of a distance head whose representatives start at zero:
  logits -d^2 (softmax) or -(theta / 2) log(d^2 + eps) (dr), d the distance to each class's column of w.
  """
  w, y = np.zeros((z.shape[1], WAY)), np.eye(WAY)[labels]
  for _ in range(steps):
    diff = z[:, :, None] - w[None]  # [n, D, way]
    squared = (diff**2).sum(1)
    logits = -squared if head == "softmax" else -(theta / 2) * np.log(squared + heads.DR_EPS)
    error = (_softmax(logits) - y) / len(z)  # d loss / d logits
    # d logits / d w_c: 2 (z - w_c) under softmax, theta (z - w_c) / (d^2 + eps) under dr.
    scale = 2.0 * np.ones_like(squared) if head == "softmax" else theta / (squared + heads.DR_EPS)
    w = w - lr * (diff * (error * scale)[:, None, :]).sum(0)
  return w


@pytest.mark.parametrize("head", ["softmax", "dr"])
def test_a_distance_head_adapts_its_class_representatives_by_gradient_descent(head):
  learner, episode = _learner(head=head), _episode()
  state = maml.init_state(learner, jax.random.key(0), (SIDE, SIDE, 1))
  assert set(state.params["head"]) == {"w"} and ("rho" in state.params) == (head == "dr")
  fast = jax.jit(lambda p: maml.adapted(learner, p, state.batch_stats, episode, 2))(state.params)
  z = np.asarray(episode.support_images, np.float64).reshape(WAY * SHOT, -1)
  theta = float(np.exp(heads.RHO_INIT))
  w = _numpy_distance_steps(z, np.asarray(episode.support_labels), 2, 0.5, head, theta)
  np.testing.assert_allclose(np.asarray(fast["head"]["w"]), w, rtol=1e-4, atol=1e-6)
  if head == "dr":  # the temperature is the outer loop's: the inner steps leave it
    assert float(fast["rho"]) == float(state.params["rho"])
  # Adapting lowers the support loss from log(way), where every representative sits at zero.
  support = lambda params: heads.loss_and_accuracy(maml.head_logits(  # noqa: E731
      head, params["head"], params.get("rho"), jnp.asarray(z, jnp.float32)), episode.support_labels)[0]
  before, after = float(support(state.params)), float(support(fast))
  assert before == pytest.approx(np.log(WAY), rel=1e-6) and after < before


def test_the_dr_head_s_temperature_is_meta_learned():
  learner = _learner(head="dr", adapt="all")
  state = maml.init_state(learner, jax.random.key(0), (SIDE, SIDE, 1))
  grads = jax.jit(jax.grad(lambda p: maml._query_loss(learner, p, {}, _episode(4), 1)[0]))(state.params)
  assert float(grads["rho"]) != 0.0 and np.isfinite(float(grads["rho"]))


def test_the_first_order_meta_gradient_is_the_query_gradient_at_the_adapted_head():
  """FOMAML's definition; the second-order one differs (the inner step's Hessian), so both are what they say."""
  episode, shape = _episode(1), (SIDE, SIDE, 1)
  grads = {}
  for first_order in (True, False):
    learner = _learner(first_order=first_order, inner_steps=1)
    state = maml.init_state(learner, jax.random.key(0), shape)
    loss = lambda params: maml._query_loss(learner, params, {}, episode, 1)[0]  # noqa: E731
    grads[first_order] = np.asarray(jax.jit(jax.grad(loss))(state.params)["head"]["w"])
  z = np.asarray(episode.support_images, np.float64).reshape(WAY * SHOT, -1)
  w, b = _numpy_steps(z, np.asarray(episode.support_labels), 1, 0.5)
  zq, yq = np.asarray(episode.query_images, np.float64).reshape(WAY * QUERY, -1), np.asarray(episode.query_labels)
  query_gradient = zq.T @ ((_softmax(zq @ w + b) - np.eye(WAY)[yq]) / len(zq))
  np.testing.assert_allclose(grads[True], query_gradient, rtol=1e-4, atol=1e-7)
  assert np.abs(grads[False] - grads[True]).max() > 1e-4


def test_a_meta_batch_averages_its_tasks_query_losses():
  """Finn et al.'s meta-batch: the update's loss (and so its gradient) is the mean of its episodes'."""
  learner = _learner(inner_steps=1, tasks=2)
  state = maml.init_state(learner, jax.random.key(0), (SIDE, SIDE, 1))
  one, two = _episode(2), _episode(3)
  both = jax.tree.map(lambda x, y: jnp.stack([x, y]), one, two)
  single = lambda p, e: maml._query_loss(learner, p, {}, e, 1)[0]  # noqa: E731

  @jax.jit  # one program: eager, the second-order inner loop takes seconds op by op
  def measured(state):
    batched = jax.grad(lambda p: jax.vmap(lambda e: single(p, e))(both).mean())(state.params)
    each = [jax.grad(single)(state.params, e) for e in (one, two)]
    losses = [single(state.params, e) for e in (one, two)]
    return maml.train_step(learner, state, both)[1], batched, each, losses

  metrics, batched, (first, second), losses = measured(state)
  assert float(metrics["loss"]) == pytest.approx(float(sum(losses)) / 2, rel=1e-6)
  expected = jax.tree.map(lambda x, y: (x + y) / 2, first, second)
  for got, want in zip(jax.tree.leaves(batched), jax.tree.leaves(expected)):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-7)


def test_each_option_belongs_to_its_method_and_is_refused_elsewhere():
  assert Config(method="maml").model_name == "MAML" and Config(method="anil", first_order=True).model_name == "FOANIL"
  assert Config(method="maml", meta_head="dr").run_name == "strokes_conv4_MAML_DR_5w1s_seed0"
  assert Config.from_dict({"method": "maml"}).meta_head == "linear"  # a record from before the option
  assert (Config(method="maml").inner_steps, Config(method="maml").test_inner_steps, Config(method="maml").inner_lr) \
      == (1, 3, 0.4)
  assert Config().inner_steps is None and Config().run_name == "strokes_conv4_ProtoNet_S_5w1s_seed0"
  refusals = [(dict(inner_steps=2), "--inner_steps 2 is an option of --method maml or anil; --method protonet does "
               "not use it: drop it, or pass that method."),
              (dict(first_order=True), "--first_order is an option of --method maml or anil"),
              (dict(meta_batch=4), "--meta_batch 4 is an option of --method maml"),
              (dict(method="maml", dataset="omniglot", within_alphabet=True, meta_batch=2), "pass one of them"),
              (dict(method="maml", head="dr"), "--head dr is an option of --method protonet; --method maml does not "
               "use it \\(its adapted head is --meta_head: linear, softmax or dr; it records no diagnostics\\): drop it"),
              (dict(meta_head="dr"), "--meta_head dr is an option of --method maml or anil"),
              (dict(method="anil", centring="both"), "--centring both is an option of --method protonet"),
              (dict(method="anil", dataset="omniglot", test_shifts=1), "--test_shifts 1 is an option of --method protonet"),
              (dict(method="maml", way=5, test_way=20), "--test_way 20 must equal it")]
  for options, words in refusals:
    with pytest.raises(ConfigError, match=words) as refused:
      Config(**options)
    assert "\n" not in str(refused.value)


@pytest.mark.slow  # four short strokes runs
@pytest.mark.parametrize("method, meta_head", [("maml", "linear"), ("anil", "linear"), ("maml", "dr")])
def test_a_meta_learned_run_trains_validates_tests_resumes_and_groups_as_protonet_runs_do(tmp_path, method, meta_head):
  from fewshot.records.rundir import RunDir  # noqa: PLC0415
  from fewshot.train import train, train_group  # noqa: PLC0415

  tiny = dict(method=method, way=3, shot=1, query=2, test_query=2, eval_every=2, val_episodes=2, test_episodes=3,
              inner_steps=2, meta_batch=2 if method == "maml" else 1, meta_head=meta_head)
  straight = train(Config(**tiny, episodes=4), tmp_path / "straight", progress=False)
  assert 0 <= straight["test_accuracy"] <= 100 and straight["model"] == Config(**tiny).model_name
  rows = RunDir(tmp_path / "straight").read_metrics()
  # The DR head's meta-learned temperature is recorded as a ProtoNet DR run's is; the linear head has none.
  assert all((r["theta"] is not None) == (meta_head == "dr") for r in rows)
  assert [r["episode"] for r in rows] == [2, 4] and all(r["val_accuracy"] is not None for r in rows)
  assert not {"alpha", "norm_ratio", "con_alpha"} & set(rows[0])  # no diagnostics recorded, rather than noise
  assert straight["diagnostics"].startswith("not recorded: the update diagnostics compare one embedding")
  # Trained 2 episodes, then resumed to 4: the records of the run trained 4 from the start.
  train(Config(**tiny, episodes=2), tmp_path / "resumed", progress=False)
  resumed = train(Config(**tiny, episodes=4), tmp_path / "resumed", resume=True, progress=False)
  assert {**resumed, "workdir": None} == {**straight, "workdir": None}
  strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
  assert strip(RunDir(tmp_path / "resumed").read_metrics()) == strip(rows)
  # A seed group of seeds 0 and 1 gives seed 0 the run it had alone, float-close (a vmapped program rounds
  # otherwise, BUILD_NOTES "Seed groups"): the same rows, losses to 1e-3. Not its accuracies: at 4 episodes the
  # logits are near ties, and one rounding flips a query (5.6 points of 18), as it did on CI's machine.
  grouped = train_group(Config(**tiny, episodes=4), (0, 1), [tmp_path / "g0", tmp_path / "g1"], progress=False)
  group_rows = RunDir(tmp_path / "g0").read_metrics()
  assert [r["episode"] for r in group_rows] == [2, 4] and set(group_rows[0]) == set(rows[0])
  np.testing.assert_allclose([r["train_loss"] for r in group_rows], [r["train_loss"] for r in rows], rtol=1e-3)
  assert grouped[0]["test_episodes"] == straight["test_episodes"] and 0 <= grouped[0]["test_accuracy"] <= 100
