r"""Choose an Omniglot one-shot recipe without test-set leakage: held-out within-alphabet 20-way runs.

Lake et al.'s benchmark (``all_runs``) draws its 20 runs from the 20 evaluation alphabets. With the
background alphabets only, this script builds the same kind of runs from alphabets held out of
training: every run is 20 characters of one held-out alphabet, one drawer's image of each as the
support and another drawer's as the query, in the ``all_runs`` layout (``run01/class_labels.txt``,
``training/classNN.png``, ``test/itemNN.png``, the original 105x105 PNGs), so that
``fewshot.lake`` scores a trained run on them exactly as it would score Lake's.

    python -m experiments.omniglot_oneshot --data_dir ../shared/data/omniglot --out runs/oneshot \
        --options baseline,rotations,distort --seeds 0-2

For each option (a list of ``python -m fewshot.train`` flags, see OPTIONS) it trains a seed group
on the remaining alphabets (``--protocol all_characters``: every character trains, a quarter held
out for validation), scores every seed on the held-out runs, and writes the table (mean ± 95%
t-interval across seeds of the 400-item accuracy, per option) to OUT/summary.md.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import io
import pathlib
import subprocess
import sys
import zipfile

import numpy as np
from PIL import Image

from fewshot import groups, stats

# Held out by default: the two largest background-small alphabets after katakana, so that each gives
# many distinct 20-character runs (Korean 40, Sanskrit 42 characters).
HELD_OUT = ("Korean", "Sanskrit")
RUNS_PER_ALPHABET = 10
WAY = 20
BASE = ["--dataset", "omniglot", "--protocol", "all_characters", "--shot", "1", "--query", "5", "--test_query", "5",
        "--eval_every", "250", "--val_episodes", "100", "--test_episodes", "100"]
OPTIONS = {
    "baseline": ["--way", "5", "--episodes", "3000"],
    "train_way_20": ["--way", "20", "--episodes", "3000"],
    "rotations": ["--way", "5", "--episodes", "3000", "--rotations"],
    "distort": ["--way", "5", "--episodes", "3000", "--distort"],
    "train_way_20_rotations_distort": ["--way", "20", "--episodes", "3000", "--rotations", "--distort"],
}


def read_characters(data_dir: pathlib.Path) -> dict[str, dict[str, list[bytes]]]:
  """{alphabet: {character: [PNG bytes of each drawer, in file order]}} from the background zips (deduplicated)."""
  found: dict = collections.defaultdict(dict)
  for archive in sorted(data_dir.glob("images_background*.zip")):
    with zipfile.ZipFile(archive) as zf:
      members = collections.defaultdict(list)
      for name in sorted(zf.namelist()):
        parts = name.split("/")
        if name.endswith(".png") and len(parts) >= 4:
          members[(parts[-3], parts[-2])].append(zf.read(name))
      for (alphabet, character), images in members.items():
        found[alphabet].setdefault(character, images)  # Greek and Latin are in both small sets
  return found


def write_runs(characters: dict[str, dict[str, list[bytes]]], held_out: tuple[str, ...], out: pathlib.Path,
               runs_per_alphabet: int = RUNS_PER_ALPHABET, seed: int = 0) -> int:
  """Lake-format runs from the held-out alphabets into ``out``; returns how many."""
  rng, number = np.random.default_rng(seed), 0
  for alphabet in held_out:
    names = sorted(characters[alphabet])
    if len(names) < WAY:
      raise SystemExit(f"alphabet {alphabet} has {len(names)} characters, fewer than the {WAY} a run needs")
    for _ in range(runs_per_alphabet):
      number += 1
      run = out / f"run{number:02d}"
      (run / "training").mkdir(parents=True)
      (run / "test").mkdir()
      chosen = rng.choice(names, WAY, replace=False)
      items = rng.permutation(WAY)
      lines = []
      for c, name in enumerate(chosen):
        support_drawer, query_drawer = rng.choice(len(characters[alphabet][name]), 2, replace=False)
        (run / "training" / f"class{c + 1:02d}.png").write_bytes(characters[alphabet][name][support_drawer])
        item = int(np.flatnonzero(items == c)[0]) + 1
        (run / "test" / f"item{item:02d}.png").write_bytes(characters[alphabet][name][query_drawer])
      for item in range(1, WAY + 1):
        c = int(items[item - 1])
        lines.append(f"run{number:02d}/test/item{item:02d}.png run{number:02d}/training/class{c + 1:02d}.png")
      (run / "class_labels.txt").write_text("\n".join(lines) + "\n")
  return number


def write_training_folder(characters: dict, held_out: tuple[str, ...], out: pathlib.Path) -> int:
  """The other alphabets as an extracted ``alphabet/character/*.png`` folder; returns its characters."""
  count = 0
  for alphabet, chars in characters.items():
    if alphabet in held_out:
      continue
    for name, images in chars.items():
      folder = out / alphabet / name
      folder.mkdir(parents=True, exist_ok=True)
      for i, data in enumerate(images):
        Image.open(io.BytesIO(data)).save(folder / f"{i:02d}.png")
      count += 1
  return count


@dataclasses.dataclass
class Scored:
  option: str
  seeds: tuple[int, ...]
  accuracies: list[float]  # each seed's accuracy over all held-out items, %


def score(option: str, workdirs: list[str], runs_dir: pathlib.Path, seeds: tuple[int, ...]) -> Scored:
  import fewshot  # noqa: PLC0415  (the model machinery, once the runs are trained)
  from fewshot import lake  # noqa: PLC0415

  accuracies = [lake.evaluate(fewshot.load(w), str(runs_dir))["rules"]["head"]["accuracy"] for w in workdirs]
  return Scored(option, seeds, accuracies)


def summary(scored: list[Scored], held_out: tuple[str, ...], num_runs: int) -> str:
  lines = [f"# Held-out within-alphabet {WAY}-way one-shot runs ({num_runs} runs from {', '.join(held_out)})", "",
           "| option | seeds | accuracy per seed (%) | mean ± 95% t-interval |", "|---|---|---|---|"]
  for s in scored:
    mean, half = stats.t_interval(s.accuracies)
    per_seed = ", ".join(f"{a:.2f}" for a in s.accuracies)
    lines.append(f"| {s.option} | {len(s.seeds)} | {per_seed} | {mean:.2f} ± {half or 0:.2f} |")
  return "\n".join(lines) + "\n"


def main(argv=None) -> str:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data_dir", required=True, help="the folder holding images_background*.zip")
  parser.add_argument("--out", default="runs/oneshot")
  parser.add_argument("--options", default=",".join(OPTIONS))
  parser.add_argument("--seeds", default="0-2")
  parser.add_argument("--held_out", default=",".join(HELD_OUT))
  parser.add_argument("--episodes", type=int, default=None, help="override every option's training episodes")
  args = parser.parse_args(argv)
  out, held_out, seeds = pathlib.Path(args.out), tuple(args.held_out.split(",")), groups.parse_seeds(args.seeds)
  characters = read_characters(pathlib.Path(args.data_dir))
  runs_dir, train_dir = out / "heldout_runs", out / "train_characters"
  if not runs_dir.exists():
    write_runs(characters, held_out, runs_dir)
  if not train_dir.exists():
    write_training_folder(characters, held_out, train_dir)
  num_runs = len(list(runs_dir.glob("run*")))
  scored = []
  for option in args.options.split(","):
    flags = [*BASE, *OPTIONS[option], "--data_dir", str(train_dir), "--seeds", args.seeds,
             "--workdir", str(out / option), "--resume"]
    if args.episodes:
      flags += ["--episodes", str(args.episodes)]
    print(f"{option}: python -m fewshot.train {' '.join(flags)}", flush=True)
    subprocess.run([sys.executable, "-m", "fewshot.train", *flags], check=True)
    workdirs = sorted(str(p) for p in (out / option).iterdir() if p.is_dir())
    scored.append(score(option, workdirs, runs_dir, seeds))
  text = summary(scored, held_out, num_runs)
  (out / "summary.md").write_text(text)
  print(text)
  return text


if __name__ == "__main__":
  main()
