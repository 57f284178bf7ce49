"""Published results fewshot can run, as data, with the runs that reproduce them and ours beside theirs.

* :mod:`~fewshot.published.registry`: what a published result is (``Entry``: source, protocol, models, cells);
* one module per source: :mod:`~fewshot.published.snell2017`, :mod:`~fewshot.published.kim2022`,
  :mod:`~fewshot.published.musgrave2020`, :mod:`~fewshot.published.lake`, :mod:`~fewshot.published.finn2017`,
  :mod:`~fewshot.published.lee2019`;
* :mod:`~fewshot.published.plan`: the runs that reproduce an entry, where they live, what their records say;
* :mod:`~fewshot.published.report`: ours beside theirs, cell by cell, under each cell's margin;
  :mod:`~fewshot.published.lake_report`: ours on Lake's runs beside the field's figures, numbers side by side;
* :mod:`~fewshot.published.page`: docs/reproductions.md, built from the kept records;
  :mod:`~fewshot.published.kept`: which records are kept (each run its entry's and readable, none replaced).

    from fewshot import published
    entry = published.ENTRIES["snell2017_omniglot"]
    [(cell.name, cell.value) for cell in entry.cells]   # the paper's numbers

``python -m fewshot.reproduce NAME --seeds 0-2 --data_dir DIR`` trains and tests an entry; ``python -m
fewshot.reproduce --list`` names them.

May import: kernel, records, analysis (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from fewshot.published import finn2017, kim2022, lake, lee2019, musgrave2020, snell2017
from fewshot.published.registry import Cell, Comparison, Entry, Model, Schedule

ENTRIES: dict[str, Entry] = {entry.name: entry for entry in (
    snell2017.OMNIGLOT, lake.BACKGROUND, lake.SMALL1, lake.SMALL2, finn2017.OMNIGLOT, snell2017.MINI_IMAGENET, kim2022.CUB,
    kim2022.MINI_IMAGENET, lee2019.CIFAR_FS, lee2019.FC100, musgrave2020.CUB, musgrave2020.CARS196, musgrave2020.SOP)}

__all__ = ["ENTRIES", "Cell", "Comparison", "Entry", "Model", "Schedule"]
