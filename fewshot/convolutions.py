"""A backbone convolution's forms: one square NHWC convolution (kernel HWIO, symmetric zero padding), computed in
several ways that give the same values and gradients to float rounding; ``--conv`` chooses one.

The forms differ where a seed group ``vmap`` s the training step over its runs, each run with its own kernel:

* ``lax``: ``lax.conv_general_dilated``. Under ``vmap`` the runs' convolutions become one with
  ``feature_group_count`` = runs, and the kernel gradient a grouped one too, which cuDNN runs far below a dense
  convolution's rate (jax-ml/jax#13800, #26266, #26568).
* ``im2col``: the image's patches times the kernel as one matrix product; under ``vmap`` a batched product.
* ``map``: ``lax`` for one run; under ``vmap`` a ``lax.map`` over the batched axis, one dense convolution per run,
  forward and backward, while the rest of the step stays batched.
* ``im2col_grad``: ``lax`` forward and input gradient; the kernel gradient as patches times the output gradient,
  under ``vmap`` a batched matrix product instead of a grouped convolution.
* ``im2col_flip``: ``im2col`` 's forward (the same bits), its kernel gradient the forward's patches times the output
  gradient, and its input gradient at stride 1 the output gradient's own im2col convolution with the flipped kernel
  (a forward convolution again) instead of the patches' gradient folded back onto the image, which on XLA:CPU
  writes and re-reads a patch matrix k² times the image's size (elsewhere ``im2col`` 's).
* ``auto``: :data:`AUTO` 's form for the backend.

``map`` is a ``jax.custom_vjp`` whose forward and backward are each a ``jax.custom_batching.custom_vmap`` function
(a ``custom_vmap`` function alone has no reverse-mode derivative); its backward is built the same way from the dense
convolution's ``vjp``, so it differentiates to any order. Each rule calls the mapped function again, so nested
``vmap`` s (a group's runs around MAML's tasks) map at every level; a batch of images under one kernel is folded into
one dense convolution instead. On several devices XLA does not split a ``lax.map`` over a run axis sharded across
them (it gathers the runs: the same values, none of the speed), so ``map`` is for groups on one device each.
The custom forms' derivatives are traced after the forward pass, outside the backbone's ``--precision`` context, so
the precision the forward saw travels with them as a static argument (:func:`current_precision`).
"""

from __future__ import annotations

import contextlib
import functools

import jax
import jax.numpy as jnp

from fewshot import choices

# The form --conv auto takes on each backend (any other: lax). On the CPU, im2col: XLA's CPU convolutions (their
# gradients above all) run about ten times slower inside a lax.scan body than outside it (jax-ml/jax#12868), matrix
# products do not. On GPUs and TPUs, lax until measured: the device check (benchmarks/device_check.py, its
# bench_runs --conv lax,im2col,map,im2col_grad step: groups of 1, 8 and 32 at 28 and 84 px) prints each backend's
# winner (device_check.form_winners) for this table, and MEASURED_ON says where each entry was measured.
AUTO = {"cpu": "im2col_flip", "gpu": "lax", "tpu": "lax"}
MEASURED_ON = {
    "cpu": "a 2-vCPU AMD EPYC Zen 4 VM, XLA:CPU (BUILD_NOTES.md, Speed: the forms side by side in a scanned step)",
    "gpu": "not measured: lax until a device check's form_winners says otherwise",
    "tpu": "not measured: lax until a device check's form_winners says otherwise",
}
FORMS = choices.CONV_FORMS[1:]  # the forms themselves, "auto" aside


def resolve(form: str | None, backend: str | None = None) -> str:
  """The form ``--conv form`` computes on ``backend`` (default JAX's): ``auto`` (or None) as :data:`AUTO` says."""
  if form in (None, "auto"):
    backend = jax.default_backend() if backend is None else backend
    return AUTO.get(backend, "lax")
  if form not in FORMS:
    raise ValueError(f"Unknown convolution form {form!r}; choose one of {', '.join(choices.CONV_FORMS)}.")
  return form


def used(backbone) -> dict:
  """What ``config.json`` records of how ``backbone`` computes: ``{"conv": form}``, the form its ``--conv`` took on
  this backend (``auto``'s choice resolved); ``{}`` for a backbone without the option (one passed from Python).
  """
  form = getattr(backbone, "conv", None)
  return {} if form is None else {"conv": resolve(form)}


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


