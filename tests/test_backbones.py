"""Backbones: output sizes, im2col == lax.conv, max-pool and BatchNorm against numpy, initialisation.

XLA's CPU compiler is the cost here (a ResNet18 init or im2col forward takes several
seconds to compile), so each test compiles at most a couple of small programs, and
ResNet18 shapes and parameter counts come from ``jax.eval_shape`` (tracing, no compile).
"""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fewshot import backbones, numerics
from fewshot.backbones import Conv, Conv4, ResNet18, max_pool


@pytest.fixture(autouse=True)
def exact_backbone_products():
  """These tests apply the backbones directly (not through a learner's ``--precision``) and compare them with float64
  references and with each other: pinned to float32, so a GPU's TF32 default does not fail them (docs/numerics.md).
  """
  with numerics.backbone_precision("float32"):
    yield

BN_EPS = 1e-5


def count(tree):
  return sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(tree))


def shapes_of(model, input_shape, train=False):
  """Variable shapes and the output shape, by tracing only."""
  def init_and_apply(key):
    variables = model.init(key, jnp.zeros(input_shape), train=False)
    return variables, model.apply(variables, jnp.zeros(input_shape), train=train, mutable=["batch_stats"])[0]
  return jax.eval_shape(init_and_apply, jax.random.key(0))


# ----------------------------------------------------------------------------- output sizes, parameters


@pytest.mark.parametrize("input_shape,dim", [((2, 84, 84, 3), 1600), ((2, 28, 28, 1), 64)])
def test_conv4_output_dims(input_shape, dim):
  variables, out = shapes_of(Conv4(), input_shape, train=True)
  assert out.shape == (2, dim)
  # 4 x [conv 3x3 with bias, BN]: kernels [3, 3, in, 64].
  params = variables["params"]
  assert [params[f"Conv_{i}"]["kernel"].shape for i in range(4)] == [(3, 3, input_shape[-1], 64)] + [(3, 3, 64, 64)] * 3
  assert all(params[f"Conv_{i}"]["bias"].shape == (64,) for i in range(4))
  assert sorted(variables["batch_stats"]) == [f"BatchNorm_{i}" for i in range(4)]


@pytest.mark.parametrize("input_shape", [(2, 64, 64, 3), (2, 224, 224, 3)])
def test_resnet18_output_dim_and_parameter_count(input_shape):
  variables, out = shapes_of(ResNet18(), input_shape)
  assert out.shape == (2, 512)
  # torchvision.models.resnet18() has 11,689,512 parameters; without its 1000-way fc layer
  # (512 * 1000 + 1000 = 513,000) that is 11,176,512, the same architecture as CloserLook's
  # ResNet18 (BN scale and bias count as parameters, running statistics do not).
  assert count(variables["params"]) == 11_176_512
  # Convolutions have no bias in ResNet18; stride-2 blocks 2, 4, 6 have the 1x1 conv + BN shortcut.
  flat = jax.tree_util.tree_flatten_with_path(variables["params"])[0]
  conv_paths = [jax.tree_util.keystr(path) for path, _ in flat if "Conv" in jax.tree_util.keystr(path) or "conv" in jax.tree_util.keystr(path)]
  assert conv_paths and not any("'bias'" in p for p in conv_paths)
  params = variables["params"]
  assert params["Conv_0"]["kernel"].shape == (7, 7, 3, 64)
  with_shortcut = [i for i in range(8) if "shortcut_conv" in params[f"BasicBlock_{i}"]]
  assert with_shortcut == [2, 4, 6]
  assert [params[f"BasicBlock_{i}"]["shortcut_conv"]["kernel"].shape for i in with_shortcut] == [
      (1, 1, 64, 128), (1, 1, 128, 256), (1, 1, 256, 512)]


