"""The DR page's other datasets: reproductions run with both heads (docs/reproductions.md), one section each
(:data:`SOURCES`): Snell et al.'s Omniglot protocol, and mini-ImageNet under the DR paper's training (issue 54).

Those runs differ from the page's own in every way that could matter (another dataset or split, other training
episodes and tests, a shorter schedule than the paper's, 3 seeds), and a softmax and a DR run of one seed draw the
same episodes there too (as far as the shorter of the two trains: each table says how far), so their test
accuracies pair by seed as the page's do. A section is a function of the records kept in ``docs/reproductions/``
alone, read through the reproduction page's own report (:mod:`fewshot.published.report`), so the two pages cannot
disagree; a source with nothing kept has no section.

    section(pathlib.Path("docs/reproductions"))   # "" where no run of any source is kept
"""

from __future__ import annotations

import dataclasses
import pathlib

from fewshot import published
from fewshot.published import plan, report

ENTRY = "snell2017_omniglot"


def _row(r: report.CellReport) -> str:
  values = [report.ours_text(v) for v in r.by_arm.values()]
  if r.paired is None:
    return f"| {r.cell.name} | {' | '.join(values)} | – |"
  mean, half, p, n = r.paired
  interval = "" if half is None else f" ± {half:.2f}"
  shared = f"; {r.shared}" if r.shared else ""
  return (f"| {r.cell.name} | {' | '.join(values)} | {mean:+.2f}{interval} ({n} pairs, sign-flip p = {p:.3g}, "
          f"floor {2 / 2 ** n:.3g}{shared}) |")


@dataclasses.dataclass(frozen=True)
class Source:
  """A reproduction whose runs pair the two heads by seed: its entry, the section's heading and first paragraph,
  and why its cells' signs are or are not independent (said after the table).
  """

  entry: str
  heading: str
  about: str
  independence: str


SOURCES = (
    Source(ENTRY, "A second dataset: Snell et al.'s protocol on the complete Omniglot",
           f"The runs of [`{ENTRY}`](reproductions.md) trained both heads on the complete Omniglot (1,623 characters, "
           "Vinyals' published split, rotations as classes, 60-way episodes) and tested them on 1,000 episodes of "
           "each cell; they bear on claim 0 (test accuracy) only.",
           "the 1-shot cells test one model's runs and the 5-shot cells another's, so they are not {cells} "
           "independent signs"),
    # Issue 54: the first natural-image dataset, once its runs are kept (until then the page has no such section).
    Source("kim2022_mini_imagenet", "A natural-image dataset: mini-ImageNet",
           "The runs of [`kim2022_mini_imagenet`](reproductions.md) trained Conv4 ProtoNet with both heads on "
           "mini-ImageNet (Ravi & Larochelle's split, 84 px, 16 queries, the DR paper's augmentation) on a schedule "
           "much shorter than the paper's, and tested them on 600 5-way episodes of 15 queries; they bear on claim 0 "
           "(test accuracy) only.",
           "{cells} cell(s), one model's runs"),
)


def _block(reproductions: pathlib.Path, source: Source) -> list[str]:
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
    blocks += [f"Schedule `{schedule.name}`: {schedule.about}. Seeds {', '.join(map(str, seeds))}; test accuracy "
               f"(%), mean ± 95% t-interval (the per-seed values).\n",
               f"| cell | {' | '.join(f'{h} (ours)' for h in labels)} | {labels[1]} − {labels[0]} (paired by seed) |",
               "|---|" + "---|" * (len(labels) + 1),
               *[_row(r) for r in reports], "",
               f"DR − S is positive in {positive} of the {len(paired)} cells; "
               f"{source.independence.format(cells=len(paired))}. With {pairs} pairs the "
               f"exact sign-flip p cannot go below {2 / 2 ** pairs:.3g}, so these runs cannot decide claim 0 on their "
               "own: they give a second dataset's direction, not a test.\n"]
  return [f"## {source.heading}\n", f"{source.about}\n", *blocks] if blocks else []


def section(reproductions: pathlib.Path) -> str:
  """The page's sections on the reproductions' paired runs (:data:`SOURCES`), or ``""`` where none are kept under
  ``reproductions``.
  """
  return "\n".join(line for source in SOURCES for line in _block(reproductions, source))
