"""The distance-ratio paper's claims tested with seeds on every head, as a results page one command regenerates.

    python -m projects.dr_ratio.dr_results                                        # the page, from the kept records
    python -m projects.dr_ratio.dr_results --train --data_dir ../shared/data/omniglot  # trains what is missing first
    python -m projects.dr_ratio.dr_results --smoke --train --data_dir DIR --out /tmp/page  # a tiny grid

The grid is {ProtoNet, 1-NN} x {softmax, DR} x {1-shot, 5-shot}, 5-way, Conv4, on Omniglot (default class
splits), seeds 0-9 for the claims' six arms and 0-4 for the 1-shot 1-NN replicate, each arm one seed group trained
by :mod:`experiments.reproduce_dr` (runs resume, so the grid can be trained over several sittings). The page is
built from the runs' records alone (``config.json``, ``metrics.jsonl``, ``results.json``; no checkpoints), kept in
``<out>/results/<dataset>/`` (and, for Omniglot, its second dataset's in ``<out>/reproductions/``, read by
:mod:`projects.dr_ratio.dr_second_dataset`): with them present, the command trains nothing and writes the same page byte
for byte (the figures beside it aside): ``<out>/results.md`` for Omniglot, ``<out>/results_<dataset>.md`` for
another dataset, so that no page overwrites another.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from fewshot import analyze, runner
from fewshot.analysis.tables import render_markdown
from fewshot.config import Config
from fewshot.records.reading import read_run

from projects.dr_ratio import dr_centrings, dr_claims, dr_grid, dr_prereg, dr_provenance, dr_second_dataset, dr_tables

EPISODES = 4000  # BUILD_NOTES, "The DR paper's claims, with seeds": the pilot's 1-shot curves are within a point of their plateau
SEEDS = "0-9"  # the claims' six arms
REPLICATE_SEEDS = "0-4"  # the 1-shot 1-NN replicate
SMOKE = dict(episodes=4, eval_every=2, seeds="0-2")
OMNIGLOT_CHARACTERS = 1623  # background 964 + evaluation 659 (Lake et al. 2015)


# The options every run of the grid shares with the others of its page: a run that differs in one is not the grid's.
SAME_PROTOCOL = ("dataset", "way", "episodes", "eval_every", "backbone", "distance", "class_splits", "test_episodes")


def load_arms(records: pathlib.Path, args=None) -> dict[str, dict[str, list]]:
  """``{setting: {"softmax": runs, "DR": runs}}`` from the kept records, runs in seed order; with ``args``, only
  the grid's runs. A record that cannot be read, or a run of another protocol than the others, is refused in one
  line naming it (it would join an arm by its shot, head and classifier alone).
  """
  from fewshot.errors import FewshotError

  arms: dict[str, dict[str, list]] = {}
  grid = None if args is None else set(dr_grid.grid_runs(args))
  first, outside = None, []
  for path in sorted(records.glob("*/config.json")):
    try:
      run = read_run(path.parent, Config.from_dict)
    except (FewshotError, ValueError, KeyError, OSError) as e:
      sys.exit(f"error: the kept record {path.parent} cannot be read ({str(e).rstrip('.')}); restore it from git "
               "(git checkout -- docs/results) or move it out of the page's records.")
    c = run.config
    if grid is not None and dr_grid.arm_key(c.to_dict()) not in grid:
      outside.append(path.parent.name)  # an extra seed, or another grid's run: named, never silently dropped
      continue
    first = first or run
    differs = [f for f in SAME_PROTOCOL if getattr(c, f) != getattr(first.config, f)]
    if differs:
      sys.exit(f"error: the kept record {path.parent} is not a run of the page's grid (its --{differs[0]} "
               f"{getattr(c, differs[0])}, {first.path}'s {getattr(first.config, differs[0])}); move it out of "
               f"{records}.")
    setting = f"{c.shot}-shot {'ProtoNet' if c.classifier == 'proto' else '1-NN'}"
    arms.setdefault(setting, {}).setdefault("DR" if c.head == "dr" else "softmax", []).append(run)
  if outside:
    print(f"note: {len(outside)} kept records in {records} are not runs of the grid these options name and are left "
          f"out of the page: {', '.join(outside[:3])}{' ...' if len(outside) > 3 else ''} (--seeds chooses the "
          "grid's seeds).", file=sys.stderr)
  order = lambda s: (int(s.split("-")[0]), s.endswith("1-NN"))  # noqa: E731
  return {s: {h: sorted(runs, key=lambda r: r.config.seed) for h, runs in arms[s].items()}
          for s in sorted(arms, key=order)}


def page_files(dataset: str) -> tuple[str, str]:
  """The page's file and its figure's, for ``dataset``: Omniglot's are the kept ``results.md`` and
  ``results/val_accuracy.png``; another dataset's carry its name, so that building it never overwrites them.
  """
  if dataset == "omniglot":
    return "results.md", "val_accuracy.png"
  return f"results_{dataset}.md", f"val_accuracy_{dataset}.png"


def plot_curves(arms: dict, out: pathlib.Path, name: str = "val_accuracy.png") -> str:
  """Validation accuracy against episodes, one panel per setting: each arm's median over seeds and the band of its
  middle half of seeds (25th to 75th percentile).
  """
  from fewshot import plot  # matplotlib only here

  pyplot = plot._pyplot()
  columns = min(2, len(arms))
  rows = -(-len(arms) // columns)
  fig, axes = pyplot.subplots(rows, columns, figsize=(plot.PAGE, 2.4 * rows), sharex=True, squeeze=False)
  for ax, (setting, heads) in zip(axes.flat, arms.items()):
    for head, runs in heads.items():
      episodes, median, low, high = plot.median_band(runs, "val_accuracy")
      line, = ax.plot(episodes, median, label=f"{head} (median of {len(runs)} seeds)")
      ax.fill_between(episodes, low, high, color=line.get_color(), alpha=0.25, linewidth=0)
    ax.set(title=setting)
  for ax in axes[-1]:
    ax.set_xlabel("episodes")
  for ax in axes[:, 0]:
    ax.set_ylabel("validation accuracy (%)")
  for ax in axes.flat[: len(arms)]:  # each panel its own legend: its arms' seed counts differ (the 1-NN replicate)
    ax.legend(loc="best", fontsize="small", title="band: seeds' 25–75%", title_fontsize="small")
  path = out / name
  fig.savefig(path, dpi=150, bbox_inches="tight")
  pyplot.close(fig)
  return path.name


def page(arms: dict, made: dict, records: pathlib.Path, figure: str, preregistered: str = "",
         second_dataset: str = "") -> str:
  """The page's markdown, a function of the records alone."""
  tests = {setting: dr_claims.cell_tests(heads["softmax"], heads["DR"], setting) for setting, heads in arms.items()}
  any_run = next(iter(next(iter(arms.values())).values()))[0]
  c = any_run.config
  data = json.loads((pathlib.Path(any_run.path) / "config.json").read_text()).get("data") or {}
  used = "" if "total" not in data else (
      f"; the data as used: {data['total']['classes']} classes in all, "
      + " / ".join(f"{data[s]['classes']} {s}" for s in ("train", "val", "test") if s in data)
      + (f", of Omniglot's {OMNIGLOT_CHARACTERS:,} characters" if c.dataset == "omniglot" else "")
      + (f", read from {', '.join(data['files'])}" if data.get("files") else ""))
  counts = sorted({len(runs) for heads in arms.values() for runs in heads.values()}, reverse=True)
  seeds = " or ".join(str(n) for n in counts)
  header = (f"# The distance-ratio paper's claims, tested with seeds\n\n"
            f"Kim, Parviainen & Malde (arXiv 2201.08676) compare the softmax (S) and distance-ratio (DR) formulations "
            f"with one run per formulation. Here every arm is {seeds} seeds: {c.dataset}"
            f"{'' if c.class_splits is None else f' (class splits {c.class_splits}{used})'}, "
            f"{c.way}-way, {c.backbone}, {c.episodes} episodes, a checkpoint every {c.eval_every}, "
            f"{c.test_episodes} test episodes per run. Every comparison treats the seeds as the replicates. An S "
            f"run and a DR run of one seed share the initialisation and every episode, so the primary test is "
            f"paired: the per-seed differences DR − S, their mean ± 95% t-interval and the exact sign-flip p (with "
            f"n pairs it cannot go below 2 / 2^n: 0.0625 for 5); the unpaired two-sided Mann-Whitney U on one value "
            f"per seed (exact where no values tie) and the paper's own tests on pooled checkpoints stand beside it. "
            f"Within a claim the paired p-values are Holm-corrected. A claim is *supported* where every setting it "
            f"covers is significant in its direction, *partly supported* where some are, *contradicted* where one is "
            f"significant the other way, and *not detected* otherwise, with what the design could have seen in the "
            f"measure's own units: the smallest mean difference it detects with 80% power after Holm (the exact "
            f"sign-flip test at 0.05 / the claim's settings, simulated on normal differences with the observed "
            f"per-seed SD), beside the difference at which the paper's own test on pooled checkpoints turns "
            f"significant and the interval the data give. Not detected is not refuted.\n")
  if {"1-shot ProtoNet", "1-shot 1-NN"} <= set(arms):
    header += ("\nWith one support image per class, a 1-NN head and a prototype are the same classifier, trained on "
               "the same episodes from the same initialisation; the code computes them differently, so they round "
               "differently and training takes other paths from the first episode. The two 1-shot settings are "
               "therefore replicates of each other: how far they differ is how far run-to-run noise alone goes.\n")
  sections = [header, *([preregistered] if preregistered else []), "## Seeds 0-9: the first look\n",
              render_markdown([dr_claims.claim_table(tests)]), _multiplicity(tests),
              render_markdown([dr_centrings.centring_table(arms, tests)]),
              render_markdown([dr_claims.experiment_table(tests)]), render_markdown([dr_claims.not_tested_table()]),
              PROTOCOL, render_markdown([dr_tables.accuracy_table(arms, tests)]),
              render_markdown([dr_tables.speed_table(tests)]), f"![validation accuracy]({figure})\n",
              render_markdown([dr_tables.diagnostics_table(tests)]), _paper_tables(arms),
              *([second_dataset] if second_dataset else []), dr_provenance.how_made(made, arms, records)]
  return "\n".join(sections)


