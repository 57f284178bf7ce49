"""A validation curve's speed measures against a plain loop over the checkpoints."""

import numpy as np
import pytest

from fewshot.analysis import curves


def _loop_speed(episodes, accuracy, fraction, final_checkpoints):
  last = accuracy[len(accuracy) - final_checkpoints:]
  mark = fraction * sum(last) / len(last)
  first = next(e for e, a in zip(episodes, accuracy) if a >= mark)
  return first, sum(accuracy) / len(accuracy)


@pytest.mark.parametrize("seed", range(5))
def test_training_speed_matches_a_loop_on_random_curves(seed):
  rng = np.random.default_rng(seed)
  episodes = list(range(100, 4100, 100))
  accuracy = list(np.minimum(99.0, 40 + 60 * (1 - np.exp(-np.arange(40) / rng.uniform(3, 12)))
                             + rng.normal(0, 1.5, 40)))
  reached, mean = curves.training_speed(episodes, accuracy)
  want_reached, want_mean = _loop_speed(episodes, accuracy, 0.95, 5)
  assert reached == want_reached
  assert mean == pytest.approx(want_mean, rel=1e-12)


def test_training_speed_refuses_curves_of_unequal_length():
  with pytest.raises(ValueError, match="one accuracy per checkpoint"):
    curves.training_speed([100, 200], [50.0])
