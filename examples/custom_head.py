"""A cosine head with a learned temperature, trained like the paper's heads and compared with ProtoNet_DR.

    python examples/custom_head.py [--smoke] [--workdir runs/examples]
"""
import argparse
import dataclasses

import jax.numpy as jnp

from fewshot import analyze, heads
from fewshot.config import Config
from fewshot.train import train


@dataclasses.dataclass(frozen=True)  # frozen: a head is a static argument of the compiled steps
class CosineHead(heads.Head):
  """logit_c = s cos(f(x'), p_c), the temperature s = exp(log_s) learned from 10 (NormFace on prototypes)."""

  name = "cosine_temperature"

  def init(self, key):
    return {"log_s": jnp.log(10.0)}  # trained beside the backbone by the same Adam

  def logits(self, params, support, support_labels, query, way):
    return -jnp.exp(params["log_s"]) * self.class_distances(support, support_labels, query, way)  # s cos - s

  def class_distances(self, support, support_labels, query, way):  # 1 - cos: what the diagnostics' psi compares
    return heads.class_distances(support, support_labels, query, way, "proto", "cosine")


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--smoke", action="store_true", help="2 episodes: seconds, not minutes")
  parser.add_argument("--workdir", default="runs/examples", help="where the two run directories go")
  args = parser.parse_args()
  tiny = dict(episodes=2, eval_every=2, val_episodes=1, test_episodes=2) if args.smoke else {}
  config = Config(head="dr", **tiny)  # the built-in arm, ProtoNet_DR; head= replaces it in the other
  runs = [train(config, f"{args.workdir}/{name}", head=head, progress=not args.smoke)["workdir"]
          for name, head in (("ProtoNet_DR", None), ("cosine_temperature", CosineHead()))]
  print(analyze.analyze(runs)[0])  # ProtoNet_DR against the cosine head: the DR paper's tables