PROTOCOL = """## How this protocol differs from the paper's

| | the paper | here |
|---|---|---|
| data | CUB-200-2011 and mini-ImageNet, 84 px | Omniglot background-small (242 of its 1,623 characters), 28 px, no augmentation |
| backbones | Conv4 and ResNet18 | Conv4 |
| training | 60,000 (1-shot) and 50,000 (5-shot) episodes, a checkpoint every 100 | 4,000 episodes, a checkpoint every 100 (40 checkpoints) |
| queries | 16 per class in training episodes, 15 in test episodes | 16 in 1-shot training and 15 in 5-shot (Omniglot has 20 drawings a character: 5 + 16 would not fit), 15 in test episodes |
| replicates | one run per formulation | seeds, paired across S and DR |
| diagnostics | centred as the authors' code does (each point over its features); the text describes centring by the mean point | the text's centring (points) decides; the code's (features) beside it where runs recorded both (the table "Claims 2-4 under each centring") |
"""


def _multiplicity(tests: dict) -> str:
  """How many of the page's per-seed tests survive a Benjamini-Hochberg correction across all of them, and which."""
  adjusted = dr_claims.page_adjusted(tests)
  kept = [f"{setting} {dr_claims.MEASURE_WORDS.get(measure, measure)} ({p:.4f})"
          for (setting, measure), p in adjusted.items() if p < dr_claims.ALPHA]
  named = f": {'; '.join(kept)}" if kept else ""
  return (f"Multiplicity: the page runs {len(adjusted)} paired per-seed tests (every measure of every setting); "
          f"{len(kept)} of them stay below 0.05 after a Benjamini-Hochberg correction across all {len(adjusted)}"
          f"{named}.\n")


