"""The one tiny few-shot run the default tier trains where a test needs a trained run, not particular shapes.

Its programs compile once per session (~10 s on two cores; the workers share a compilation cache), and a test that
needs more checkpoints trains more episodes of the same programs (``{**TINY, "episodes": 4}``): another way, query
count or number of validation episodes compiles programs of its own.
"""

TINY = dict(way=2, shot=1, query=1, test_query=1, episodes=2, eval_every=2, val_episodes=1, test_episodes=1)


def flags(**options) -> list[str]:
  """The command line of ``TINY`` updated by ``options``."""
  return [f"--{k}={v}" for k, v in {**TINY, **options}.items()]
