"""How a trained run's embedding spreads a split's images: its scale, how much of it is active, how far apart its
classes lie, and how well its nearest neighbours agree on the class.

    python -m experiments.embedding_spread RUN [RUN ...] [--split val] [--images 400] [--data_dir DIR]

For each run's best checkpoint, ``--images`` images drawn from ``--split`` (by ``--seed``) are embedded as testing
embeds them (``fewshot.load(run).embed``), and the statistics of :func:`spread` are printed, a line per run. It tells
a collapsed embedding (every image near one point: a softmax head whose loss sits at ln(way)) from a spread one
whose classes merely overlap.
"""

from __future__ import annotations

import argparse

import numpy as np


def spread(embeddings: np.ndarray, labels: np.ndarray) -> dict:
  """Statistics of embeddings ``[n, D]`` with class ``labels`` ``[n]``, in float64: the norms' mean and SD, the
  share of entries that are not zero, the mean squared distance between two images of one class and of two classes
  (each pair once), their ratio, and the leave-one-out 1-NN accuracy.

  >>> z = np.array([[0.0, 0.0], [0.0, 1.0], [3.0, 0.0], [3.0, 1.0]])
  >>> s = spread(z, np.array([0, 0, 1, 1]))
  >>> s["same"], s["other"], s["nn_accuracy"]
  (1.0, 9.5, 1.0)
  """
  z = np.asarray(embeddings, dtype=np.float64)
  labels = np.asarray(labels)
  d2 = ((z[:, None, :] - z[None, :, :]) ** 2).sum(-1)
  upper = np.triu(np.ones(d2.shape, dtype=bool), k=1)
  same = labels[:, None] == labels[None, :]
  norms = np.linalg.norm(z, axis=1)
  nearest = np.where(np.eye(len(z), dtype=bool), np.inf, d2).argmin(axis=1)
  within, between = d2[upper & same].mean(), d2[upper & ~same].mean()
  return {"norm_mean": float(norms.mean()), "norm_sd": float(norms.std()), "active": float((z != 0).mean()),
          "same": float(within), "other": float(between), "ratio": float(within / between),
          "nn_accuracy": float((labels[nearest] == labels).mean())}


def main(argv=None) -> list[str]:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("runs", nargs="+")
  parser.add_argument("--split", default="val")
  parser.add_argument("--images", type=int, default=400)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--data_dir")
  parser.add_argument("--tfds_dir")
  args = parser.parse_args(argv)

  import fewshot
  from fewshot import data

  lines = []
  for run in args.runs:
    model = fewshot.load(run)
    c = model.config
    split = data.load_splits(c.dataset, args.data_dir or c.data_dir, args.tfds_dir or c.tfds_dir, [args.split],
                             image_size=c.image_size, class_splits=c.class_splits, class_order=c.class_order,
                             seed=c.split_seed, bbox_crop=c.bbox_crop, rotations=c.rotations,
                             split_lists=c.split_lists, resize=c.resize)[args.split]
    rng = np.random.default_rng(args.seed)
    chosen = np.sort(rng.choice(len(split.labels), min(args.images, len(split.labels)), replace=False))
    s = spread(np.asarray(model.embed(split.images[chosen])), np.asarray(split.labels)[chosen])
    lines.append(f"{run}: {c.model_name}, {len(chosen)} {args.split} images of {split.num_classes} classes: norm "
                 f"{s['norm_mean']:.3g} ± {s['norm_sd']:.3g}, {100 * s['active']:.0f}% of entries active, squared "
                 f"distance within a class {s['same']:.4g} and between classes {s['other']:.4g} (ratio "
                 f"{s['ratio']:.3f}), 1-NN accuracy {100 * s['nn_accuracy']:.1f}%")
    print(lines[-1], flush=True)
  return lines


if __name__ == "__main__":
  main()
