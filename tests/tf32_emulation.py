"""A CPU that multiplies like an NVIDIA GPU: every product that does not ask for ``HIGHEST`` takes TF32 operands.

A GPU runs a float32 matrix product or convolution at ``DEFAULT`` or ``HIGH`` precision in TF32: each operand's
mantissa rounded to 10 bits, products accumulated in float32. XLA's CPU ignores precision, so a suite green on the
CPU can still fail on a GPU (24 of its tests did). ``FEWSHOT_EMULATE_TF32=1 python -m pytest`` (tests/conftest.py)
runs the suite with :func:`enable` in force: ``lax.dot_general`` and ``lax.conv_general_dilated`` round the operands
of every product whose precision is not ``HIGHEST`` (the value and the products of its gradient), so what would
fail on a GPU fails here. The rounding is an emulation: cuBLAS and cuDNN may accumulate in another order.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
from jax._src.lax import convolution as _convolution
from jax._src.lax import lax as _lax
from jax._src.numpy import einsum as _einsum

_EXACT = {jax.lax.Precision.HIGHEST}
_CONV_SIGNATURE = inspect.signature(_convolution.conv_general_dilated)


def round_to_tf32(x):
  """``x`` (float32) with its mantissa rounded to TF32's 10 bits, to nearest even; the gradient passes through."""
  x = jnp.asarray(x)
  if x.dtype != jnp.float32:
    return x
  bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
  bits = (bits + jnp.uint32(0xFFF) + ((bits >> 13) & jnp.uint32(1))) & jnp.uint32(0xFFFFE000)
  rounded = jax.lax.bitcast_convert_type(bits, jnp.float32)
  return jnp.where(jnp.isfinite(x), x + jax.lax.stop_gradient(rounded - x), x)


def _exact(precision) -> bool:
  canonical = _lax.canonicalize_precision(precision)
  if canonical is None:
    return jax.config.jax_default_matmul_precision in ("highest", "float32")
  pair = canonical if isinstance(canonical, tuple) else (canonical, canonical)
  return all(p in _EXACT for p in pair)


def enable() -> None:
  """From now on in this process, products that do not ask for ``HIGHEST`` round their operands to TF32."""
  dot, conv = _lax.dot_general, _convolution.conv_general_dilated
  if getattr(dot, "emulates_tf32", False):
    return

  def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kwargs):
    if not _exact(precision):
      lhs, rhs = round_to_tf32(lhs), round_to_tf32(rhs)
    return dot(lhs, rhs, dimension_numbers, precision, preferred_element_type, **kwargs)

  def conv_general_dilated(lhs, rhs, *args, **kwargs):
    if not _exact(_CONV_SIGNATURE.bind(lhs, rhs, *args, **kwargs).arguments.get("precision")):
      lhs, rhs = round_to_tf32(lhs), round_to_tf32(rhs)
    return conv(lhs, rhs, *args, **kwargs)

  dot_general.emulates_tf32 = conv_general_dilated.emulates_tf32 = True
  # The public names and the internal ones the numpy functions, the transpose rules and flax call through.
  _lax.dot_general = jax.lax.dot_general = dot_general
  _convolution.conv_general_dilated = jax.lax.conv_general_dilated = conv_general_dilated
  # jnp.einsum took lax.dot_general as a default argument when jax was imported: a test's own einsum missed the
  # emulation and failed only on the H100.
  _einsum.einsum.__kwdefaults__["_dot_general"] = dot_general