def _paper_tables(arms: dict) -> str:
  """The paper's per-checkpoint Tables 3-10 for each setting, checkpoints pooled over the seeds."""
  parts = ["## The paper's Tables 3-10, per setting (every checkpoint of an arm pooled over its seeds)\n"]
  for setting, heads in arms.items():
    text = analyze.report_arms(heads["softmax"], heads["DR"], fmt="markdown")
    pooled = text.split("### ")[3:]  # the measures' tables; accuracy and per-seed means are above
    pooled = ["### " + block for block in pooled]
    parts.append(f"<details><summary>{setting}</summary>\n\n" + "".join(pooled).rstrip() + "\n\n</details>\n")
  return "\n".join(parts)


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--dataset", default="omniglot", choices=("omniglot", "strokes"))
  parser.add_argument("--data_dir", default=None)
  parser.add_argument("--out", default="docs", help="where the page (results.md; results_<dataset>.md for another "
                      "dataset than omniglot) and results/ go (default docs)")
  parser.add_argument("--runs", default=None, help="where the grid trains (default runs/dr_<dataset>)")
  parser.add_argument("--seeds", default=None, help=f"the claims' arms' seeds (default {SEEDS})")
  parser.add_argument("--replicate_seeds", default=None,
                      help=f"the 1-shot 1-NN replicate's seeds (default {REPLICATE_SEEDS} with the default "
                           "--seeds, else --seeds)")
  parser.add_argument("--episodes", type=int, default=EPISODES)
  parser.add_argument("--eval_every", type=int, default=100)
  parser.add_argument("--smoke", action="store_true", help="a tiny grid: checks the generator, not the paper")
  parser.add_argument("--train", action="store_true", help="train the runs whose records are missing (else refused)")
  args = parser.parse_args(argv)
  if args.smoke:
    args.episodes, args.eval_every, args.seeds = SMOKE["episodes"], SMOKE["eval_every"], SMOKE["seeds"]
  default_seeds = args.seeds is None
  args.seeds = args.seeds or SEEDS
  args.replicate_seeds = args.replicate_seeds or (REPLICATE_SEEDS if default_seeds else args.seeds)
  args.out = pathlib.Path(args.out)
  args.runs = pathlib.Path(args.runs or f"runs/dr_{args.dataset}")
  return args