def test_resnet12_output_dim_and_parameter_count():
  variables, out = shapes_of(backbones.ResNet12(), (2, 84, 84, 3))
  assert out.shape == (2, 640)
  # Convolutions only (no bias): per block 3x3 c_in->c, two 3x3 c->c and a 1x1 c_in->c shortcut; plus the
  # scale and bias of its four BatchNorms. MetaOptNet's ResNet-12 (without DropBlock) is quoted at ~12.4 M.
  expected, c_in = 0, 3
  for c in (64, 160, 320, 640):
    expected += 9 * c_in * c + 2 * 9 * c * c + c_in * c + 4 * 2 * c
    c_in = c
  assert count(variables["params"]) == expected == 12_424_320
  assert sorted(variables["params"]) == [f"ResNet12Block_{i}" for i in range(4)]


def test_get_backbone():
  assert isinstance(backbones.get_backbone("conv4"), Conv4)
  assert isinstance(backbones.get_backbone("resnet18"), ResNet18)
  with pytest.raises(ValueError, match="conv4, resnet12, resnet18"):
    backbones.get_backbone("resnet50")


def random_resnet_variables(seed=0):
  """ResNet18 variables drawn in numpy (no init to compile): He-like kernels, random BN state."""
  variables = shapes_of(ResNet18(), (1, 224, 224, 3))[0]
  rng = np.random.default_rng(seed)

  def draw(path, leaf):
    name = jax.tree_util.keystr(path)
    if "'kernel'" in name:
      k, _, _, out = leaf.shape
      return jnp.asarray(rng.normal(0, np.sqrt(2 / (k * k * out)), leaf.shape), jnp.float32)
    if "'var'" in name:
      return jnp.asarray(rng.uniform(0.5, 2.0, leaf.shape), jnp.float32)
    if "'scale'" in name:
      return jnp.asarray(rng.uniform(0.5, 1.5, leaf.shape), jnp.float32)
    return jnp.asarray(rng.normal(0, 0.1, leaf.shape), jnp.float32)  # BN bias and running mean

  return jax.tree_util.tree_map_with_path(draw, variables)


def test_resnet18_forward_224_in_eval_mode():
  # lax.conv path: its CPU compile is ~6x faster than im2col's at this size; the two paths
  # are checked equal convolution by convolution in test_conv_im2col_equals_lax_conv.
  model = ResNet18(conv="lax")
  variables = random_resnet_variables()
  forward = jax.jit(lambda v, x: model.apply(v, x, train=False))
  rng = np.random.default_rng(1)
  x = rng.normal(size=(3, 224, 224, 3)).astype(np.float32)
  out_a = np.asarray(forward(variables, x[:2]))
  out_b = np.asarray(forward(variables, x[[0, 2]]))
  assert out_a.shape == (2, 512) and np.all(np.isfinite(out_a))
  assert np.all(out_a >= 0) and np.mean(out_a > 0) > 0.2  # average of ReLU outputs, not all dead
  # Evaluation mode: running statistics, so an image's embedding ignores the rest of the batch.
  np.testing.assert_allclose(out_b[0], out_a[0], rtol=1e-5, atol=1e-6)
  assert np.abs(out_a[1] - out_a[0]).max() > 1e-3


# ----------------------------------------------------------------------------- im2col == lax.conv

# (kernel, stride, features, bias, padding): every convolution of Conv4 and ResNet18, and an unpadded one.
CONV_CONFIGS = [(3, 1, 8, True, None), (7, 2, 8, False, None), (3, 2, 8, False, None), (1, 2, 8, False, None),
                (3, 1, 4, True, 0)]


class ConvStack(nn.Module):
  """Each configuration applied to the same input (odd, non-square spatial size)."""

  conv: str

  @nn.compact
  def __call__(self, x):
    return [Conv(f, k, s, padding=p, use_bias=b, conv=self.conv)(x) for k, s, f, b, p in CONV_CONFIGS]


def weighted_sum(outputs, weights):
  return sum(jnp.sum(o * w) for o, w in zip(outputs, weights))


def assert_close_relative(a, b, rtol=1e-4):
  a, b = np.asarray(a), np.asarray(b)
  assert a.shape == b.shape
  np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.abs(b).max())


