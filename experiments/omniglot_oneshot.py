r"""Choose an Omniglot one-shot recipe without test-set leakage: held-out within-alphabet 20-way runs.

Lake et al.'s benchmark (``all_runs``) draws its 20 runs from the 20 evaluation alphabets. With the
background alphabets only, this script builds the same kind of runs from alphabets held out of
training: every run is 20 characters of one held-out alphabet, one drawer's image of each as the
support and another drawer's as the query, in the ``all_runs`` layout (``run01/class_labels.txt``,
``training/classNN.png``, ``test/itemNN.png``, the original 105x105 PNGs), so that
``fewshot.episodic.lake`` scores a trained run on them exactly as it would score Lake's.

    python -m experiments.omniglot_oneshot --data_dir DIR --out runs/oneshot \
        --options baseline,rotations,distort --seeds 0-2 --episodes 3000

For each option (fields of :class:`fewshot.config.Config` over BASE, see OPTIONS) it trains a seed
group on the other alphabets with ``python -m fewshot.train ... --seeds`` (``--class_splits
all_characters``: every character trains but every fourth, which validates; validation at the
runs' 20-way shape picks each run's checkpoint), scores every seed on the held-out runs
(``lake_runs.json`` in its run directory), and rewrites OUT/summary.md after each option: per
seed the accuracy over the held-out items, and the mean ± 95% t-interval across seeds. A group
whose runs all finished is read back, an interrupted one resumed, so re-running continues.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import pathlib
import subprocess
import sys
import time
import zipfile

import numpy as np

from fewshot.analysis import stats
from fewshot.config import Config
from fewshot.records.rundir import RunDir
from fewshot.training import run_flags

from experiments import grid

# Held out by default: the two largest background-small alphabets after katakana, so that each gives
# many distinct 20-character runs (Korean 40, Sanskrit 42 characters).
HELD_OUT = ("Korean", "Sanskrit")
RUNS_PER_ALPHABET = 10
WAY = 20
# Validation and test episodes are the held-out runs' shape (20-way one-shot), so checkpoints are chosen for it.
BASE = dict(dataset="omniglot", class_splits="all_characters", shot=1, test_way=WAY, test_query=5, eval_every=500,
            val_episodes=100, test_episodes=200)
OPTIONS = {
    "baseline": {},  # the toolkit's default episodes: 5-way, 16 queries
    "train_way_20": dict(way=20, query=5),
    "rotations": dict(rotations=True),
    "distort": dict(distort=True),
    "image_size_56": dict(image_size=56),
    "combined": dict(way=20, query=5, rotations=True, distort=True),
    "combined_dr": dict(way=20, query=5, rotations=True, distort=True, head="dr"),
    "combined_halving": dict(way=20, query=5, rotations=True, distort=True, lr_halve_every=1000),
    "combined_way_60": dict(way=60, query=5, rotations=True, distort=True),
    "combined_dr_halving": dict(way=20, query=5, rotations=True, distort=True, head="dr", lr_halve_every=3000),
    "combined_dr_halving_way_60": dict(way=60, query=5, rotations=True, distort=True, head="dr", lr_halve_every=3000),
    "combined_dr_within_alphabet": dict(way=20, query=5, rotations=True, distort=True, head="dr", within_alphabet=True),
}
EPISODES = 3000
# The documented recipe (README.md, "Omniglot one-shot recipe"): the best option measured, for as long as it ran,
# tested on the mean embedding over shifts by up to 3 px (which leaves training and validation unchanged).
RECIPE = dict(**OPTIONS["combined_dr_halving_way_60"], episodes=6000, eval_every=1000, test_shifts=3)
# A smoke run (tests): a few episodes, validated and tested 5-way, so a small fixture supplies them.
SMOKE = dict(episodes=2, eval_every=2, val_episodes=1, test_episodes=1, test_way=5, query=2, test_query=2)


def read_characters(data_dir: pathlib.Path) -> dict[str, dict[str, list[bytes]]]:
  """{alphabet: {character: [PNG bytes of each drawer, in file order]}} from the background zips (deduplicated)."""
  found: dict = collections.defaultdict(dict)
  archives = sorted(data_dir.glob("images_background*.zip"))
  if not archives:
    raise SystemExit(f"no images_background*.zip in {data_dir}")
  for archive in archives:
    with zipfile.ZipFile(archive) as zf:
      members = collections.defaultdict(list)
      for name in sorted(zf.namelist()):
        parts = name.split("/")
        if name.endswith(".png") and len(parts) >= 4:
          members[(parts[-3], parts[-2])].append(zf.read(name))
      for (alphabet, character), images in members.items():
        found[alphabet].setdefault(character, images)  # Greek and Latin are in both small sets: first copy wins
  return found


def write_runs(characters: dict[str, dict[str, list[bytes]]], held_out: tuple[str, ...], out: pathlib.Path,
               runs_per_alphabet: int = RUNS_PER_ALPHABET, seed: int = 0) -> int:
  """Lake-format runs from the held-out alphabets into ``out``; returns how many."""
  rng, number = np.random.default_rng(seed), 0
  for alphabet in held_out:
    if alphabet not in characters:
      raise SystemExit(f"held-out alphabet {alphabet} is not among {', '.join(sorted(characters))}")
    names = sorted(characters[alphabet])
    if len(names) < WAY:
      raise SystemExit(f"alphabet {alphabet} has {len(names)} characters, fewer than the {WAY} a run needs")
    for _ in range(runs_per_alphabet):
      number += 1
      run = out / f"run{number:02d}"
      (run / "training").mkdir(parents=True)
      (run / "test").mkdir()
      chosen = rng.choice(names, WAY, replace=False)
      items = rng.permutation(WAY)  # item i + 1 is a drawing of class items[i] + 1
      for c, name in enumerate(chosen):
        support_drawer, query_drawer = rng.choice(len(characters[alphabet][name]), 2, replace=False)
        (run / "training" / f"class{c + 1:02d}.png").write_bytes(characters[alphabet][name][support_drawer])
        item = int(np.flatnonzero(items == c)[0]) + 1
        (run / "test" / f"item{item:02d}.png").write_bytes(characters[alphabet][name][query_drawer])
      lines = [f"run{number:02d}/test/item{i + 1:02d}.png run{number:02d}/training/class{c + 1:02d}.png"
               for i, c in enumerate(items)]
      (run / "class_labels.txt").write_text("\n".join(lines) + "\n")
  return number


def write_training_folder(characters: dict, held_out: tuple[str, ...], out: pathlib.Path) -> int:
  """The other alphabets as an extracted ``alphabet/character/*.png`` folder (the PNGs as released); returns its
  characters.
  """
  count = 0
  for alphabet, chars in characters.items():
    if alphabet in held_out:
      continue
    for name, images in chars.items():
      folder = out / alphabet / name
      folder.mkdir(parents=True, exist_ok=True)
      for i, data in enumerate(images):
        (folder / f"{i + 1:02d}.png").write_bytes(data)
      count += 1
  return count


def command_flags(fields: dict) -> list[str]:
  """The ``python -m fewshot.train`` flags that set ``fields`` (booleans as ``--name`` / ``--noname``)."""
  out = []
  for name, value in fields.items():
    out += [f"--{name}" if value else f"--no{name}"] if isinstance(value, bool) else [f"--{name}", str(value)]
  return out


@dataclasses.dataclass
class Scored:
  option: str
  seeds: tuple[int, ...]
  accuracies: list[float]  # each seed's head accuracy over all held-out items, %
  command: str
  train_seconds: float | None  # None: read back, trained by an earlier invocation


def train_option(option: str, fields: dict, seeds: tuple[int, ...], seeds_text: str, data_dir: pathlib.Path,
                 out: pathlib.Path) -> tuple[list[pathlib.Path], str, float | None]:
  """Train (or resume, or read back) the option's seed group; returns its run directories, command and seconds."""
  configs = [Config(**fields, data_dir=str(data_dir), seed=s) for s in seeds]  # refuses a bad option here
  workdirs = [out / option / c.run_name for c in configs]
  flags = [*command_flags(fields), "--data_dir", str(data_dir), "--seeds", seeds_text, "--workdir", str(out / option)]
  shown = " ".join(["python -m fewshot.train", *flags])
  if all(grid.finished_results(w, c) for w, c in zip(workdirs, configs)):
    print(f"{option}: done, skipped", flush=True)
    return workdirs, shown, None
  # --resume only where a run exists: with none it is refused (nothing to continue).
  resume = ["--resume"] if any(RunDir(w).holds_run() for w in workdirs) else []
  print(f"{option}: {shown} {' '.join(resume)}", flush=True)
  start = time.perf_counter()
  subprocess.run([sys.executable, "-m", "fewshot.train", *flags, *resume], check=True)
  return workdirs, shown, time.perf_counter() - start


def score(workdirs: list[pathlib.Path], runs_dir: pathlib.Path, test_shifts: int | None = None) -> list[float]:
  """Each run's head accuracy (%) on the held-out runs, written to its ``lake_runs.json`` (``test_shifts``: None,
  each run's own ``--test_shifts``).
  """
  from fewshot import evaluate  # noqa: PLC0415  (the model machinery, once the runs are trained)

  return [evaluate.evaluate_lake(str(w), str(runs_dir), test_shifts=test_shifts)["rules"]["head"]["accuracy"]
          for w in workdirs]


def summary(scored: list[Scored], held_out: tuple[str, ...], num_runs: int, test_shifts: int | None = None) -> str:
  views = "" if test_shifts is None else f", embeddings the mean over shifts by up to {test_shifts} px"
  lines = [f"# Held-out within-alphabet {WAY}-way one-shot runs ({num_runs} runs from {', '.join(held_out)}{views})",
           "",
           "| option | seeds | accuracy per seed (%) | mean ± 95% t-interval | training wall time |",
           "|---|---|---|---|---|"]
  for s in scored:
    mean, half = stats.t_interval(s.accuracies)
    per_seed = ", ".join(f"{a:.2f}" for a in s.accuracies)
    wall = "read back" if s.train_seconds is None else f"{s.train_seconds / 60:.1f} min"
    lines.append(f"| {s.option} | {len(s.seeds)} | {per_seed} | {mean:.2f} ± {half or 0:.2f} | {wall} |")
  lines += ["", "Commands:", ""] + [f"- {s.option}: `{s.command}`" for s in scored]
  return "\n".join(lines) + "\n"


def main(argv=None) -> str:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data_dir", required=True, help="the folder holding images_background*.zip")
  parser.add_argument("--out", default="runs/oneshot")
  parser.add_argument("--options", default=",".join(OPTIONS), help=f"comma-separated, of {', '.join(OPTIONS)}")
  parser.add_argument("--seeds", default="0-2")
  parser.add_argument("--held_out", default=",".join(HELD_OUT))
  parser.add_argument("--runs_per_alphabet", type=int, default=RUNS_PER_ALPHABET)
  parser.add_argument("--episodes", type=int, default=EPISODES, help="every option's training episodes")
  parser.add_argument("--eval_every", type=int, default=BASE["eval_every"])
  parser.add_argument("--test_shifts", type=int, default=None, help="score the held-out runs on the mean embedding "
                      "over shifts by up to this many pixels (default: each run's own --test_shifts)")
  parser.add_argument("--smoke", action="store_true", help="a few episodes validated 5-way (tests)")
  args = parser.parse_args(argv)
  out, held_out, seeds = pathlib.Path(args.out), tuple(args.held_out.split(",")), run_flags.parse_seeds(args.seeds)
  unknown = [o for o in args.options.split(",") if o not in OPTIONS]
  if unknown:
    raise SystemExit(f"unknown option {unknown[0]!r}; choose among {', '.join(OPTIONS)}")
  characters = read_characters(pathlib.Path(args.data_dir))
  runs_dir, train_dir = out / "heldout_runs", (out / "train_characters").resolve()
  if not runs_dir.exists():
    write_runs(characters, held_out, runs_dir, args.runs_per_alphabet)
  if not train_dir.exists():
    write_training_folder(characters, held_out, train_dir)
  num_runs = len(list(runs_dir.glob("run*")))
  base = {**BASE, "episodes": args.episodes, "eval_every": args.eval_every, **(SMOKE if args.smoke else {})}
  scored = []
  for option in args.options.split(","):
    workdirs, command, seconds = train_option(option, {**base, **OPTIONS[option]}, seeds, args.seeds, train_dir,
                                              out)
    scored.append(Scored(option, seeds, score(workdirs, runs_dir, args.test_shifts), command, seconds))
    text = grid.write_summary(out, summary(scored, held_out, num_runs, args.test_shifts))  # partial results
  return text


if __name__ == "__main__":
  main()
