"""A metric-learning loss of your own, trained by ``fewshot.dml`` as the built-in ones are: the soft nearest-neighbour
loss (Frosst et al., 2019) with a learned temperature, against the built-in triplet loss on the embedded strokes data.

  python examples/custom_loss.py --workdir runs/custom_loss    # --smoke: a few steps, to check that it runs
"""

import argparse

import jax
import jax.numpy as jnp

from fewshot.dml.config import DMLConfig
from fewshot.dml.losses import Loss
from fewshot.dml.train import train


def soft_nearest_neighbour(embeddings, labels, log_temperature):
  """-mean_i log(sum_{j~i} e^{s_ij / T} / sum_{j!=i} e^{s_ij / T}): j~i same class, s cosine, T = e^log_temperature."""
  logits = embeddings @ embeddings.T / jnp.exp(log_temperature)  # the embeddings arrive L2-normalised
  others = ~jnp.eye(labels.shape[0], dtype=bool)
  positives = others & (labels[:, None] == labels[None, :])
  return jnp.mean(jax.nn.logsumexp(logits, axis=1, where=others) - jax.nn.logsumexp(logits, axis=1, where=positives))


# Its parameters start at T = 0.1; Adam trains them with the model (at --loss_learning_rate).
SOFT_NN = Loss(soft_nearest_neighbour, init=lambda key, num_classes, dim: {"log_temperature": jnp.log(0.1)},
               name="soft_nn")

if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workdir", default="runs/custom_loss", help="a new folder for the two runs")
  parser.add_argument("--smoke", action="store_true", help="a few steps of each, to check that it runs")
  args = parser.parse_args()
  config = DMLConfig(dataset="strokes", **(dict(steps_per_epoch=5, epochs=1) if args.smoke else {}))
  runs = {"soft_nn (custom)": train(config, f"{args.workdir}/soft_nn", loss=SOFT_NN),
          "triplet (built-in)": train(config, f"{args.workdir}/triplet")}
  print(f"{'test retrieval, %':20}{'P@1':>8}{'R-Prec':>8}{'MAP@R':>8}")
  for name, results in runs.items():
    test = results["separated"][0]["test"]
    print(f"{name:20}" + "".join(f"{100 * test[m]:8.2f}" for m in ("precision_at_1", "r_precision", "map_at_r")))
