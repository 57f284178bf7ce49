"""The distance-ratio paper's claims (Kim, Parviainen & Malde, arXiv 2201.08676), tested with seeds as replicates.

An *arm* is the runs of one configuration under several seeds; a *cell* is a (shot, classifier) pair of arms, S
(softmax) and DR. Every per-seed comparison is a two-sided Mann-Whitney U on one value per seed, with the exact
distribution (a few seeds, no ties); the paper's own per-checkpoint tests (checkpoints pooled over the seeds:
Mann-Whitney with the normal approximation, Fisher's exact test on proportions) are reported beside it. A claim
*holds* where every setting it covers is significant (p < 0.05) in its direction, *does not hold* where none is,
and is *mixed* otherwise. These functions only read the runs' records.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fewshot.analysis import stats
from fewshot.analysis.tables import Cell, Table, format_p, format_proportion, format_value

ALPHA = stats.SIGNIFICANCE_LEVEL


@dataclasses.dataclass(frozen=True)
class Test:
  """One setting's comparison of DR against S: the per-seed values, their p, and the paper's pooled p."""

  setting: str
  s: np.ndarray  # one value per seed
  dr: np.ndarray
  p: float | None
  method: str  # of the per-seed test: "exact", or "normal approx." where values tie
  pooled_p: float | None = None

  @property
  def difference(self) -> float:
    """DR's mean minus S's."""
    return float(np.nanmean(self.dr) - np.nanmean(self.s))

  def supports(self, sign: int) -> bool:
    """Significant, in the direction ``sign`` (+1: DR larger; -1: DR smaller)."""
    return self.p is not None and self.p < ALPHA and np.sign(self.difference) == sign


def speeds(arm) -> tuple[np.ndarray, np.ndarray]:
  """Each run's training speed: episodes to 95% of its final validation accuracy, and the curve's mean."""
  measured = [stats.training_speed(*run.series("val_accuracy")) for run in arm]
  return np.array([m[0] for m in measured], np.float64), np.array([m[1] for m in measured])


def test_accuracy(arm) -> np.ndarray:
  return np.array([run.results["test_accuracy"] for run in arm])


def seed_geometric_means(arm, measure: str) -> np.ndarray:
  return np.array([stats.geometric_mean(run.values(measure)) for run in arm])


def seed_proportions(arm, measure: str) -> np.ndarray:
  """Each run's proportion of checkpoints where ``measure`` was properly learned (e.g. div-alpha > 1)."""
  return np.array([stats.proportion_properly_learned(run.values(measure), measure) for run in arm], np.float64)


def _pooled(s_arm, dr_arm, measure: str) -> stats.Comparison:
  pool = lambda arm: np.concatenate([run.values(measure) for run in arm])  # noqa: E731
  return stats.compare_runs(pool(s_arm), pool(dr_arm), measure)


def compare(setting: str, s: np.ndarray, dr: np.ndarray, pooled_p: float | None = None) -> Test:
  fs, fdr = s[np.isfinite(s)], dr[np.isfinite(dr)]
  tied = np.unique(np.concatenate([fs, fdr])).size < fs.size + fdr.size
  method = "exact" if stats.mann_whitney_method(fs.size, fdr.size, tied) == "exact" else "normal approx."
  return Test(setting, s, dr, stats.mann_whitney(fs, fdr, method="auto")[0], method, pooled_p)


def _p(t: Test) -> str:
  return f"{format_p(t.p)} ({t.method})" if t.p is not None else format_p(t.p)


def _mean(values: np.ndarray, measure: str) -> str:
  mean = float(np.nanmean(values)) if np.isfinite(values).any() else None
  return "—" if mean is None else f"{mean:.2f}" if measure == "mean_val_accuracy" else format_value(mean)


def cell_tests(s_arm, dr_arm, setting: str) -> dict[str, Test]:
  """Every comparison of one cell: accuracy, training speed, and the diagnostics the claims are about."""
  (s_episodes, s_mean), (dr_episodes, dr_mean) = speeds(s_arm), speeds(dr_arm)
  norm, div, con = (_pooled(s_arm, dr_arm, m) for m in ("norm_ratio", "div_alpha", "con_alpha"))
  return {
      "accuracy": compare(setting, test_accuracy(s_arm), test_accuracy(dr_arm)),
      "episodes_to_95": compare(setting, s_episodes, dr_episodes),
      "mean_val_accuracy": compare(setting, s_mean, dr_mean),
      "norm_ratio": compare(setting, seed_geometric_means(s_arm, "norm_ratio"),
                            seed_geometric_means(dr_arm, "norm_ratio"), norm.mannwhitney_p),
      "div_alpha": compare(setting, seed_proportions(s_arm, "div_alpha"), seed_proportions(dr_arm, "div_alpha"),
                           div.fisher_p),
      "con_alpha": compare(setting, seed_proportions(s_arm, "con_alpha"), seed_proportions(dr_arm, "con_alpha"),
                           con.fisher_p),
  }