@pytest.mark.slow  # 8 s; every form against lax per kernel and stride: tests/test_convolutions.py
def test_conv_im2col_equals_lax_conv():
  rng = np.random.default_rng(2)
  x = jnp.asarray(rng.normal(size=(2, 9, 11, 3)), jnp.float32)
  params = jax.jit(ConvStack("im2col").init)(jax.random.key(0), x)["params"]  # eager init compiles op by op: slow
  # Random biases so that the bias path is compared too.
  params = jax.tree_util.tree_map_with_path(
      lambda p, v: jnp.asarray(rng.normal(size=v.shape), jnp.float32) if "'bias'" in jax.tree_util.keystr(p) else v, params)
  # Output sizes as in PyTorch: floor((H + 2p - k) / s) + 1.
  out_shapes = []
  for k, s, f, _, p in CONV_CONFIGS:
    p = k // 2 if p is None else p
    out_shapes.append((2, (9 + 2 * p - k) // s + 1, (11 + 2 * p - k) // s + 1, f))
  weights = [jnp.asarray(rng.normal(size=s), jnp.float32) for s in out_shapes]
  results = {}
  for conv in ("im2col", "lax"):
    def loss(params, x, conv=conv):
      outs = ConvStack(conv).apply({"params": params}, x)
      return weighted_sum(outs, weights), outs
    results[conv] = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))(params, x)
  ((value_a, outs_a), (gp_a, gx_a)), ((value_b, outs_b), (gp_b, gx_b)) = results["im2col"], results["lax"]
  assert [o.shape for o in outs_a] == [o.shape for o in outs_b] == out_shapes
  for a, b in zip(outs_a, outs_b):  # each configuration on its own
    assert_close_relative(a, b)
  assert float(value_a) == pytest.approx(float(value_b), rel=1e-4)
  assert_close_relative(gx_a, gx_b)
  jax.tree.map(assert_close_relative, gp_a, gp_b)


CONV4_X = np.random.default_rng(3).normal(size=(4, 28, 28, 1)).astype(np.float32)
CONV4_W = np.random.default_rng(4).normal(size=(4, 64)).astype(np.float32)


@functools.lru_cache(maxsize=None)
def conv4_loss_and_grads(conv, whole):
  """Loss sum(w * Conv4(x)) in training mode and its gradients w.r.t. the parameters and x.

  ``whole=False``: ``value_and_grad(jit(loss))``, forward and backward compiled apart (the
  backward reads the forward's saved values); ``whole=True``: ``jit(value_and_grad(loss))``,
  one program, as in the learner's train step.
  """
  model = Conv4(conv=conv)
  variables = conv4_variables()

  def loss(params, x):
    out, _ = model.apply({"params": params, "batch_stats": variables["batch_stats"]}, x, train=True, mutable=["batch_stats"])
    return jnp.sum(out * CONV4_W)

  fn = jax.jit(jax.value_and_grad(loss, argnums=(0, 1))) if whole else jax.value_and_grad(jax.jit(loss), argnums=(0, 1))
  value, (grad_params, grad_x) = fn(variables["params"], jnp.asarray(CONV4_X))
  return float(value), jax.tree.map(np.asarray, grad_params), np.asarray(grad_x)


@functools.lru_cache(maxsize=None)
def conv4_variables():
  return jax.jit(lambda k: Conv4(conv="lax").init(k, jnp.zeros((2, 28, 28, 1)), train=False))(jax.random.key(1))


