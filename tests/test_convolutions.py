"""The convolution's forms (``--conv``): every form gives ``lax`` 's values and gradients, for one run and for a seed
group's runs under ``vmap``, computes what it says it does, and trains a group as ``lax`` does; the option.

Each form is compared with ``lax`` dense, run by run, then stacked: the reference a seed group must equal.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot import backbones, convolutions, numerics
from fewshot.config import Config
from fewshot.dml.config import DMLConfig
from fewshot.episodic import learners, learning
from fewshot.episodic.episodes import EpisodeShape
from fewshot.errors import ConfigError
from fewshot.training.train_state import run_keys

FORMS = convolutions.FORMS
RUNS = 3


@pytest.fixture(autouse=True)
def exact_products():
  """Pinned to float32, as the backbones' tests are, so that a GPU's TF32 default does not fail them."""
  with numerics.backbone_precision("float32"):
    yield


def assert_close(a, b, rtol=1e-4):
  a, b = np.asarray(a), np.asarray(b)
  assert a.shape == b.shape
  np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.abs(b).max())


def group_arrays(k: int, stride: int, seed: int = 0):
  """RUNS runs' images ``[R, 2, 9, 11, 3]`` (odd, non-square), kernels and output weights."""
  rng = np.random.default_rng(seed)
  pad = k // 2  # 'SAME' for the odd kernels the backbones use
  out_h, out_w = (9 + 2 * pad - k) // stride + 1, (11 + 2 * pad - k) // stride + 1
  normal = lambda *shape: jnp.asarray(rng.normal(size=shape), jnp.float32)  # noqa: E731
  return normal(RUNS, 2, 9, 11, 3), normal(RUNS, k, k, 3, 4), normal(RUNS, 2, out_h, out_w, 4), pad


def loss_fn(form: str, stride: int, pad: int):
  def loss(x, kernel, weights):
    y = convolutions.conv(x, kernel, stride, pad, form)
    return jnp.sum(y * weights), y
  return loss


def value_and_grads(form, stride, pad):
  return jax.value_and_grad(loss_fn(form, stride, pad), argnums=(0, 1), has_aux=True)


# (kernel, stride): Conv4's and ResNet12's 3x3, ResNet18's strided 3x3 and 1x1 shortcut (its 7x7 stem: im2col and lax
# in tests/test_backbones.py; every form is the same code at every size).
@pytest.mark.parametrize("k, stride", [(3, 1), (3, 2), (1, 2)])
def test_every_form_gives_lax_s_values_and_gradients_for_a_group_and_a_lone_run(k, stride):
  x, kernel, weights, pad = group_arrays(k, stride)
  dense = jax.jit(value_and_grads("lax", stride, pad))
  per_run = [dense(x[r], kernel[r], weights[r]) for r in range(RUNS)]
  (want_loss, want_y), (want_dx, want_dk) = jax.tree.map(lambda *runs: jnp.stack(runs), *per_run)
  for form in FORMS:
    (loss, y), (dx, dk) = jax.jit(jax.vmap(value_and_grads(form, stride, pad)))(x, kernel, weights)
    for got, want in ((loss, want_loss), (y, want_y), (dx, want_dx), (dk, want_dk)):
      assert_close(got, want)
    (loss, y), (dx, dk) = jax.jit(value_and_grads(form, stride, pad))(x[0], kernel[0], weights[0])
    for got, want in ((loss, want_loss[0]), (y, want_y[0]), (dx, want_dx[0]), (dk, want_dk[0])):
      assert_close(got, want)


def test_the_gradient_of_a_vmapped_group_and_of_one_kernel_over_a_batch_equal_lax_s():
  x, kernel, weights, pad = group_arrays(3, 1, seed=1)
  group_loss = lambda form: lambda x, k: jax.vmap(loss_fn(form, 1, pad))(x, k, weights)[0].sum()  # noqa: E731

  def shared(form):  # one kernel for every image batch: the map form leaves it to the dense convolution's batching
    return jax.vmap(jax.grad(lambda x, k, w: loss_fn(form, 1, pad)(x, k, w)[0], argnums=(0, 1)), in_axes=(0, None, 0))

  want = jax.jit(jax.grad(group_loss("lax"), argnums=(0, 1)))(x, kernel), jax.jit(shared("lax"))(x, kernel[0], weights)
  for form in FORMS:
    got = jax.jit(jax.grad(group_loss(form), argnums=(0, 1)))(x, kernel), jax.jit(shared(form))(x, kernel[0], weights)
    jax.tree.map(assert_close, got, want)


