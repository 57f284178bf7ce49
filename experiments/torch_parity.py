"""fewshot beside eager PyTorch on the same episodes from the same initial weights: the like-for-like check.

    python -m experiments.torch_parity --data_dir DIR --seeds 0-2 --episodes 2000 --out docs/results/torch_parity

For each seed, one fewshot run (Snell et al.'s Omniglot split, 5-way 1-shot 15-query episodes, softmax head, Adam
1e-3, no schedule) is built as ``python -m fewshot.train`` builds it (:class:`fewshot.episodic.experiment.Experiment`)
and trained by its compiled chunks; its initial weights are copied into the repository's eager PyTorch twin
(``benchmarks/torch_conv4.py``), which trains on the same episodes (the image indices fewshot's sampler draws for
``fold_in(train_key, i)``). Both are tested on the same 1,000 test episodes (5-way 1-shot, 15 queries). Two checks
tie the sides together before any comparison: the first episode's loss from the shared weights agrees to float32
rounding, and the PyTorch twin scores fewshot's trained weights as fewshot does. Declared before the runs: the
test accuracies are *equivalent within ±1.0 point* where the 90% interval of fewshot − PyTorch (paired by seed, the
spread floored at the paired test episodes' standard error) lies inside ±1.0 (:mod:`fewshot.analysis.verdicts`).

Writes ``OUT/parity.json`` (per seed: the accuracies, the per-100-episode training losses of both sides, the checks)
and ``OUT/parity.png`` (the curves side by side). Needs ``torch`` (``pip install torch``); a 2-core CPU takes about
3 minutes per seed.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
from absl import app, flags

from fewshot.training import run_flags

WINDOW = 100  # episodes per point of the curves
MARGIN = 1.0  # points of 5-way 1-shot test accuracy, declared before the runs

flags.DEFINE_string("data_dir", None, "the Omniglot folder (images_background.zip and images_evaluation.zip)")
flags.DEFINE_string("seeds", "0-2", "the seeds")
flags.DEFINE_integer("episodes", 2000, "training episodes per run")
flags.DEFINE_integer("test_episodes", 1000, "test episodes")
flags.DEFINE_string("out", "docs/results/torch_parity", "where parity.json and parity.png go")


def fewshot_config(data_dir: str, seed: int, episodes: int, test_episodes: int):
  from fewshot.config import Config

  return Config(dataset="omniglot", data_dir=data_dir, class_splits="vinyals_published", rotations=True,
                backbone="conv4", head="softmax", way=5, shot=1, query=15, test_way=5, test_query=15,
                episodes=episodes, eval_every=episodes, val_episodes=1, test_episodes=test_episodes, seed=seed)


def torch_model(params: dict, batch_stats: dict):
  """The eager twin with fewshot's weights: kernels HWIO → OIHW, BatchNorm scale/bias and running statistics."""
  import torch

  from experiments import torch_conv4

  model = torch_conv4.ProtoNet(1, "softmax")
  blocks = model.backbone.trunk
  with torch.no_grad():
    for i, block in enumerate(blocks):
      conv, bn = block[0], block[1]
      conv.weight.copy_(torch.from_numpy(np.asarray(params["backbone"][f"Conv_{i}"]["kernel"]).transpose(3, 2, 0, 1)))
      conv.bias.copy_(torch.from_numpy(np.asarray(params["backbone"][f"Conv_{i}"]["bias"])))
      bn.weight.copy_(torch.from_numpy(np.asarray(params["backbone"][f"BatchNorm_{i}"]["scale"])))
      bn.bias.copy_(torch.from_numpy(np.asarray(params["backbone"][f"BatchNorm_{i}"]["bias"])))
      bn.running_mean.copy_(torch.from_numpy(np.asarray(batch_stats[f"BatchNorm_{i}"]["mean"])))
      bn.running_var.copy_(torch.from_numpy(np.asarray(batch_stats[f"BatchNorm_{i}"]["var"])))
  return model


def drawn(source, key, count: int, way: int, per_class: int) -> np.ndarray:
  """The image indices ``[count, way, per_class]`` fewshot's sampler draws for ``fold_in(key, i)``, ``i < count``."""
  from fewshot.training import sources

  return sources.drawn_indices(source.layout, key, count, way, per_class)


def episode_batch(images: np.ndarray, indices: np.ndarray, shot: int):
  """[way·(shot+query), 1, H, W] float images in [0, 1], support class-major then query class-major, as fewshot."""
  import torch

  way = indices.shape[0]
  order = np.concatenate([indices[:, :shot].reshape(-1), indices[:, shot:].reshape(-1)])
  x = torch.from_numpy(np.ascontiguousarray(images[order].transpose(0, 3, 1, 2))).float() * np.float32(1 / 255)
  return x, way


def torch_train(model, images: np.ndarray, episodes: np.ndarray, shot: int) -> list[float]:
  """Adam 1e-3 (0.9, 0.999, 1e-8) on each episode in turn; the loss of each, before its update."""
  import torch
  import torch.nn.functional as F

  model.train()
  optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
  losses = []
  for indices in episodes:
    x, way = episode_batch(images, indices, shot)
    labels = torch.arange(way).repeat_interleave(indices.shape[1] - shot)
    loss = F.cross_entropy(model.logits(x, way, shot), labels)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    losses.append(float(loss.detach()))
  return losses


def torch_test(model, images: np.ndarray, episodes: np.ndarray, shot: int) -> np.ndarray:
  """Per-episode accuracy (%) with BatchNorm's running statistics."""
  import torch

  model.eval()
  accuracies = []
  with torch.no_grad():
    for indices in episodes:
      x, way = episode_batch(images, indices, shot)
      labels = torch.arange(way).repeat_interleave(indices.shape[1] - shot)
      accuracies.append(100.0 * float((model.logits(x, way, shot).argmax(1) == labels).float().mean()))
  return np.asarray(accuracies)