@pytest.mark.slow  # 9 s; every form against lax per kernel and stride: tests/test_convolutions.py
def test_conv4_im2col_equals_lax_conv_in_values_and_gradients():
  value_a, grad_params_a, grad_x_a = conv4_loss_and_grads("im2col", whole=False)
  value_b, grad_params_b, grad_x_b = conv4_loss_and_grads("lax", whole=False)
  assert value_a == pytest.approx(value_b, rel=1e-4)
  assert_close_relative(grad_x_a, grad_x_b)
  scale = max(np.abs(g).max() for g in jax.tree.leaves(grad_params_b))
  for path, a in jax.tree_util.tree_flatten_with_path(grad_params_a)[0]:
    b = functools.reduce(lambda t, k: t[k.key], path, grad_params_b)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * scale, err_msg=jax.tree_util.keystr(path))
    if "Conv" in jax.tree_util.keystr(path) and "'bias'" in jax.tree_util.keystr(path):
      # A bias followed by training-mode BatchNorm cancels out: its gradient is zero.
      np.testing.assert_allclose(a, 0.0, atol=1e-4 * scale)
  assert np.abs(grad_params_a["Conv_0"]["kernel"]).max() > 0.01 * scale  # gradients reach the first layer


def test_conv4_gradient_is_the_same_compiled_as_one_program():
  # The learner's train step is jit(value_and_grad(loss)). Its gradients must equal those
  # of value_and_grad(jit(loss)) (which match float64 finite differences). They do not:
  # max_pool's jnp.maximum routes the gradient by float equality (x == max), and inside one
  # program XLA recomputes the BatchNorm output feeding the pool with different rounding, so
  # the equality fails on both sides and the gradient of that window is dropped (30-50 %
  # of the Conv4 kernel gradients on CPU). Routing by `jnp.where(view > out, view, out)` fixes it.
  value_a, grad_params_a, grad_x_a = conv4_loss_and_grads("lax", whole=True)
  value_b, grad_params_b, grad_x_b = conv4_loss_and_grads("lax", whole=False)
  assert value_a == pytest.approx(value_b, rel=1e-5)
  for layer in ("Conv_0", "Conv_1", "Conv_2", "Conv_3"):
    a, b = grad_params_a[layer]["kernel"], grad_params_b[layer]["kernel"]
    rel = np.linalg.norm(a - b) / np.linalg.norm(b)
    assert rel < 1e-4, f"{layer} kernel gradient differs by {rel:.1%} when compiled as one program"
  assert_close_relative(grad_x_a, grad_x_b)


# ----------------------------------------------------------------------------- max-pool


def np_max_pool(x, window, stride, pad):
  """Loop reference with PyTorch semantics: -inf padding, floored output size."""
  n, h, w, c = x.shape
  xp = np.full((n, h + 2 * pad, w + 2 * pad, c), -np.inf)
  xp[:, pad:pad + h, pad:pad + w] = x
  out_h, out_w = (h + 2 * pad - window) // stride + 1, (w + 2 * pad - window) // stride + 1
  out = np.empty((n, out_h, out_w, c))
  argmax = np.empty((n, out_h, out_w, c, 2), dtype=int)  # position in x of each maximum
  for b in range(n):
    for i in range(out_h):
      for j in range(out_w):
        for ch in range(c):
          patch = xp[b, i * stride:i * stride + window, j * stride:j * stride + window, ch]
          out[b, i, j, ch] = patch.max()
          di, dj = np.unravel_index(np.argmax(patch), patch.shape)
          argmax[b, i, j, ch] = (i * stride + di - pad, j * stride + dj - pad)
  return out, argmax