def main(argv=None) -> str:
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parse_args(argv)
  records = args.out / "results" / args.dataset
  expected = dr_grid.expected_runs(args)
  missing = [key for key in dr_grid.grid_runs(args) if key not in dr_grid.kept_runs(records)]
  if missing and not args.train:
    more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
    sys.exit(f"error: {records} holds {expected - len(missing)} of the grid's {expected} runs' records and lacks "
             f"{dr_grid.describe_run(missing[0])}{more}; pass --train to train the missing ones into {args.runs} (hours on a "
             "CPU; they resume; kept records are never replaced), or --out a folder that holds them.")
  if missing:
    dr_grid.train_grid(args, argv, records)
  if not (records / "made.json").is_file():
    sys.exit(f"error: {records / 'made.json'} is missing: the page says how its runs were made from it; restore it "
             "(git checkout -- docs/results) or train the grid again with --train into a new --out.")
  try:
    made = json.loads((records / "made.json").read_text())
  except ValueError as e:
    sys.exit(f"error: {records / 'made.json'} is not readable JSON ({e}): restore it (git checkout -- docs/results) "
             "or train the grid again with --train into a new --out.")
  arms = load_arms(records, args)
  markdown, figure = page_files(args.dataset)
  figure = plot_curves(arms, args.out / "results", figure)
  preregistered = dr_prereg.section(records, arms) if args.dataset == "omniglot" else ""
  draw = lambda runs, name: "results/" + plot_curves(runs, args.out / "results", name)  # noqa: E731
  second = dr_second_dataset.section(args.out / "reproductions", draw) if args.dataset == "omniglot" else ""
  text = page(arms, made, records.relative_to(args.out), f"results/{figure}", preregistered, second)
  (args.out / markdown).write_text(text)
  print(f"wrote {args.out / markdown}")
  return text


if __name__ == "__main__":
  runner.run_script(main)