@pytest.mark.parametrize("per_task", [True, False], ids=["maml", "anil"])
def test_nested_vmaps_map_at_every_level(per_task):
  """A group's runs around MAML's tasks: each task's own kernel (MAML), or one kernel over the tasks (ANIL)."""
  rng = np.random.default_rng(3)
  x = jnp.asarray(rng.normal(size=(RUNS, 2, 2, 7, 7, 3)), jnp.float32)  # runs, tasks, images
  kernel = jnp.asarray(rng.normal(size=(RUNS, 2, 3, 3, 3, 4) if per_task else (RUNS, 3, 3, 3, 4)), jnp.float32)

  def program(form):
    task_loss = lambda x, k: jnp.sum(jnp.sin(convolutions.conv(x, k, 1, 1, form)))  # noqa: E731
    run_loss = lambda x, k: jax.vmap(task_loss, in_axes=(0, 0 if per_task else None))(x, k).sum()  # noqa: E731
    return jax.jit(jax.vmap(jax.grad(run_loss, argnums=(0, 1))))

  want = program("lax")(x, kernel)
  jax.tree.map(assert_close, program("map")(x, kernel), want)
  assert not re.findall(r"(?:feature|batch)_group_count = [2-9]", program("map").lower(x, kernel).as_text())


def test_every_form_differentiates_twice_as_maml_s_meta_gradient_does():
  x, kernel, _, pad = group_arrays(3, 1, seed=2)

  def meta_loss(form):
    def inner(kernel, x):
      step = jax.grad(lambda k: jnp.sum(jnp.sin(convolutions.conv(x, k, 1, pad, form))))(kernel)
      return jnp.sum(jnp.cos(convolutions.conv(x, kernel - 0.01 * step, 1, pad, form)))
    return jax.jit(jax.vmap(jax.grad(inner)))

  want = meta_loss("lax")(kernel, x)
  for form in FORMS:
    assert_close(meta_loss(form)(kernel, x), want, rtol=1e-3)  # second derivatives through sin and cos


def _products(text: str) -> list[str]:
  return re.findall(r"stablehlo\.(?:convolution|dot_general).*", text)


def test_under_a_group_s_vmap_each_form_lowers_as_it_says_at_the_backbone_s_precision():
  x, kernel, weights, pad = group_arrays(3, 2)

  def lowered(form):
    def loss(x, kernel, weights):
      with numerics.backbone_precision("tensorfloat32"):  # the forward's; the backward is traced after it
        return jnp.sum(convolutions.conv(x, kernel, 2, pad, form) * weights)
    return jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1)))).lower(x, kernel, weights).as_text()

  grouped = lambda text: re.findall(r"(?:feature|batch)_group_count = ([2-9])", text)  # noqa: E731
  texts = {form: lowered(form) for form in FORMS}
  assert grouped(texts["lax"])  # vmap makes the runs' convolutions one grouped convolution
  assert not grouped(texts["map"]) and "stablehlo.while" in texts["map"]  # dense convolutions, mapped over runs
  batched_dots = [p for p in _products(texts["im2col_grad"]) if "batching_dims = [0] x [0]" in p]
  # The kernel gradient: per run, patches [3·3·3, images·positions] times the output gradient.
  assert len(batched_dots) == 1 and batched_dots[0].endswith("-> tensor<3x27x4xf32>"), batched_dots
  for form, text in texts.items():
    found = _products(text)
    assert found and all("HIGH" in p and "HIGHEST" not in p for p in found), (form, found)


@pytest.fixture(scope="module")
def group_start():
  """Two runs' initial states, stacked (every form has the same parameters), and three episodes for each run."""
  with numerics.backbone_precision("float32"):
    learner = learning.EpisodicLearner(backbones.Conv4(features=8, depth=2), EpisodeShape(3, 1, 2), head="dr")
    keys = jnp.stack([run_keys(seed)["init"] for seed in (0, 1)])
    states = jax.jit(jax.vmap(lambda key: learning.init_state(learner, key, (28, 28, 1))))(keys)
  rng = np.random.default_rng(0)
  labels = lambda per_class: jnp.tile(jnp.repeat(jnp.arange(3, dtype=jnp.int32), per_class), (2, 1))  # noqa: E731
  images = lambda n: jnp.asarray(rng.integers(0, 256, (2, n, 28, 28, 1)), jnp.uint8)  # noqa: E731
  episodes = [learning.Episode(support_images=images(3), support_labels=labels(1), query_images=images(6),
                               query_labels=labels(2), classes=labels(1)) for _ in range(3)]
  return states, episodes


