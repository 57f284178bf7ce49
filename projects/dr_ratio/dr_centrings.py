"""Claims 2-4 under both centrings of the diagnostics (issue 38, item 3).

The paper's text centres each point set by its mean point (``--centring points``, the page's primary convention);
the authors' code, which made the paper's numbers, subtracts each point's mean over its features (``features``).
Only the Procrustes scale and what is built on it depend on the choice (norm ratio, con- and div-alpha), so a run
trained with ``--centring both`` records the code's as ``<name>_features`` beside the paper's fields, from the same
update. Runs without those fields were recorded under the paper's convention only: "not measured" here, never guessed.
These functions only read the runs' records.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fewshot.analysis.tables import Cell, Table

from projects.dr_ratio import dr_claims

CENTRED_MEASURES = ("norm_ratio", "div_alpha", "con_alpha")  # the claims' measures the centring changes
FEATURES = "_features"


def recorded(arm) -> bool:
  """Whether every run of the arm recorded the authors' code's diagnostics (trained with --centring both)."""
  return all(np.isfinite(run.values(f"{measure}{FEATURES}")).any() for run in arm for measure in CENTRED_MEASURES)


def feature_tests(s_arm, dr_arm, setting: str) -> dict[str, dr_claims.Test] | None:
  """Claims 2-4's tests of one cell under the authors' code's centring, as :func:`dr_claims.cell_tests` makes them
  under the paper's; None where a run did not record it.
  """
  if not (recorded(s_arm) and recorded(dr_arm)):
    return None
  field = {measure: f"{measure}{FEATURES}" for measure in CENTRED_MEASURES}
  norm = dr_claims.pooled(s_arm, dr_arm, "norm_ratio", field["norm_ratio"])
  tests = {"norm_ratio": dr_claims.compare(setting, dr_claims.seed_geometric_means(s_arm, field["norm_ratio"]),
                                           dr_claims.seed_geometric_means(dr_arm, field["norm_ratio"]),
                                           norm.mannwhitney_p)}
  for measure in ("div_alpha", "con_alpha"):
    compared = dr_claims.pooled(s_arm, dr_arm, measure, field[measure])
    test = dr_claims.compare(setting, dr_claims.seed_proportions(s_arm, measure, field[measure]),
                             dr_claims.seed_proportions(dr_arm, measure, field[measure]), compared.fisher_p)
    tests[measure] = dataclasses.replace(test, pooled_critical=dr_claims.critical(compared))
  return tests


def centring_table(arms: dict, tests: dict[str, dict[str, dr_claims.Test]]) -> Table:
  """Claims 2-4's verdicts under each centring, by the page's rule (paired sign-flip, Holm within the claim)."""
  features = {setting: feature_tests(heads["softmax"], heads["DR"], setting) for setting, heads in arms.items()}
  rows = []
  for claim, _, measure, sign, settings in dr_claims.CLAIMS:
    if measure not in CENTRED_MEASURES or not any(s in tests for s in settings):
      continue
    covered = [s for s in settings if s in tests]
    _, paper = dr_claims.claim_verdict([tests[s][measure] for s in covered], sign)
    if all(features[s] is not None for s in covered):
      code_tests = [features[s][measure] for s in covered]
      adjusted, code = dr_claims.claim_verdict(code_tests, sign)
      code = "; ".join(dr_claims.paired_summary(t) for t in code_tests) + f" (Holm: {_listed(adjusted)}) — {code}"
    else:
      code = ("not measured: these runs recorded the paper's centring only (a run trained with --centring both "
              "records both)")
    rows.append((Cell(claim), Cell(paper), Cell(code)))
  return Table("Claims 2-4 under each centring of the diagnostics: the paper's text (points, the page's primary) "
               "and the authors' code (features), which made the paper's numbers",
               ("claim", "the paper's centring (points)", "the authors' code's centring (features)"), tuple(rows))


def _listed(ps) -> str:
  return ", ".join("—" if p is None else f"{p:.4f}" for p in ps)
