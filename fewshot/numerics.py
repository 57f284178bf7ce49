"""The numerics policy: which products run at full float32 precision, and which follow ``--precision``.

JAX runs a float32 matrix product or convolution at the backend's *default* precision unless the
product says otherwise: float32 on CPUs, TF32 (a 10-bit mantissa, about 1e-3 relative) on NVIDIA GPUs
since Ampere, one bfloat16 pass (8 bits) on TPUs. fewshot says, for every product it traces:

* **Results-bearing math is exact float32 on every backend.** Distances, heads, prototypes, the
  diagnostics, the DML losses and miners, retrieval and verification metrics, Lake scoring and the
  augmentations' resampling pass ``precision=EXACT`` to each product (:func:`matmul`, :func:`einsum`).
  ``tests/test_numerics.py`` lowers each of them and fails on any product that does not say.
* **The backbone follows one option**, ``--precision`` (:data:`fewshot.choices.PRECISIONS`, in JAX's
  own names): ``float32`` (the default, ``Precision.HIGHEST``: the same numbers on every backend),
  ``tensorfloat32`` (``HIGH``: TF32 on NVIDIA GPUs, three bfloat16 passes on TPUs) or ``bfloat16``
  (``DEFAULT``: the backend's fastest; on NVIDIA GPUs that is TF32 too). :func:`backbone_precision`
  applies it while the backbone is traced, so a custom backbone follows it as the built-in ones do.
  Parameters, optimiser state and every stored array stay float32 whatever it says.

CPUs compute float32 under every name, so the option changes nothing there. docs/numerics.md gives
the measurements behind the default.

>>> import jax.numpy as jnp
>>> float(matmul(jnp.array([[1.0, 2.0]]), jnp.array([[3.0], [4.0]]))[0, 0])
11.0
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from fewshot import choices

EXACT = jax.lax.Precision.HIGHEST
# What each --precision name makes of a product the backbone traces without saying (lax.Precision); jax itself maps
# its jax_default_matmul_precision names so.
BACKBONE_PRECISIONS = {"float32": jax.lax.Precision.HIGHEST, "tensorfloat32": jax.lax.Precision.HIGH,
                       "bfloat16": jax.lax.Precision.DEFAULT}
assert tuple(BACKBONE_PRECISIONS) == choices.PRECISIONS


def matmul(a, b):
  """``a @ b`` at full float32 precision on every backend."""
  return jnp.matmul(a, b, precision=EXACT)


def einsum(subscripts: str, *operands):
  """``jnp.einsum`` at full float32 precision on every backend."""
  return jnp.einsum(subscripts, *operands, precision=EXACT)


def backbone_precision(precision: str):
  """The context under which a backbone is traced: its products that name no precision take ``precision``'s.

  >>> with backbone_precision("float32"):
  ...   float((jnp.ones((1, 2)) @ jnp.ones((2, 1)))[0, 0])
  2.0
  """
  if precision not in BACKBONE_PRECISIONS:
    raise ValueError(f"Unknown precision {precision!r}; choose one of {', '.join(BACKBONE_PRECISIONS)}.")
  return jax.default_matmul_precision(precision)
