"""Published results fewshot can run, as data (``registry``), one module per source (``snell2017``, ...), the runs
that reproduce them (``plan``) and the page that sets ours beside theirs (``page``).

    from fewshot import published
    entry = published.ENTRIES["snell2017_omniglot"]
    [(cell.name, cell.value) for cell in entry.cells]   # the paper's numbers

``python -m fewshot.reproduce NAME --seeds 0-2 --data_dir DIR`` trains and tests an entry; ``python -m
fewshot.reproduce --list`` names them.

May import: kernel, records, analysis (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from fewshot.published import snell2017
from fewshot.published.registry import Cell, Comparison, Entry, Model, Schedule

ENTRIES: dict[str, Entry] = {entry.name: entry for entry in (snell2017.OMNIGLOT, snell2017.MINI_IMAGENET)}

__all__ = ["ENTRIES", "Cell", "Comparison", "Entry", "Model", "Schedule"]
