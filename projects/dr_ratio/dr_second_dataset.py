"""The DR page's other datasets: reproductions run with both heads (docs/reproductions.md), one section each
(:data:`SOURCES`): Snell et al.'s Omniglot protocol, and mini-ImageNet under the DR paper's training (issue 54).

Those runs differ from the page's own in every way that could matter (another dataset or split, other training
episodes and tests, a shorter schedule than the paper's, 3 seeds), and a softmax and a DR run of one seed draw the
same episodes there too (as far as the shorter of the two trains: each table says how far), so their test
accuracies pair by seed as the page's do. A section is a function of the records kept in ``docs/reproductions/``
alone, read through the reproduction page's own report (:mod:`fewshot.published.report`), so the two pages cannot
disagree; a source with nothing kept has no section. A source marked ``curves`` also shows its tested runs'
validation curves, where the page's builder passes a ``plot`` (``dr_results.plot_curves`` writing into ``results/``).

    section(pathlib.Path("docs/reproductions"))   # "" where no run of any source is kept
"""

from __future__ import annotations

import dataclasses
import pathlib

from fewshot import published
from fewshot.config import Config
from fewshot.published import plan, report
from fewshot.records.reading import read_runs

ENTRY = "snell2017_omniglot"


def _row(r: report.CellReport) -> str:
  values = [report.ours_text(v) for v in r.by_arm.values()]
  if r.paired is None:
    return f"| {r.cell.name} | {' | '.join(values)} | – |"
  mean, half, p, n = r.paired
  interval = "" if half is None else f" ± {half:.2f}"
  shared = f"; {r.shared}" if r.shared else ""
  return (f"| {r.cell.name} | {' | '.join(values)} | {mean:+.2f}{interval} ({report.counted(n, 'pair')}, sign-flip p = {p:.3g}, "
          f"floor {2 / 2 ** n:.3g}{shared}) |")


@dataclasses.dataclass(frozen=True)
class Source:
  """A reproduction whose runs pair the two heads by seed: its entry, the section's heading and first paragraph,
  and whether its tested runs' validation curves are drawn (a retraining entry's tested runs validate nothing, so its
  curves would be the select runs').
  """

  entry: str
  heading: str
  about: str
  curves: bool = False


SOURCES = (
    Source(ENTRY, "A second dataset: Snell et al.'s protocol on the complete Omniglot",
           f"The runs of [`{ENTRY}`](reproductions.md) trained both heads on the complete Omniglot (1,623 characters, "
           "Vinyals' published split, rotations as classes, 60-way episodes) and tested them on 1,000 episodes of "
           "each cell; they bear on claim 0 (test accuracy) only."),
    # Issue 54: the first natural-image dataset, once its runs are kept (until then the page has no such section).
    Source("kim2022_mini_imagenet", "A natural-image dataset: mini-ImageNet",
           "The runs of [`kim2022_mini_imagenet`](reproductions.md) trained Conv4 ProtoNet with both heads on "
           "mini-ImageNet (Ravi & Larochelle's split, 84 px, 16 queries, the DR paper's augmentation) on a schedule "
           "much shorter than the paper's, and tested them on 600 5-way episodes of 15 queries; they bear on claim 0 "
           "(test accuracy) only.", curves=True),
)


def independence(models: list[str]) -> str:
  """Why a schedule's paired cells are or are not independent signs: each model's cells test the same runs.

  >>> independence(["1-shot", "5-shot", "1-shot", "5-shot"])
  "the 1-shot cells test one model's runs and the 5-shot cells another's, so they are not 4 independent signs"
  """
  names = list(dict.fromkeys(models))
  if len(names) == 1:
    return "its cells test one model's runs, so they are one sign"
  parts = [f"the {names[0]} cells test one model's runs", *(f"the {name} cells another's" for name in names[1:])]
  return f"{', '.join(parts[:-1])} and {parts[-1]}, so they are not {len(models)} independent signs"


def tested_runs(reproductions: pathlib.Path, entry, schedule, seeds) -> dict[str, dict[str, list]]:
  """The records of the runs each cell of ``schedule`` tests, by model and then by arm's label, in seed order: what
  ``dr_results.plot_curves`` draws (one panel per model, a median curve per arm). Seeds an arm lacks are left out.
  """
  stage = plan.tested_stage(entry, schedule)
  arms = {}
  for model in entry.models_of(schedule):
    for arm in entry.arms:
      dirs = [plan.run_dir(str(reproductions), entry, schedule, model, arm, stage, s) for s in seeds]
      dirs = [d for d in dirs if (pathlib.Path(d) / "metrics.jsonl").is_file()]
      if dirs:
        arms.setdefault(model.name, {})[report.arm_label(entry, arm)] = read_runs(dirs, Config.from_dict)
  return arms


def _figure(reproductions: pathlib.Path, source: Source, entry, schedule, seeds, plot) -> list[str]:
  if plot is None or not source.curves:
    return []
  arms = tested_runs(reproductions, entry, schedule, seeds)
  if not arms:
    return []
  path = plot(arms, f"val_accuracy_{entry.name}_{schedule.name}.png")
  return [f"Validation accuracy of the tested runs against training episodes (each arm's median over its seeds, "
          f"the band its seeds' 25th to 75th percentile; `python -m fewshot.plot` draws the same runs' other "
          f"diagnostics):\n", f"![validation accuracy, {entry.name} {schedule.name}]({path})\n"]


def _block(reproductions: pathlib.Path, source: Source, plot=None) -> list[str]:
  entry = published.ENTRIES[source.entry]
  blocks = []
  for schedule in entry.schedules:
    seeds = plan.seeds_found(str(reproductions), entry, schedule)
    if not seeds:
      continue
    reports = report.cell_reports(str(reproductions), entry, schedule, seeds)
    labels = [report.arm_label(entry, arm) for arm in entry.arms]
    paired = [r.paired for r in reports if r.paired is not None]
    positive = sum(mean > 0 for mean, *_ in paired)
    pairs = min((n for *_, n in paired), default=0)
    signs = independence([r.cell.model for r in reports if r.paired is not None])
    blocks += [f"Schedule `{schedule.name}`: {schedule.about}. Seeds {', '.join(map(str, seeds))}; test accuracy "
               f"(%), mean ± 95% t-interval (the per-seed values).\n",
               f"| cell | {' | '.join(f'{h} (ours)' for h in labels)} | {labels[1]} − {labels[0]} (paired by seed) |",
               "|---|" + "---|" * (len(labels) + 1),
               *[_row(r) for r in reports], "",
               f"DR − S is positive in {positive} of the {len(paired)} cells; "
               f"{signs}. With {report.counted(pairs, 'pair')} the "
               f"exact sign-flip p cannot go below {2 / 2 ** pairs:.3g}, so these runs cannot decide claim 0 on their "
               "own: they give the direction on one more dataset, not a test.\n",
               *_figure(reproductions, source, entry, schedule, seeds, plot)]
  return [f"## {source.heading}\n", f"{source.about}\n", *blocks] if blocks else []


def section(reproductions: pathlib.Path, plot=None) -> str:
  """The page's sections on the reproductions' paired runs (:data:`SOURCES`), or ``""`` where none are kept under
  ``reproductions``; with ``plot(arms, file_name) -> the figure's path from the page``, a ``curves`` source's figure.
  """
  return "\n".join(line for source in SOURCES for line in _block(reproductions, source, plot))