def one_seed(data_dir: str, seed: int, episodes: int, test_episodes: int) -> dict:
  """Both sides of one seed: losses, test accuracies per episode, and the two checks that tie them."""
  import jax

  from fewshot.episodic.experiment import Experiment

  exp = Experiment.build(fewshot_config(data_dir, seed, episodes, test_episodes))
  state = exp.initial_state()
  start = jax.device_get((state.params, state.batch_stats))
  shape = exp.learner.shape
  began, losses, done = time.perf_counter(), [], 0
  while done < episodes:  # the run's own chunks (donated state), as its checkpoint loop trains them
    steps = min(500, episodes - done)
    state, (metrics, _) = exp.train_chunk(0, state, steps)
    losses += np.asarray(metrics["loss"]).tolist()
    done += steps
  ours = np.asarray(exp.accuracies(state, "test", test_episodes), np.float64) * 100.0
  seconds = {"fewshot": time.perf_counter() - began}
  trained = jax.device_get((state.params, state.batch_stats))
  train_images, test_images = (np.asarray(exp.sources[s].images) for s in ("train", "test"))
  train_draws = drawn(exp.sources["train"], exp.keys["train"], episodes, shape.way, shape.per_class)
  test_draws = drawn(exp.sources["test"], exp.keys["test"], test_episodes, 5, 16)
  began = time.perf_counter()
  model = torch_model(*start)
  torch_losses = torch_train(model, train_images, train_draws, shape.shot)
  theirs = torch_test(model, test_images, test_draws, shape.shot)
  seconds["pytorch"] = time.perf_counter() - began
  # The twin scoring fewshot's own trained weights: the same test episodes and evaluation, or the check is void.
  twin = torch_test(torch_model(*trained), test_images, test_draws, shape.shot)
  return {"seed": seed, "fewshot_accuracy": float(ours.mean()), "pytorch_accuracy": float(theirs.mean()),
          "paired_se": float(np.std(ours - theirs, ddof=1) / np.sqrt(len(ours))),
          "first_loss": [losses[0], torch_losses[0]],
          "twin_on_fewshot_weights": {"accuracy": float(twin.mean()), "episodes_differing": int(np.sum(
              np.abs(twin - ours) > 1e-3))},
          "fewshot_losses": window_means(losses), "pytorch_losses": window_means(torch_losses),
          "seconds": seconds}


def window_means(losses: list[float]) -> list[float]:
  return [float(np.mean(losses[i:i + WINDOW])) for i in range(0, len(losses), WINDOW)]


def summary(rows: list[dict]) -> dict:
  from fewshot.analysis import verdicts

  differences = [r["fewshot_accuracy"] - r["pytorch_accuracy"] for r in rows]
  v = verdicts.verdict(differences, 0.0, margin=MARGIN, errors=[r["paired_se"] for r in rows])
  return {"margin": MARGIN, "fewshot_minus_pytorch": differences, "mean": v.difference,
          "interval90": v.interval90, "interval95": v.interval95, "smallest_margin": v.smallest_margin,
          "verdict": v.words}


def figure(rows: list[dict], path: str) -> None:
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, ax = plt.subplots(figsize=(7, 4))
  for k, r in enumerate(rows):
    x = (np.arange(len(r["fewshot_losses"])) + 1) * WINDOW
    ax.plot(x, r["fewshot_losses"], color=f"C{k}", label=f"fewshot, seed {r['seed']}")
    ax.plot(x, r["pytorch_losses"], color=f"C{k}", linestyle="--", label=f"PyTorch, seed {r['seed']}")
  ax.set(xlabel="episode", ylabel=f"training loss (mean of {WINDOW} episodes)", yscale="log")
  ax.set_title("5-way 1-shot Omniglot, softmax head: the same episodes from the same weights", fontsize=9)
  ax.legend(fontsize=8, ncol=2)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def main(argv):
  del argv
  import torch

  torch.set_num_threads(1)  # a parity check, not a benchmark: one thread never fights XLA's pool for the cores
  values = flags.FLAGS
  rows = []
  for seed in run_flags.parse_seeds(values.seeds):
    rows.append(one_seed(values.data_dir, seed, values.episodes, values.test_episodes))
    r = rows[-1]
    print(f"seed {seed}: fewshot {r['fewshot_accuracy']:.2f}, PyTorch {r['pytorch_accuracy']:.2f}; first loss "
          f"{r['first_loss'][0]:.6f} / {r['first_loss'][1]:.6f}; the twin on fewshot's weights "
          f"{r['twin_on_fewshot_weights']['accuracy']:.2f} ({r['twin_on_fewshot_weights']['episodes_differing']} "
          f"episodes differ); {r['seconds']['fewshot']:.0f} s / {r['seconds']['pytorch']:.0f} s", flush=True)
  os.makedirs(values.out, exist_ok=True)
  result = {"episodes": values.episodes, "test_episodes": values.test_episodes, "seeds": rows,
            "summary": summary(rows), "torch": torch.__version__}
  with open(os.path.join(values.out, "parity.json"), "w") as f:
    json.dump(result, f, indent=1)
  figure(rows, os.path.join(values.out, "parity.png"))
  s = result["summary"]
  interval = "" if s["interval90"] is None else f", 90% [{s['interval90'][0]:+.2f}, {s['interval90'][1]:+.2f}]"
  print(f"fewshot − PyTorch: {s['mean']:+.2f} points{interval} (margin ±{MARGIN:g}): {s['verdict']}")


if __name__ == "__main__":
  app.run(main)
