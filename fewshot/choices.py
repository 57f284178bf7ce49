"""The names a run's options choose among, with no implementation behind them.

Configurations validate against these names and analysis labels runs with them, so both
load without JAX or Flax; each implementation (``heads``, ``backbones``, ``diagnostics``,
``sources``) takes its names from here.
"""

from __future__ import annotations

HEADS = ("softmax", "dr")  # logits -d^2, or the distance ratio -theta log d
CLASSIFIERS = ("proto", "nn")  # distance to the class mean, or to the nearest support point
BACKBONES = ("conv4", "resnet12", "resnet18")
CENTRINGS = ("points", "features")  # of the diagnostics: the paper's, or the reference code's
PSI_CLASSIFIERS = ("model", "proto")  # class distance of the diagnostics' psi: the model's (paper), or prototypes
PLACEMENTS = ("auto", "device", "host")  # where a split's images live while training

# The paper's names for the four head x classifier combinations, used in logs and tables.
MODEL_NAMES = {
    ("proto", "softmax"): "ProtoNet_S",
    ("proto", "dr"): "ProtoNet_DR",
    ("nn", "softmax"): "1-NN_S",
    ("nn", "dr"): "1-NN_DR",
}

# Metric-learning losses by name (fewshot.dml.losses.LOSSES holds the functions; a test keeps the two in step):
# which take mined triplets, and which learn one proxy (or several) per training class.
LOSSES = ("contrastive", "two_margin_contrastive", "triplet", "npair", "bce_pair", "margin", "lifted_structure",
          "multi_similarity", "ntxent", "circle", "fastap", "nsl", "cosface", "arcface", "sphereface", "proxy_nca",
          "soft_triple", "dr_proxy")
TRIPLET_LOSSES = ("triplet",)
PROXY_LOSSES = ("nsl", "cosface", "arcface", "sphereface", "proxy_nca", "soft_triple", "dr_proxy")
MINERS = ("batch_hard", "semi_hard")
