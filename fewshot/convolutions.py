"""A backbone convolution's forms: one square NHWC convolution (kernel HWIO, symmetric zero padding), computed in
several ways that give the same values and gradients to float rounding; ``--conv`` chooses one.

The forms differ only where a seed group ``vmap`` s the training step over its runs, each run with its own kernel:

* ``lax``: ``lax.conv_general_dilated``. Under ``vmap`` it becomes one convolution with ``feature_group_count`` =
  runs, and its kernel gradient one with ``batch_group_count`` = runs, which cuDNN runs far below a dense
  convolution's rate (jax-ml/jax#13800, #26266, #26568).
* ``im2col``: the image's patches times the kernel as one matrix product; under ``vmap`` a batched product.
* ``map``: ``lax`` for one run; under ``vmap`` with a batched kernel, a ``lax.map`` over the run axis, each run a
  dense convolution, forward and backward (the rest of the step stays ``vmap`` ped).
* ``im2col_grad``: ``lax`` forward and input gradient; the kernel gradient as patches times the output gradient,
  under ``vmap`` a batched matrix product instead of a batch-grouped convolution.
* ``auto``: :data:`AUTO` 's form for the backend.

``map`` is a ``jax.custom_vjp`` whose forward and backward are each a ``jax.custom_batching.custom_vmap`` function
(a ``custom_vmap`` function alone has no reverse-mode derivative). Their rules map over the axis where the kernel is
batched; where it is not (a batch of images under one kernel), they fall back to the dense function's own batching,
which folds the axis into the images' and stays dense. The custom forms' derivatives are traced after the forward
pass, outside the backbone's ``--precision`` context, so the precision the forward saw travels with them as a static
argument (:func:`current_precision`).
"""

from __future__ import annotations

import contextlib
import functools

import jax
import jax.numpy as jnp

from fewshot import choices

# The form --conv auto takes on each backend (any other: lax). On the CPU, im2col: XLA's CPU convolutions (their
# gradients above all) run about ten times slower inside a lax.scan body than outside it (jax-ml/jax#12868), matrix
# products do not. On GPUs and TPUs, lax until measured: the device check (experiments/device_check.py, its
# bench_runs --conv lax,im2col,map,im2col_grad step: groups of 1, 8 and 32 at 28 and 84 px) fills in each backend's
# winner here, keyed by input side too where the sides' winners differ.
AUTO = {"cpu": "im2col", "gpu": "lax", "tpu": "lax"}
FORMS = choices.CONV_FORMS[1:]  # the forms themselves, "auto" aside


def resolve(form: str | None, backend: str | None = None) -> str:
  """The form ``--conv form`` computes on ``backend`` (default JAX's): ``auto`` (or None) as :data:`AUTO` says."""
  if form in (None, "auto"):
    backend = jax.default_backend() if backend is None else backend
    return AUTO.get(backend, "lax")
  if form not in FORMS:
    raise ValueError(f"Unknown convolution form {form!r}; choose one of {', '.join(choices.CONV_FORMS)}.")
  return form


def window_slices(x: jnp.ndarray, window: int, stride: int, pad: int, pad_value: float) -> list[jnp.ndarray]:
  """The ``window²`` strided views of ``x`` whose stacking would be its im2col patches."""
  n, h, w, c = x.shape
  if pad:
    x = jnp.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)), constant_values=pad_value)
  out_h, out_w = (h + 2 * pad - window) // stride + 1, (w + 2 * pad - window) // stride + 1
  return [
      x[:, i : i + stride * (out_h - 1) + 1 : stride, j : j + stride * (out_w - 1) + 1 : stride, :]
      for i in range(window)
      for j in range(window)
  ]


def patches(x: jnp.ndarray, window: int, stride: int, pad: int) -> jnp.ndarray:
  """im2col: ``[n, out_h, out_w, window² · C]``, the window's rows, then its columns, then the channels."""
  return jnp.concatenate(window_slices(x, window, stride, pad, 0.0), axis=-1)


def lax_conv(x, kernel, stride: int, pad: int) -> jnp.ndarray:
  return jax.lax.conv_general_dilated(x, kernel, (stride,) * 2, [(pad, pad)] * 2,
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))


def im2col_conv(x, kernel, stride: int, pad: int) -> jnp.ndarray:
  k, _, c, out = kernel.shape
  return patches(x, k, stride, pad) @ kernel.reshape(k * k * c, out)


