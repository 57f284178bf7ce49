"""A small backbone of one's own (no BatchNorm), trained under the DR head and compared with Conv4.

    python examples/custom_backbone.py [--smoke] [--workdir runs/examples]
"""
import argparse

import flax.linen as nn

from fewshot import analyze
from fewshot.backbones import Conv
from fewshot.config import Config
from fewshot.train import train


class TinyNet(nn.Module):
  """Two strided 3x3 convolutions and a global average: images [n, 28, 28, 1] -> embeddings [n, features]."""

  features: int = 64

  @nn.compact
  def __call__(self, x):  # no `train` argument (no BatchNorm): the learner calls it without one
    for _ in range(2):
      x = nn.relu(Conv(self.features, 3, strides=2)(x))  # fewshot's Conv: fast on CPU inside a scan
    return x.mean(axis=(1, 2))


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--smoke", action="store_true", help="2 episodes: seconds, not minutes")
  parser.add_argument("--workdir", default="runs/examples", help="where the two run directories go")
  args = parser.parse_args()
  tiny = dict(episodes=2, eval_every=2, val_episodes=1, test_episodes=2) if args.smoke else {}
  config = Config(head="dr", **tiny)
  runs = [train(config, f"{args.workdir}/{name}", backbone=backbone, progress=not args.smoke)["workdir"]
          for name, backbone in (("conv4", None), ("tinynet", TinyNet()))]
  print(analyze.analyze(runs)[0])  # the same head on Conv4 and on TinyNet: the DR paper's tables