# (claim, the paper's words, the measure, the direction DR - S takes if it holds, the cells it covers)
CLAIMS = (
    ("1. DR trains faster (Conv4)", "using the DR formulation helps to train faster than using the softmax-based "
     "prototypical networks (Sec. 3.2, Figs. 2-3)", "mean_val_accuracy", +1, ("1-shot ProtoNet", "5-shot ProtoNet")),
    ("2. smaller norm ratio under softmax (Conv4)", "norm ratios were significantly smaller when we used the "
     "softmax-based formulation (Sec. 3.2, Tables 3-10)", "norm_ratio", +1, ("1-shot ProtoNet", "5-shot ProtoNet")),
    ("3. div-alpha > 1 more often under DR", "for all the experiments, the properly diverged cases were "
     "significantly more frequent when we used the DR formulation (Sec. 3.2)", "div_alpha", +1,
     ("1-shot ProtoNet", "5-shot ProtoNet")),
    ("4. con-alpha < 1 more often under DR in 1-shot", "for 1-shot learning tasks, the properly converged cases "
     "were significantly more frequent when we used DR formulation (Sec. 3.2)", "con_alpha", +1,
     ("1-shot ProtoNet",)),
    ("App. D: with 1-NN heads in 5-shot, DR trains faster", "we conduct 5-shot learning experiments with nearest "
     "neighbor-based models instead of using an average point to represent a class (Sec. 4, App. D)",
     "mean_val_accuracy", +1, ("5-shot 1-NN",)),
)
MEASURE_WORDS = {"mean_val_accuracy": "mean validation accuracy over the curve", "norm_ratio": "per-seed geometric "
                 "mean of the norm ratio", "div_alpha": "per-seed proportion of div-alpha > 1", "con_alpha":
                 "per-seed proportion of con-alpha < 1"}


def verdict(tests: list[Test], sign: int) -> str:
  supported = [t.supports(sign) for t in tests]
  return "holds" if all(supported) else "does not hold" if not any(supported) else "mixed"


def claim_table(tests: dict[str, dict[str, Test]]) -> Table:
  """One row per claim: its words, what was measured in each setting it covers, the test and p, the verdict."""
  rows = []
  for claim, words, measure, sign, settings in CLAIMS:
    covered = [tests[s][measure] for s in settings if s in tests]
    if not covered:
      continue
    measured = "; ".join(f"{t.setting}: S {_mean(t.s, measure)}, DR {_mean(t.dr, measure)}" for t in covered)
    ps = "; ".join(f"{t.setting}: p = {_p(t)}" + ("" if t.pooled_p is None else
                                                  f"; pooled checkpoints {format_p(t.pooled_p)}") for t in covered)
    rows.append(tuple(Cell(x) for x in (claim, f"“{words}”", f"{MEASURE_WORDS[measure]} — {measured}",
                                        f"Mann-Whitney U across seeds — {ps}", verdict(covered, sign))))
  return Table("The claims", ("claim", "the paper's words", "measured here (means over seeds)", "test and p",
                              "verdict"), tuple(rows))


def _interval(values: np.ndarray, digits: int = 2) -> str:
  mean, half = stats.t_interval(values)
  return f"{mean:.{digits}f} ± {half:.{digits}f}" if half is not None else f"{mean:.{digits}f}"


def accuracy_table(arms: dict, tests: dict[str, dict[str, Test]]) -> Table:
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
                  (Cell(_p(t) if head == "DR" else "", head == "DR" and t.p is not None and t.p < ALPHA),))
  return Table("Test accuracy (%): 600 test episodes per run, seeds 0 to n - 1",
               ("setting", "model", "seeds", "per seed", "mean ± 95% t-interval", "DR − S ± 95% Welch",
                "Mann-Whitney p"), tuple(rows))


def speed_table(tests: dict[str, dict[str, Test]]) -> Table:
  """Claim 1's measures per cell: episodes to 95% of the final validation accuracy, and the curve's mean."""
  rows = []
  for setting, cell in tests.items():
    e, m = cell["episodes_to_95"], cell["mean_val_accuracy"]
    rows.append((Cell(setting), Cell(_interval(e.s, 0)), Cell(_interval(e.dr, 0)), Cell(_p(e), e.supports(-1)),
                 Cell(_interval(m.s)), Cell(_interval(m.dr)), Cell(_p(m), m.supports(+1))))
  return Table("Training speed, from each run's validation curve (mean ± 95% t-interval over seeds)",
               ("setting", "episodes to 95% S", "episodes to 95% DR", "p", "mean val. accuracy S (%)",
                "mean val. accuracy DR (%)", "p"), tuple(rows))


def diagnostics_table(tests: dict[str, dict[str, Test]]) -> Table:
  """Claims 2-4's measures per cell, per seed, with the paper's pooled tests beside."""
  rows = []
  for setting, cell in tests.items():
    for measure in ("norm_ratio", "div_alpha", "con_alpha"):
      t = cell[measure]
      shown = format_value if measure == "norm_ratio" else format_proportion
      listed = lambda v: ", ".join(shown(stats.finite_or_none(x)) for x in v)  # noqa: E731
      rows.append((Cell(setting), Cell(MEASURE_WORDS[measure]), Cell(listed(t.s)), Cell(listed(t.dr)),
                   Cell(_p(t), t.p is not None and t.p < ALPHA),
                   Cell(format_p(t.pooled_p), t.pooled_p is not None and t.pooled_p < ALPHA)))
  return Table("Diagnostics per seed (S, DR) and the tests", ("setting", "measure", "S per seed", "DR per seed",
               "Mann-Whitney p across seeds", "paper's test on pooled checkpoints (Mann-Whitney for the norm ratio, "
               "Fisher for proportions)"), tuple(rows))