def current_precision() -> str | None:
  """The default matmul precision in force where the forward pass is traced (``--precision`` 's context), by name."""
  return jax.config.jax_default_matmul_precision


def _under(precision: str | None):
  return contextlib.nullcontext() if precision is None else jax.default_matmul_precision(precision)


def _mapped_over_kernels(dense):
  """``dense`` (arrays, the kernel second, to arrays) whose ``vmap`` over a batched kernel is a ``lax.map``."""
  mapped = jax.custom_batching.custom_vmap(dense)

  @mapped.def_vmap
  def rule(axis_size, in_batched, *args):
    leaves, tree = jax.tree.flatten(args)
    batched = jax.tree.leaves(in_batched)  # the kernel's is the second: x, then the kernel, lead every call
    if not batched[1]:  # one kernel: the dense function's own batching folds the axis in and stays dense
      axes = jax.tree.unflatten(tree, [0 if b else None for b in batched])
      out = jax.vmap(dense, in_axes=axes)(*args)
    else:
      leaves = [a if b else jnp.broadcast_to(a, (axis_size, *jnp.shape(a))) for a, b in zip(leaves, batched)]
      out = jax.lax.map(lambda a: dense(*a), jax.tree.unflatten(tree, leaves))
    return out, jax.tree.map(lambda _: True, out)

  return mapped


def _mapped(dense):
  """``dense`` (arrays, the kernel second, to arrays) as a function whose ``vmap`` over a batched kernel is a
  ``lax.map`` (:func:`_mapped_over_kernels`), differentiable to any order: its derivative is ``dense`` 's own
  ``vjp`` mapped the same way, built when a derivative is traced (MAML's meta-gradient takes the second).
  """
  mapped = _mapped_over_kernels(dense)

  @jax.custom_vjp
  def f(*args):
    return mapped(*args)

  def f_fwd(*args):
    return f(*args), args  # f, not mapped: an outer derivative of this forward pass is f's

  def f_bwd(args, g):
    def vjp(*args_and_g):  # the kernel still second, so the backward pass maps over the runs as the forward does
      *primals, cotangent = args_and_g
      return jax.vjp(dense, *primals)[1](cotangent)

    return _mapped(vjp)(*args, g)

  f.defvjp(f_fwd, f_bwd)
  return f


@functools.cache
def _map_form(stride: int, pad: int, precision: str | None):
  def dense(x, kernel):
    with _under(precision):
      return lax_conv(x, kernel, stride, pad)

  return _mapped(dense)


def map_conv(x, kernel, stride: int, pad: int, precision: str | None = None) -> jnp.ndarray:
  """The ``map`` form: ``lax`` for one run, a ``lax.map`` of dense convolutions over a batched kernel's axis."""
  return _map_form(stride, pad, precision)(x, kernel)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def im2col_grad_conv(x, kernel, stride: int, pad: int, precision: str | None = None) -> jnp.ndarray:
  with _under(precision):
    return lax_conv(x, kernel, stride, pad)


def _im2col_grad_fwd(x, kernel, stride, pad, precision):
  return im2col_grad_conv(x, kernel, stride, pad, precision), (x, kernel)


def _im2col_grad_bwd(stride, pad, precision, residuals, g):
  x, kernel = residuals
  k, _, c, out = kernel.shape
  with _under(precision):
    dx = jax.vjp(lambda x: lax_conv(x, kernel, stride, pad), x)[1](g)[0]
    # Patches x output gradient, summed over images and positions: under vmap one batched product over the runs.
    dkernel = patches(x, k, stride, pad).reshape(-1, k * k * c).T @ g.reshape(-1, out)
  return dx, dkernel.reshape(kernel.shape)


im2col_grad_conv.defvjp(_im2col_grad_fwd, _im2col_grad_bwd)


def conv(x, kernel, stride: int, pad: int, form: str | None = None) -> jnp.ndarray:
  """``x [n, H, W, C]`` convolved with ``kernel [k, k, C, out]`` in ``form`` (:func:`resolve`)."""
  form = resolve(form)
  if form == "lax":
    return lax_conv(x, kernel, stride, pad)
  if form == "im2col":
    return im2col_conv(x, kernel, stride, pad)
  custom = map_conv if form == "map" else im2col_grad_conv
  return custom(x, kernel, stride, pad, current_precision())