def _mapped_over_kernels(dense, per_image: bool):
  """``dense`` (``x``, the kernel, then any arrays, to arrays) whose ``vmap`` is a ``lax.map`` over the batched axis.

  Where the kernel is not batched and ``dense`` 's outputs are per image (``per_image``: the forward convolution), the
  axis is folded into the images instead: one dense convolution, as ``lax`` 's own batching would do. Both call the
  mapped function again, never ``dense``, so an outer ``vmap`` (a group's runs around MAML's tasks) maps too.
  """
  mapped = jax.custom_batching.custom_vmap(dense)

  @mapped.def_vmap
  def rule(axis_size, in_batched, *args):
    leaves, tree = jax.tree.flatten(args)
    batched = jax.tree.leaves(in_batched)
    if per_image and not batched[1]:
      x = args[0]
      y = mapped(x.reshape(-1, *x.shape[2:]), *args[1:])
      return y.reshape(*x.shape[:2], *y.shape[1:]), True
    leaves = [a if b else jnp.broadcast_to(a, (axis_size, *jnp.shape(a))) for a, b in zip(leaves, batched)]
    out = jax.lax.map(lambda a: mapped(*a), jax.tree.unflatten(tree, leaves))
    return out, jax.tree.map(lambda _: True, out)

  return mapped


def _mapped(dense, per_image: bool = True):
  """``dense`` (``x``, the kernel, then any arrays, to arrays) as a function whose ``vmap`` is a ``lax.map``
  (:func:`_mapped_over_kernels`), differentiable to any order: its derivative is ``dense`` 's own ``vjp`` mapped the
  same way, built when a derivative is traced (MAML's meta-gradient takes the second).
  """
  mapped = _mapped_over_kernels(dense, per_image)

  @jax.custom_vjp
  def f(*args):
    return mapped(*args)

  def f_fwd(*args):
    return f(*args), args  # f, not mapped: an outer derivative of this forward pass is f's

  def f_bwd(args, g):
    def vjp(*args_and_g):  # x and the kernel still first: the backward pass maps over the runs as the forward does
      *primals, cotangent = args_and_g
      return jax.vjp(dense, *primals)[1](cotangent)

    return _mapped(vjp, per_image=False)(*args, g)  # the kernel's gradient is per batch element: never folded

  f.defvjp(f_fwd, f_bwd)
  return f


@functools.cache
def _map_form(stride: int, pad: int, precision: str | None):
  def dense(x, kernel):
    with _under(precision):
      return lax_conv(x, kernel, stride, pad)

  return _mapped(dense)


def map_conv(x, kernel, stride: int, pad: int, precision: str | None = None) -> jnp.ndarray:
  """The ``map`` form: ``lax`` for one run; under ``vmap`` a ``lax.map`` of dense convolutions over the batched axis."""
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


def flipped(kernel: jnp.ndarray) -> jnp.ndarray:
  """The kernel ``[k, k, in, out]`` whose convolution is the transpose of ``kernel`` 's at stride 1: rotated by
  180° and its channels swapped, ``[k, k, out, in]``.
  """
  return jnp.flip(kernel, (0, 1)).transpose(0, 1, 3, 2)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def im2col_flip_conv(x, kernel, stride: int, pad: int, precision: str | None = None) -> jnp.ndarray:
  with _under(precision):
    return im2col_conv(x, kernel, stride, pad)


def _folds_back(kernel, stride: int, pad: int) -> bool:
  """Whether the input gradient needs the patches' own gradient (a strided or over-padded convolution)."""
  return stride != 1 or pad > kernel.shape[0] - 1


def _im2col_flip_fwd(x, kernel, stride, pad, precision):
  k, _, c, out = kernel.shape
  with _under(precision):
    cols = patches(x, k, stride, pad)
    y = cols @ kernel.reshape(k * k * c, out)  # im2col_conv's very operations: the same bits
  return y, (x if _folds_back(kernel, stride, pad) else None, cols, kernel)


def _im2col_flip_bwd(stride, pad, precision, residuals, g):
  x, cols, kernel = residuals
  k, _, c, out = kernel.shape
  with _under(precision):
    dkernel = (cols.reshape(-1, k * k * c).T @ g.reshape(-1, out)).reshape(kernel.shape)
    if x is None:  # stride 1: the transposed convolution is the flipped kernel's, padded to the input's size
      dx = im2col_flip_conv(g, flipped(kernel), 1, k - 1 - pad, precision)
    else:
      dcols = (g.reshape(-1, out) @ kernel.reshape(k * k * c, out).T).reshape(cols.shape)
      dx = jax.vjp(lambda x: patches(x, k, stride, pad), x)[1](dcols)[0]
  return dx, dkernel


im2col_flip_conv.defvjp(_im2col_flip_fwd, _im2col_flip_bwd)
CUSTOM = {"map": map_conv, "im2col_grad": im2col_grad_conv, "im2col_flip": im2col_flip_conv}


def conv(x, kernel, stride: int, pad: int, form: str | None = None) -> jnp.ndarray:
  """``x [n, H, W, C]`` convolved with ``kernel [k, k, C, out]`` in ``form`` (:func:`resolve`)."""
  form = resolve(form)
  if form == "lax":
    return lax_conv(x, kernel, stride, pad)
  if form == "im2col":
    return im2col_conv(x, kernel, stride, pad)
  return CUSTOM[form](x, kernel, stride, pad, current_precision())