@pytest.mark.parametrize("window,stride,pad,size", [(2, 2, 0, (7, 9)), (2, 2, 0, (8, 5)), (3, 2, 1, (7, 10)), (3, 2, 1, (9, 9))])
def test_max_pool_matches_numpy(window, stride, pad, size):
  rng = np.random.default_rng(4)
  x = rng.normal(size=(2, *size, 3)).astype(np.float32) - 3.0  # mostly negative: zero padding would show
  ref, argmax = np_max_pool(x.astype(np.float64), window, stride, pad)
  cot = rng.normal(size=ref.shape)
  pool = jax.jit(lambda x: max_pool(x, window, stride, pad))
  got = np.asarray(pool(x))
  assert got.shape == ref.shape
  np.testing.assert_array_equal(got, ref.astype(np.float32))
  # Gradient: each window sends its cotangent to its maximum (continuous input: no ties).
  grad = np.asarray(jax.jit(jax.grad(lambda x: jnp.sum(max_pool(x, window, stride, pad) * cot)))(x))
  ref_grad = np.zeros(x.shape)
  for idx in np.ndindex(*ref.shape):
    b, _, _, ch = idx
    i, j = argmax[idx]
    ref_grad[b, i, j, ch] += cot[idx]
  np.testing.assert_allclose(grad, ref_grad, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- BatchNorm and init


def np_conv_same(x, kernel, bias):
  """3x3 cross-correlation (PyTorch's convolution) with zero padding 1, float64."""
  x, kernel = np.asarray(x, np.float64), np.asarray(kernel, np.float64)
  n, h, w, _ = x.shape
  xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
  out = np.zeros((n, h, w, kernel.shape[-1]))
  for i in range(3):
    for j in range(3):
      out += np.einsum("nhwc,co->nhwo", xp[:, i:i + h, j:j + w], kernel[i, j])
  return out + np.asarray(bias, np.float64)


@pytest.fixture(scope="module")
def conv4_setup():
  """Conv4 variables with random BN affine parameters and running statistics, and a batch."""
  rng = np.random.default_rng(5)
  x = jnp.asarray(rng.normal(size=(4, 28, 28, 1)), jnp.float32)
  variables = conv4_variables()
  params = {k: dict(v) for k, v in variables["params"].items()}
  stats = {k: dict(v) for k, v in variables["batch_stats"].items()}
  for i in range(4):
    params[f"BatchNorm_{i}"] = {"scale": jnp.asarray(rng.uniform(0.5, 1.5, 64), jnp.float32),
                                "bias": jnp.asarray(rng.normal(0, 0.3, 64), jnp.float32)}
    stats[f"BatchNorm_{i}"] = {"mean": jnp.asarray(rng.normal(0, 0.2, 64), jnp.float32),
                               "var": jnp.asarray(rng.uniform(0.5, 2.0, 64), jnp.float32)}
  params["Conv_0"]["bias"] = jnp.asarray(rng.normal(0, 0.1, 64), jnp.float32)
  others = jnp.asarray(rng.normal(size=(3, 28, 28, 1)), jnp.float32)
  return {"params": params, "batch_stats": stats}, x, others


def apply_with_intermediates(train):
  # BatchNorm does not care how the convolution is computed; lax.conv compiles fastest.
  mutable = ["batch_stats", "intermediates"] if train else ["intermediates"]
  return jax.jit(lambda v, x: Conv4(conv="lax").apply(v, x, train=train, capture_intermediates=True, mutable=mutable))


def test_batchnorm_train_uses_batch_statistics_and_updates_running_ones(conv4_setup):
  variables, x, others = conv4_setup
  forward = apply_with_intermediates(train=True)
  out, state = forward(variables, x)
  assert out.shape == (4, 64)
  inter = state["intermediates"]
  conv0 = np.asarray(inter["Conv_0"]["__call__"][0], np.float64)
  np.testing.assert_allclose(conv0, np_conv_same(x, variables["params"]["Conv_0"]["kernel"], variables["params"]["Conv_0"]["bias"]),
                             rtol=1e-4, atol=1e-5)
  # The first BN normalises with the batch's own mean and (biased) variance.
  mean, var = conv0.mean(axis=(0, 1, 2)), conv0.var(axis=(0, 1, 2))
  bn = variables["params"]["BatchNorm_0"]
  ref = (conv0 - mean) / np.sqrt(var + BN_EPS) * np.asarray(bn["scale"]) + np.asarray(bn["bias"])
  np.testing.assert_allclose(np.asarray(inter["BatchNorm_0"]["__call__"][0]), ref, rtol=1e-4, atol=1e-4)
  # Running statistics of every layer: new = 0.9 * old + 0.1 * batch statistic (PyTorch momentum 0.1).
  for i in range(4):
    conv = np.asarray(inter[f"Conv_{i}"]["__call__"][0], np.float64)
    old = variables["batch_stats"][f"BatchNorm_{i}"]
    new = state["batch_stats"][f"BatchNorm_{i}"]
    np.testing.assert_allclose(np.asarray(new["mean"]), 0.9 * np.asarray(old["mean"]) + 0.1 * conv.mean(axis=(0, 1, 2)),
                               rtol=1e-4, atol=1e-6)
    # Flax updates with the biased batch variance, PyTorch with the unbiased one; they differ
    # by n / (n - 1), n = batch * H * W (36 at the 3x3 input of layer 4): accept either.
    n = conv.shape[0] * conv.shape[1] * conv.shape[2]
    np.testing.assert_allclose(np.asarray(new["var"]), 0.9 * np.asarray(old["var"]) + 0.1 * conv.var(axis=(0, 1, 2)),
                               rtol=max(1e-4, 1.5 / n))
  # An element's output depends on the rest of the batch.
  out_other, _ = forward(variables, jnp.concatenate([x[:1], others]))
  assert np.abs(np.asarray(out_other[0]) - np.asarray(out[0])).max() > 1e-2


def test_batchnorm_eval_uses_running_statistics(conv4_setup):
  variables, x, others = conv4_setup
  forward = apply_with_intermediates(train=False)
  out, state = forward(variables, x)
  inter = state["intermediates"]
  conv0 = np.asarray(inter["Conv_0"]["__call__"][0], np.float64)
  bn, stats = variables["params"]["BatchNorm_0"], variables["batch_stats"]["BatchNorm_0"]
  ref = ((conv0 - np.asarray(stats["mean"])) / np.sqrt(np.asarray(stats["var"]) + BN_EPS) * np.asarray(bn["scale"])
         + np.asarray(bn["bias"]))
  np.testing.assert_allclose(np.asarray(inter["BatchNorm_0"]["__call__"][0]), ref, rtol=1e-4, atol=1e-4)
  # An element's output is independent of the rest of the batch.
  out_other, _ = forward(variables, jnp.concatenate([x[:1], others]))
  np.testing.assert_allclose(np.asarray(out_other[0]), np.asarray(out[0]), rtol=1e-5, atol=1e-6)
  assert np.abs(np.asarray(out[1]) - np.asarray(out[0])).max() > 1e-2


def test_conv4_initialisation():
  variables = conv4_variables()
  params = variables["params"]
  # He fan-out: N(0, 2 / (3 * 3 * 64)) for every layer, whatever its input channels.
  std = np.sqrt(2 / (9 * 64))
  kernels = [np.asarray(params[f"Conv_{i}"]["kernel"], np.float64).ravel() / std for i in range(4)]
  pooled = np.concatenate(kernels)  # 576 + 3 * 36864 standardised draws
  assert abs(pooled.mean()) < 0.02  # standard error 0.003
  assert pooled.var() == pytest.approx(1.0, abs=0.03)  # standard error 0.004
  assert kernels[0].var() == pytest.approx(1.0, abs=0.3)  # the 576 weights of the first layer alone (s.e. 0.06)
  # A normal, not a truncated normal: 4.55 % beyond two standard deviations.
  assert np.mean(np.abs(pooled) > 2) == pytest.approx(0.0455, abs=0.004)
  # Different layers are different draws.
  assert not np.allclose(kernels[1], kernels[2])
  for i in range(4):
    np.testing.assert_array_equal(np.asarray(params[f"Conv_{i}"]["bias"]), 0.0)
    np.testing.assert_array_equal(np.asarray(params[f"BatchNorm_{i}"]["scale"]), 1.0)
    np.testing.assert_array_equal(np.asarray(params[f"BatchNorm_{i}"]["bias"]), 0.0)
    np.testing.assert_array_equal(np.asarray(variables["batch_stats"][f"BatchNorm_{i}"]["mean"]), 0.0)
    np.testing.assert_array_equal(np.asarray(variables["batch_stats"][f"BatchNorm_{i}"]["var"]), 1.0)
