"""The DR page's descriptive tables, per arm and seed: test accuracy, training speed (claim 1's measures) and the
diagnostics (claims 2-4's), each with its tests beside it; the verdicts are :mod:`projects.dr_ratio.dr_claims`'.

    tests = {setting: dr_claims.cell_tests(heads["softmax"], heads["DR"], setting) for setting, heads in arms.items()}
    render_markdown([accuracy_table(arms, tests), speed_table(tests), diagnostics_table(tests)])
"""

from __future__ import annotations

import numpy as np

from fewshot.analysis import stats
from fewshot.analysis.tables import Cell, Table, format_p, format_proportion, format_value

from projects.dr_ratio import dr_claims


def _interval(values: np.ndarray, digits: int = 2) -> str:
  mean, half = stats.t_interval(values)
  return f"{mean:.{digits}f} ± {half:.{digits}f}" if half is not None else f"{mean:.{digits}f}"


def accuracy_table(arms: dict, tests: dict[str, dict[str, dr_claims.Test]]) -> Table:
  """Per arm its seeds' test accuracies and their mean ± 95% t-interval; per cell DR - S (Welch) and p."""
  rows = []
  for setting, cell in tests.items():
    t = cell["accuracy"]
    difference, half = stats.welch_difference(t.s, t.dr)
    for head, values in (("softmax", t.s), ("DR", t.dr)):
      model = arms[setting][head][0].config.model_name
      per_seed = ", ".join(f"{v:.2f}" for v in values)
      diff = f"{difference:+.2f} ± {half:.2f}" if head == "DR" and half is not None else ""
      rows.append(tuple(Cell(x) for x in (setting, model, str(len(values)), per_seed, _interval(values), diff)) +
                  (Cell(dr_claims.p_text(t) if head == "DR" else "", head == "DR" and t.p is not None and t.p < dr_claims.ALPHA),
                   Cell(format_p(t.paired_p) if head == "DR" else "",
                        head == "DR" and t.paired_p is not None and t.paired_p < dr_claims.ALPHA)))
  return Table("Test accuracy (%): 600 test episodes per run, seeds 0 to n - 1",
               ("setting", "model", "seeds", "per seed", "mean ± 95% t-interval", "DR − S ± 95% Welch",
                "Mann-Whitney p", "paired sign-flip p"), tuple(rows))


def _censored(values: np.ndarray, floor: float | None) -> str:
  """An arm's episodes-to-95%: its interval, or "≤ floor" for the runs that got there at the first checkpoint."""
  at_floor = int(np.sum(values <= floor)) if floor is not None else 0
  if at_floor == len(values):
    return f"≤ {floor:.0f} (all {at_floor} at the first checkpoint)"
  return _interval(values, 0) + (f" ({at_floor} of {len(values)} censored at ≤ {floor:.0f})" if at_floor else "")


def speed_table(tests: dict[str, dict[str, dr_claims.Test]]) -> Table:
  """Claim 1's measures per cell: episodes to 95% of the final validation accuracy (censored at the first
  checkpoint), the curve's mean, and its mean over the first episodes; each with its paired p.
  """
  rows = []
  for setting, cell in tests.items():
    e, m, early = cell["episodes_to_95"], cell["mean_val_accuracy"], cell["early_val_accuracy"]
    rows.append((Cell(setting), Cell(_censored(e.s, e.floor)), Cell(_censored(e.dr, e.floor)),
                 Cell(format_p(e.paired_p)), Cell(_interval(m.s)), Cell(_interval(m.dr)), Cell(format_p(m.paired_p)),
                 Cell(_interval(early.s)), Cell(_interval(early.dr)), Cell(format_p(early.paired_p))))
  return Table("Training speed, from each run's validation curve (mean ± 95% t-interval over seeds; p: paired "
               "sign-flip). Final accuracy: the mean of a run's last 5 checkpoints; a run at 95% of it by the first "
               f"checkpoint is censored there. The early mean (over the first {dr_claims.EARLY_EPISODES:,} episodes) was added "
               "after the first page was published.",
               ("setting", "episodes to 95% S", "episodes to 95% DR", "p", "mean val. accuracy S (%)",
                "mean val. accuracy DR (%)", "p", f"first {dr_claims.EARLY_EPISODES:,} episodes S (%)",
                f"first {dr_claims.EARLY_EPISODES:,} episodes DR (%)", "p"), tuple(rows))


def diagnostics_table(tests: dict[str, dict[str, dr_claims.Test]]) -> Table:
  """Claims 2-4's measures per cell, per seed, with the paper's pooled tests beside."""
  rows = []
  for setting, cell in tests.items():
    for measure in ("norm_ratio", "div_alpha", "con_alpha"):
      t = cell[measure]
      shown = format_value if measure == "norm_ratio" else format_proportion
      listed = lambda v: ", ".join(shown(stats.finite_or_none(x)) for x in v)  # noqa: E731
      rows.append((Cell(setting), Cell(dr_claims.MEASURE_WORDS[measure]), Cell(listed(t.s)), Cell(listed(t.dr)),
                   Cell(dr_claims.p_text(t), t.p is not None and t.p < dr_claims.ALPHA),
                   Cell(format_p(t.pooled_p), t.pooled_p is not None and t.pooled_p < dr_claims.ALPHA)))
  return Table("Diagnostics per seed (S, DR) and the tests", ("setting", "measure", "S per seed", "DR per seed",
               "Mann-Whitney p across seeds", "paper's test on pooled checkpoints (Mann-Whitney for the norm ratio, "
               "Fisher for proportions)"), tuple(rows))