def group_losses(form: str, states, episodes) -> np.ndarray:
  """``[runs, steps]`` losses of a seed group's step (the single run's, vmapped over the runs) under ``form``."""
  learner = learning.EpisodicLearner(backbones.Conv4(features=8, depth=2, conv=form), EpisodeShape(3, 1, 2),
                                     head="dr")
  step = jax.jit(jax.vmap(lambda state, episode: learning.train_step(learner, state, episode)[:2]))
  losses = []
  for episode in episodes:
    states, metrics = step(states, episode)
    losses.append(np.asarray(metrics["loss"]))
  return np.stack(losses, axis=1)


@pytest.mark.slow  # 10 s; the forms' values and gradients, which decide the losses, are the default tier's
def test_a_seed_group_trains_to_lax_s_losses_in_every_form(group_start):
  want = group_losses("lax", *group_start)
  for form in FORMS[1:]:
    np.testing.assert_allclose(group_losses(form, *group_start), want, rtol=1e-5)


def test_im2col_flip_is_im2col_s_forward_bit_for_bit_and_its_input_gradient_a_forward_convolution():
  x, kernel, weights, pad = group_arrays(3, 1, seed=4)
  y = lambda form: jax.jit(lambda x, k: convolutions.conv(x, k, 1, pad, form))(x[0], kernel[0])  # noqa: E731
  np.testing.assert_array_equal(np.asarray(y("im2col_flip")), np.asarray(y("im2col")))
  input_gradient = lambda form: jax.jit(jax.grad(lambda x: loss_fn(form, 1, pad)(x, kernel[0], weights[0])[0]))  # noqa: E731
  products = lambda form: _products(input_gradient(form).lower(x[0]).as_text())  # noqa: E731
  # [images, positions, k²·out] x [k²·out, in]: the output gradient's patches times the flipped kernel, where im2col
  # multiplies out back to k²·in columns and folds them onto the image.
  assert any(p.endswith("tensor<36x3xf32>) -> tensor<2x9x11x3xf32>") for p in products("im2col_flip")), products("im2col_flip")
  assert not any(p.endswith("tensor<36x3xf32>) -> tensor<2x9x11x3xf32>") for p in products("im2col")), products("im2col")
  assert_close(input_gradient("im2col_flip")(x[0]), input_gradient("lax")(x[0]))


def test_auto_is_im2col_flip_on_the_cpu_and_lax_elsewhere():
  assert convolutions.resolve("auto", "cpu") == "im2col_flip" and convolutions.resolve(None, "cpu") == "im2col_flip"
  assert convolutions.resolve("auto", "gpu") == convolutions.resolve("auto", "tpu") == "lax"
  assert convolutions.resolve("map", "cpu") == "map"
  with pytest.raises(ValueError, match="auto, lax, im2col, map, im2col_grad, im2col_flip"):
    convolutions.resolve("fast")


@pytest.mark.parametrize("config_type", [Config, DMLConfig])
def test_conv_is_an_option_recorded_and_refused_in_one_line(config_type):
  assert config_type().conv == "auto"
  assert config_type(conv="map").to_dict()["conv"] == "map"
  old = config_type().to_dict()
  del old["conv"]
  assert config_type.from_dict(old).conv == "auto"  # a run from before the option: today's form, as then
  with pytest.raises(ConfigError) as info:
    config_type(conv="fast")
  assert str(info.value) == "unknown --conv 'fast'; choose one of auto, lax, im2col, map, im2col_grad, im2col_flip."


def test_the_option_reaches_the_built_in_backbones_and_refuses_a_custom_one():
  assert learners.build_learner(Config(conv="im2col_grad")).backbone.conv == "im2col_grad"
  assert backbones.get_backbone("resnet12", "map").conv == "map"
  with pytest.raises(ConfigError, match="^--conv map chooses the built-in backbones' convolutions") as info:
    learners.build_learner(Config(conv="map"), backbone=backbones.Conv4())
  assert "\n" not in str(info.value)
