"""The two heads' confidence around a few 2-D prototypes: the largest class probability at each point of a grid,
under softmax (logits -d²) and under the distance ratio (logits -θ log d), the DR paper's Figure 1. Pure functions
of arrays; ``python -m fewshot.plot --landscape_only`` draws them.

    >>> import numpy as np
    >>> float(max_probability(np.zeros((1, 2)), np.array([[0.0, 0.0], [2.0, 0.0]]), "dr")[0]) > 0.999
    True
"""

from __future__ import annotations

import numpy as np

# Three prototypes of Fig 1, placed unevenly so that the class boundaries are not symmetric.
PROTOTYPES = ((-1.0, -0.6), (1.2, -0.4), (0.1, 1.1))
EXTENT = 3.0  # the landscape covers [-EXTENT, EXTENT]^2
RESOLUTION = 301


def max_probability(points, prototypes, head: str, rho: float | None = None) -> np.ndarray:
  r"""Largest class probability of each 2-D point ``[n, 2]`` among the prototypes ``[k, 2]``.

  Softmax: :math:`p_c \propto e^{-d_c^2}`; distance ratio: :math:`p_c \propto d_c^{-\theta}`,
  :math:`\theta = e^{\rho}` (:math:`e^2` by default, the heads' initial value).
  """
  import jax
  import jax.numpy as jnp

  from fewshot import distances, heads

  rho = heads.RHO_INIT if rho is None else rho
  sq_dist = distances.squared_euclidean(jnp.asarray(points, jnp.float32), jnp.asarray(prototypes, jnp.float32))
  probabilities = jax.nn.softmax(heads.logits_from_distances(sq_dist, head, rho), axis=-1)
  return np.asarray(probabilities.max(axis=-1))


def landscape_grid(extent: float = EXTENT, resolution: int = RESOLUTION) -> tuple[np.ndarray, np.ndarray]:
  """Axis coordinates of a square grid over ``[-extent, extent]^2``."""
  axis = np.linspace(-extent, extent, resolution)
  return axis, axis


def confidence_landscape(prototypes=PROTOTYPES, head: str = "dr", extent: float = EXTENT,
                         resolution: int = RESOLUTION, rho: float | None = None) -> np.ndarray:
  """Largest class probability on the grid of :func:`landscape_grid`, as ``[resolution (y), resolution (x)]``."""
  xs, ys = landscape_grid(extent, resolution)
  gx, gy = np.meshgrid(xs, ys)
  points = np.stack([gx.ravel(), gy.ravel()], axis=-1)
  return max_probability(points, prototypes, head, rho).reshape(gy.shape)
