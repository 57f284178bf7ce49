"""The training diagnostics by name: one table that the diagnostics, statistics, analysis and plots read.

Each diagnostic of an update (:mod:`fewshot.episodic.diagnostics`) is a column of ``metrics.jsonl``;
the DR paper compares runs on four of them (its Tables 3-10), with what "properly learned"
means for each: con-alpha < 1 (queries close in on their class faster than the space
grows), div-alpha > 1, con-div < 1; the norm ratio has no such direction. No array library
is imported here, so reading runs needs neither JAX nor Flax.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Diagnostic:
  name: str  # the metrics.jsonl column
  label: str  # how tables and figures title it (plain text: tables print it as it is)
  symbol: str  # the quantity as figures write it, in matplotlib's mathtext (subscripts as subscripts)
  compared: bool = False  # one of the paper's comparisons between runs
  properly_learned: str | None = None  # "<1" or ">1": the direction of a properly learned update


# In the order diagnostics are computed and logged.
DIAGNOSTICS = (
    Diagnostic("alpha", "Procrustes α̂", r"$\hat{\alpha}$"),
    Diagnostic("norm_ratio", "norm ratio", r"$\Vert Y - \hat{\alpha} X\Vert \;/\; \Vert Y - X\Vert$", compared=True),
    Diagnostic("psi_con", "ψ con", r"$\psi_\mathrm{con}$"),
    Diagnostic("psi_div", "ψ div", r"$\psi_\mathrm{div}$"),
    Diagnostic("con_alpha", "con-alpha", r"$\psi_\mathrm{con} \;/\; \hat{\alpha}$", compared=True,
               properly_learned="<1"),
    Diagnostic("div_alpha", "div-alpha", r"$\psi_\mathrm{div} \;/\; \hat{\alpha}$", compared=True,
               properly_learned=">1"),
    Diagnostic("con_div", "con-div", r"$\psi_\mathrm{con} \;/\; \psi_\mathrm{div}$", compared=True,
               properly_learned="<1"),
)
BY_NAME = {d.name: d for d in DIAGNOSTICS}
FIELDS = tuple(d.name for d in DIAGNOSTICS)  # every diagnostic of an update, as logged
# The paper's comparisons, in its table order.
MEASURES = ("norm_ratio", "con_alpha", "div_alpha", "con_div")
PROPERLY_LEARNED = {name: BY_NAME[name].properly_learned for name in MEASURES if BY_NAME[name].properly_learned}
LABELS = {d.name: d.label for d in DIAGNOSTICS}
SYMBOLS = {d.name: d.symbol for d in DIAGNOSTICS}
assert set(MEASURES) == {d.name for d in DIAGNOSTICS if d.compared}
