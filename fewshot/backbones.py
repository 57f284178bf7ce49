"""Backbones (flax.linen): Conv4, ResNet-12 and the CloserLook ResNet18, trained from scratch.

Each takes float images ``[batch, H, W, C]`` and returns flat embeddings ``[batch, D]``.
BatchNorm follows PyTorch's defaults (eps 1e-5, momentum 0.1, i.e. Flax momentum 0.9):
batch statistics while training (support and query forwarded together), running
statistics at evaluation (``train=False``).

Any other ``flax.linen`` module with that contract trains too, passed from Python
(``fewshot.train.train(config, workdir, backbone=MyNet())``): a ``__call__(self, x, train)``
gets ``train`` as the built-in ones do (BatchNorm needs it), a ``__call__(self, x)`` is called
without it (:func:`call_options`).
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from fewshot import choices, convolutions
from fewshot.errors import ConfigError

# He initialisation with fan-out, as in the reference code: N(0, 2 / (k*k*out_channels)).
he_fan_out = nn.initializers.variance_scaling(2.0, "fan_out", "normal")


def _batch_norm(train: bool, name: str | None = None) -> nn.BatchNorm:
  return nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5, name=name)


def max_pool(x: jnp.ndarray, window: int, stride: int, pad: int = 0) -> jnp.ndarray:
  """Max-pooling as an elementwise maximum of strided views; floors odd sizes like PyTorch.

  Not ``nn.max_pool``: XLA lowers the gradient of a windowed max to select-and-scatter,
  which is several times slower on CPU than the gradient of an elementwise maximum.
  """
  views = convolutions.window_slices(x, window, stride, pad, -jnp.inf)
  out = views[0]
  for view in views[1:]:
    # A select, not jnp.maximum: maximum's gradient tests `x == max`, and when forward and
    # backward compile together XLA may recompute x with different rounding, silently
    # dropping the window's gradient (30-50% error in Conv4's kernel gradients on CPU).
    # The select also sends ties to the first element, as PyTorch does.
    out = jnp.where(view > out, view, out)
  return out


class Conv(nn.Module):
  """A square convolution with ``nn.Conv``'s parameters (``kernel`` [k, k, in, out], ``bias``).

  ``conv`` is its form (:mod:`fewshot.convolutions`, ``--conv``): ``auto`` is im2col + one matrix product on the
  CPU, where XLA's convolutions (their gradients above all) run about ten times slower inside a ``lax.scan``
  body than outside it (jax-ml/jax#12868) and matrix products do not, and ``lax.conv`` elsewhere. Every form gives
  the same numbers to float rounding, so a checkpoint trained in one form loads in another.
  """

  features: int
  kernel_size: int = 3
  strides: int = 1
  padding: int | None = None  # None: SAME for odd kernels
  use_bias: bool = True
  conv: str = "auto"

  @nn.compact
  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    k, in_features = self.kernel_size, x.shape[-1]
    pad = k // 2 if self.padding is None else self.padding
    kernel = self.param("kernel", he_fan_out, (k, k, in_features, self.features))
    y = convolutions.conv(x, kernel, self.strides, pad, self.conv)
    if self.use_bias:
      y = y + self.param("bias", nn.initializers.zeros, (self.features,))
    return y


class Conv4(nn.Module):
  """4 × [3×3 conv (64, SAME, bias) → BatchNorm → ReLU → 2×2 max-pool], flattened.

  84×84×3 → 5×5×64 = 1600-d; 28×28×1 → 1×1×64 = 64-d.
  """

  features: int = 64
  depth: int = 4
  conv: str = "auto"  # the convolutions' form (fewshot.convolutions)

  @nn.compact
  def __call__(self, x: jnp.ndarray, train: bool = True) -> jnp.ndarray:
    for _ in range(self.depth):
      x = Conv(self.features, 3, conv=self.conv)(x)
      x = nn.relu(_batch_norm(train)(x))
      x = max_pool(x, 2, 2)
    return x.reshape(x.shape[0], -1)


class BasicBlock(nn.Module):
  features: int
  strides: int = 1
  conv: str = "auto"  # the convolutions' form (fewshot.convolutions)

  @nn.compact
  def __call__(self, x: jnp.ndarray, train: bool) -> jnp.ndarray:
    layer = lambda f, k, s, name=None: Conv(f, k, s, use_bias=False, conv=self.conv, name=name)  # noqa: E731
    y = nn.relu(_batch_norm(train)(layer(self.features, 3, self.strides)(x)))
    y = _batch_norm(train)(layer(self.features, 3, 1)(y))
    if self.strides != 1 or x.shape[-1] != self.features:
      x = _batch_norm(train, "shortcut_bn")(layer(self.features, 1, self.strides, "shortcut_conv")(x))
    return nn.relu(x + y)


class ResNet18(nn.Module):
  """CloserLook ResNet18: 7×7/2 conv → BN → ReLU → 3×3/2 max-pool → 4 × 2 basic blocks → global average pool.

  224×224×3 → 512-d.
  """

  stage_features: tuple[int, ...] = (64, 128, 256, 512)
  blocks_per_stage: int = 2
  conv: str = "auto"  # the convolutions' form (fewshot.convolutions)

  @nn.compact
  def __call__(self, x: jnp.ndarray, train: bool = True) -> jnp.ndarray:
    x = Conv(64, 7, 2, use_bias=False, conv=self.conv)(x)
    x = nn.relu(_batch_norm(train)(x))
    x = max_pool(x, 3, 2, pad=1)
    for stage, features in enumerate(self.stage_features):
      for block in range(self.blocks_per_stage):
        x = BasicBlock(features, 2 if stage > 0 and block == 0 else 1, self.conv)(x, train)
    return x.mean(axis=(1, 2))


class ResNet12Block(nn.Module):
  """3 × [3×3 conv → BatchNorm] (LeakyReLU 0.1 between), a 1×1 conv + BatchNorm shortcut, LeakyReLU, 2×2 max-pool."""

  features: int
  conv: str = "auto"  # the convolutions' form (fewshot.convolutions)

  @nn.compact
  def __call__(self, x: jnp.ndarray, train: bool) -> jnp.ndarray:
    layer = lambda k, name=None: Conv(self.features, k, use_bias=False, conv=self.conv, name=name)  # noqa: E731
    y = x
    for i in range(3):
      y = _batch_norm(train)(layer(3)(y))
      if i < 2:
        y = nn.leaky_relu(y, 0.1)
    shortcut = _batch_norm(train, "shortcut_bn")(layer(1, "shortcut_conv")(x))
    return max_pool(nn.leaky_relu(y + shortcut, 0.1), 2, 2)


class ResNet12(nn.Module):
  """The ResNet-12 of most few-shot results since 2018 (Oreshkin et al.; Lee et al.'s MetaOptNet, without
  DropBlock): four residual blocks of 64-160-320-640 channels, then a global average pool.

  84×84×3 → 5×5×640 → 640-d; about 12.4 M parameters.
  """

  stage_features: tuple[int, ...] = (64, 160, 320, 640)
  conv: str = "auto"  # the convolutions' form (fewshot.convolutions)

  @nn.compact
  def __call__(self, x: jnp.ndarray, train: bool = True) -> jnp.ndarray:
    for features in self.stage_features:
      x = ResNet12Block(features, self.conv)(x, train)
    return x.mean(axis=(1, 2))


BACKBONES: dict[str, Callable[[], nn.Module]] = {"conv4": Conv4, "resnet12": ResNet12, "resnet18": ResNet18}
assert tuple(BACKBONES) == choices.BACKBONES


def get_backbone(name: str, conv: str = "auto") -> nn.Module:
  """A backbone by name (``conv4``, ``resnet12`` or ``resnet18``), its convolutions in form ``conv`` (``--conv``)."""
  if name not in BACKBONES:
    raise ValueError(f"Unknown backbone {name!r}; choose one of {', '.join(BACKBONES)}.")
  return BACKBONES[name](conv=conv)


@functools.cache
def _takes_train(module_type: type) -> bool:
  return "train" in inspect.signature(module_type.__call__).parameters


def call_options(module: nn.Module, train: bool) -> dict:
  """The keyword arguments a backbone is called with: ``{"train": train}`` if its ``__call__`` takes it, else none.

  >>> call_options(Conv4(), False)
  {'train': False}
  """
  return {"train": train} if _takes_train(type(module)) else {}


def check_output(module: nn.Module, input_shape: tuple[int, ...]) -> int:
  """The embedding dimension ``D`` of a backbone, from tracing its initialisation on ``[2, *input_shape]`` images;
  a one-line ``ConfigError`` naming the module and what it returned unless that is ``[2, D]``.
  """
  images = jax.ShapeDtypeStruct((2, *input_shape), jnp.float32)
  init = functools.partial(module.init_with_output, **call_options(module, False))
  out, _ = jax.eval_shape(init, jax.random.key(0), images)
  if getattr(out, "ndim", None) != 2 or out.shape[0] != 2:
    got = f"shape {tuple(out.shape)}" if hasattr(out, "shape") else f"a {type(out).__name__}"
    raise ConfigError(f"backbone {type(module).__name__} returned {got} for images of shape {images.shape}; a "
                      "backbone maps images [n, H, W, C] to embeddings [n, D] (flatten or pool its output).")
  return out.shape[1]
