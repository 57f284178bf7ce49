"""The CPU's emulation of a GPU's TF32 products (tests/tf32_emulation.py), which finds on a CPU the tests a GPU fails."""

import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from tf32_emulation import round_to_tf32

from environment import REPO, checkout_env


def test_rounding_keeps_ten_mantissa_bits_to_nearest_even():
  ulp = 2.0**-10
  x = np.array([1 + ulp / 2, 1 + 1.5 * ulp, -(1 + 0.6 * ulp), 3.0, np.inf, 0.0], np.float32)
  np.testing.assert_array_equal(np.asarray(round_to_tf32(jnp.asarray(x))), [1.0, 1 + 2 * ulp, -(1 + ulp), 3.0, np.inf,
                                                                            0.0])
  values = np.random.default_rng(0).normal(size=1000).astype(np.float32) * 1e3
  rounded = np.asarray(round_to_tf32(jnp.asarray(values)))
  assert np.all(np.abs(rounded - values) <= np.abs(values) * 2.0**-11)  # within half an ulp of 10 bits
  assert np.all(rounded.view(np.uint32) & 0x1FFF == 0)


@pytest.mark.slow  # a fresh interpreter with the emulation in force
def test_enabled_products_that_do_not_ask_for_highest_take_tf32_operands():
  code = ("import numpy as np, jax.numpy as jnp, tf32_emulation; tf32_emulation.enable()\n"
          "a = np.random.default_rng(0).normal(size=(64, 64)).astype(np.float32); exact = a.astype(np.float64) @ a\n"
          "err = lambda f, p: float(np.abs(np.asarray(f(a, a, precision=p)) - exact).max())\n"
          "einsum = lambda x, y, precision: jnp.einsum('ij,jk->ik', x, y, precision=precision)\n"
          "print(err(jnp.matmul, None) > 1e-3, err(jnp.matmul, 'highest') < 1e-4, err(einsum, None) > 1e-3)")
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO / "tests",
                        env=checkout_env())
  assert done.stdout.split() == ["True", "True", "True"], done.stderr
