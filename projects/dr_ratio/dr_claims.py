"""The distance-ratio paper's claims (Kim, Parviainen & Malde, arXiv 2201.08676), tested with seeds as replicates.

An *arm* is the runs of one configuration under several seeds; a *cell* is a (shot, classifier) pair of arms, S
(softmax) and DR. The grid is paired by construction (an S run and a DR run of one seed share the initialisation
and every episode), so the primary test is paired: the per-seed differences DR − S, their mean ± 95% t-interval and
the exact sign-flip p (:mod:`fewshot.analysis.paired`); the unpaired two-sided Mann-Whitney U on one value per seed
stands beside it, and the paper's own per-checkpoint tests (checkpoints pooled over the seeds) beside that. Within a
claim the paired p-values are Holm-corrected; the verdict (:func:`fewshot.analysis.paired.verdict`) is *supported*,
*partly supported*, *not detected* (with the smallest difference the design detects, in the measure's units) or
*contradicted*. These functions
only read the runs' records.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fewshot.analysis import curves, paired, stats
from fewshot.analysis.tables import Cell, Table, format_p, format_value

ALPHA = stats.SIGNIFICANCE_LEVEL


@dataclasses.dataclass(frozen=True)
class Test:
  """One setting's comparison of DR against S: the per-seed values, their p, and the paper's pooled p."""

  setting: str
  s: np.ndarray  # one value per seed
  dr: np.ndarray
  p: float | None  # unpaired Mann-Whitney U across seeds
  method: str  # of the per-seed test: "exact", "exact, ties" (conditional on them), or "normal approx."
  pooled_p: float | None = None
  floor: float | None = None  # a value at which a run is censored (reached at the first checkpoint: "at most")
  # The difference the paper's own test (Fisher on the pooled checkpoints) starts to call significant at these counts.
  pooled_critical: float | None = None

  @property
  def differences(self) -> np.ndarray:
    """DR − S per seed (the arms are in seed order)."""
    return paired.paired_differences(self.s, self.dr)

  @property
  def paired_p(self) -> float | None:
    """The exact sign-flip p of the per-seed differences."""
    return paired.sign_flip_p(self.differences)

  @property
  def difference(self) -> float:
    """DR's mean minus S's."""
    return float(np.nanmean(self.dr) - np.nanmean(self.s))

  def supports(self, sign: int) -> bool:
    """Significant, in the direction ``sign`` (+1: DR larger; -1: DR smaller)."""
    return self.p is not None and self.p < ALPHA and np.sign(self.difference) == sign


EARLY_EPISODES = 1000  # the early-curve measure's span (added after the first page was published)


def speeds(arm) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
  """Each run's training speed from its validation curve: episodes to 95% of its final accuracy (the mean of its
  last 5 checkpoints), the curve's mean, the mean over its first :data:`EARLY_EPISODES` episodes; and the first
  checkpoint's episode, where the first measure is censored.
  """
  series = [run.series("val_accuracy") for run in arm]
  measured = [curves.training_speed(*s) for s in series]
  early = [float(np.mean(np.asarray(a)[np.asarray(e) <= EARLY_EPISODES])) for e, a in series]
  return (np.array([m[0] for m in measured], np.float64), np.array([m[1] for m in measured]), np.array(early),
          float(min(s[0][0] for s in series)))


def test_accuracy(arm) -> np.ndarray:
  return np.array([run.results["test_accuracy"] for run in arm])


def seed_geometric_means(arm, measure: str) -> np.ndarray:
  return np.array([stats.geometric_mean(run.values(measure)) for run in arm])


def seed_proportions(arm, measure: str, field: str | None = None) -> np.ndarray:
  """Each run's proportion of checkpoints where ``measure`` was properly learned (e.g. div-alpha > 1), read from its
  ``field`` (default the measure's own; ``div_alpha_features``: the authors' code's centring).
  """
  return np.array([stats.proportion_properly_learned(run.values(field or measure), measure) for run in arm],
                  np.float64)


def pooled(s_arm, dr_arm, measure: str, field: str | None = None) -> stats.Comparison:
  """The paper's per-checkpoint comparison of the two arms, every checkpoint of an arm pooled over its seeds."""
  pool = lambda arm: np.concatenate([run.values(field or measure) for run in arm])  # noqa: E731
  return stats.compare_runs(pool(s_arm), pool(dr_arm), measure)


def compare(setting: str, s: np.ndarray, dr: np.ndarray, pooled_p: float | None = None) -> Test:
  fs, fdr = s[np.isfinite(s)], dr[np.isfinite(dr)]
  tied = np.unique(np.concatenate([fs, fdr])).size < fs.size + fdr.size
  method = {"exact": "exact", "permutation": "exact, ties"}.get(stats.mann_whitney_method(fs.size, fdr.size, tied),
                                                                "normal approx.")
  return Test(setting, s, dr, stats.mann_whitney(fs, fdr, method="auto")[0], method, pooled_p)


def p_text(t: Test) -> str:
  return f"{format_p(t.p)} ({t.method})" if t.p is not None else format_p(t.p)


def _mean(values: np.ndarray, measure: str) -> str:
  mean = float(np.nanmean(values)) if np.isfinite(values).any() else None
  return "—" if mean is None else f"{mean:.2f}" if measure in ("accuracy", "mean_val_accuracy") else format_value(mean)


def cell_tests(s_arm, dr_arm, setting: str) -> dict[str, Test]:
  """Every comparison of one cell: accuracy, training speed, and the diagnostics the claims are about."""
  (s_episodes, s_mean, s_early, first), (dr_episodes, dr_mean, dr_early, _) = speeds(s_arm), speeds(dr_arm)
  norm, div, con = (pooled(s_arm, dr_arm, m) for m in ("norm_ratio", "div_alpha", "con_alpha"))
  return {
      "accuracy": compare(setting, test_accuracy(s_arm), test_accuracy(dr_arm)),
      "episodes_to_95": dataclasses.replace(compare(setting, s_episodes, dr_episodes), floor=first),
      "mean_val_accuracy": compare(setting, s_mean, dr_mean),
      "early_val_accuracy": compare(setting, s_early, dr_early),
      "norm_ratio": compare(setting, seed_geometric_means(s_arm, "norm_ratio"),
                            seed_geometric_means(dr_arm, "norm_ratio"), norm.mannwhitney_p),
      "div_alpha": dataclasses.replace(compare(setting, seed_proportions(s_arm, "div_alpha"),
                                               seed_proportions(dr_arm, "div_alpha"), div.fisher_p),
                                       pooled_critical=critical(div)),
      "con_alpha": dataclasses.replace(compare(setting, seed_proportions(s_arm, "con_alpha"),
                                               seed_proportions(dr_arm, "con_alpha"), con.fisher_p),
                                       pooled_critical=critical(con)),
  }


# (claim, the paper's words, the measure, the direction DR - S takes if it holds, the cells it covers)
CLAIMS = (
    ("0. higher test accuracy with DR (Conv4)", "Except for the 5-shot classification task on the CUB dataset, which "
     "resulted in comparable accuracies […], the test accuracies were higher with the DR formulation (Sec. 3.2, "
     "Table 2)", "accuracy", +1, ("1-shot ProtoNet", "5-shot ProtoNet")),
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
)
# Measured, with no claim stated: (experiment, the paper's words, the measure, the cells)
EXPERIMENTS = (
    ("App. D: 1-NN heads in 5-shot", "we conduct 5-shot learning experiments with nearest neighbor-based models "
     "instead of using an average point to represent a class (Sec. 4, App. D)", "mean_val_accuracy", ("5-shot 1-NN",)),
)
NOT_TESTED = (
    ("ResNet18: the accuracy gaps were reduced; DR higher in 1-shot, lower in 5-shot mini-ImageNet (Table 2)",
     "the grid trains Conv4 only, on Omniglot at 28 px: ResNet18's runs on CUB and mini-ImageNet at 84 px are not "
     "part of it"),
    ("ResNet18: comparable training speed, slightly slower in 5-shot (Sec. 3.2, Figs. 3(b), 3(d))",
     "no ResNet18 runs (as above)"),
    ("ResNet18: the norm ratio under each formulation (Tables 3-10)", "no ResNet18 runs (as above)"),
)
MEASURE_WORDS = {"accuracy": "test accuracy (%)", "mean_val_accuracy": "mean validation accuracy over the curve", "norm_ratio": "per-seed geometric "
                 "mean of the norm ratio", "div_alpha": "per-seed proportion of div-alpha > 1", "con_alpha":
                 "per-seed proportion of con-alpha < 1"}


def paired_summary(t: Test, digits: int = 3) -> str:
  mean, half = paired.paired_interval(t.differences)
  shown = f"{mean:+.{digits}g}" + ("" if half is None else f" ± {half:.{digits}g}")
  return f"{t.setting}: {shown}, p = {format_p(t.paired_p)}"


def critical(compared: stats.Comparison) -> float | None:
  """Where the paper's test (Fisher on the pooled checkpoints, S's count held) starts to call DR − S > 0 significant."""
  if compared.proportion_a is None or compared.proportion_b is None:
    return None
  return stats.fisher_critical_difference(round(compared.proportion_a * compared.n_a), compared.n_a, compared.n_b, +1)


def detectable(t: Test, comparisons: int) -> float | None:
  """The smallest mean difference DR − S, in the measure's units, that the design finds with 80% power after Holm
  over ``comparisons`` settings (at its first step, level 0.05 / comparisons): the sign-flip test's detectable shift
  in SDs (:func:`fewshot.analysis.paired.detectable_shift`) times the SD of the observed per-seed differences.
  """
  d = t.differences[np.isfinite(t.differences)]
  if d.size < 2:
    return None
  return paired.detectable_shift(int(d.size), ALPHA / comparisons) * float(np.std(d, ddof=1))


def _detectable(tests: list[Test]) -> str:
  """What "not detected" could have seen, per setting: the design's detectable difference, where the paper's own
  test turns significant, and the interval the data give.
  """
  parts = []
  for t in tests:
    seen = detectable(t, len(tests))
    mean, half = paired.paired_interval(t.differences)
    design = "—" if seen is None else format(seen, ".2g") if np.isfinite(seen) else "nothing (too few pairs)"
    paper = "" if t.pooled_critical is None else (f"; the paper's test (Fisher, pooled checkpoints) significant "
                                                  f"from {t.pooled_critical:.2g}")
    data = f"{mean:+.2g}" + ("" if half is None else f" ± {half:.2g}")
    parts.append(f"{t.setting}: detects {design} with 80% power after Holm{paper}; the data {data}")
  return "; ".join(parts)


def claim_verdict(tests: list[Test], sign: int) -> tuple[list[float | None], str]:
  """The Holm-corrected paired p-values of a claim's settings, and its verdict (with the power where it is not
  detected).
  """
  adjusted = paired.holm([t.paired_p for t in tests])
  said = paired.verdict([float(np.nanmean(t.differences)) for t in tests], adjusted, sign)
  return adjusted, said if said != "not detected" else f"not detected ({_detectable(tests)})"


def page_adjusted(tests: dict[str, dict[str, Test]]) -> dict[tuple[str, str], float]:
  """Every paired p of the page, Benjamini-Hochberg-adjusted across all of them: ``{(setting, measure): p}``."""
  import scipy.stats

  keys = [(setting, measure) for setting, cell in tests.items() for measure, t in cell.items()
          if t.paired_p is not None]
  ps = [tests[s][m].paired_p for s, m in keys]
  return dict(zip(keys, map(float, scipy.stats.false_discovery_control(ps)))) if ps else {}


def _under_bh(covered: list[Test], adjusted: list, measure: str, bh: dict, said: str,
              confirmatory: bool = False) -> tuple[str, str]:
  """The claim's tests under the page's BH correction, and the verdict qualified where one significant within the
  claim (Holm) is not across the page (BH); a confirmatory verdict (the preregistered seeds) is decided as declared,
  by Holm within the claim, its BH column exploratory.
  """
  shown = "; ".join(f"{t.setting}: {format_p(bh.get((t.setting, measure)))}" for t in covered)
  failing = [t.setting for t, holm in zip(covered, adjusted)
             if holm is not None and holm < ALPHA and (bh.get((t.setting, measure)) or 1.0) >= ALPHA]
  if failing and not confirmatory and said.startswith(("supported", "partly supported", "contradicted")):
    said += (f" within the claim (Holm); {', '.join(failing)} not below {ALPHA} after the page's BH correction: "
             "fragile on these seeds alone; the preregistered seeds 10-19 decide (the confirmatory section)")
  return shown, said


def claim_table(tests: dict[str, dict[str, Test]], confirmatory: bool = False) -> Table:
  """One row per claim: its words, what was measured in each setting it covers, the paired test, the unpaired
  one, the corrected p (within the claim, and across the page) and the verdict (``confirmatory``: as the
  preregistration declared, Holm within the claim deciding).
  """
  bh = page_adjusted(tests)
  rows = []
  for claim, words, measure, sign, settings in CLAIMS:
    covered = [tests[s][measure] for s in settings if s in tests]
    if not covered:
      continue
    adjusted, said = claim_verdict(covered, sign)
    measured = "; ".join(f"{t.setting}: S {_mean(t.s, measure)}, DR {_mean(t.dr, measure)}" for t in covered)
    unpaired = "; ".join(f"{t.setting}: {p_text(t)}" + ("" if t.pooled_p is None else
                                                  f"; pooled checkpoints {format_p(t.pooled_p)}") for t in covered)
    holm = "; ".join(f"{t.setting}: {format_p(a)}" for t, a in zip(covered, adjusted))
    across, said = _under_bh(covered, adjusted, measure, bh, said, confirmatory)
    rows.append(tuple(Cell(x) for x in (claim, f"“{words}”", f"{MEASURE_WORDS[measure]} — {measured}",
                                        "; ".join(paired_summary(t) for t in covered), unpaired, holm, across, said)))
  return Table("The claims", ("claim", "the paper's words", "measured here (means over seeds)",
                              "paired: DR − S per seed, mean ± 95% t, exact sign-flip p", "unpaired Mann-Whitney p",
                              "paired p, Holm-corrected within the claim",
                              "paired p, Benjamini-Hochberg across the page's tests", "verdict"), tuple(rows))


def experiment_table(tests: dict[str, dict[str, Test]]) -> Table:
  """What the paper measured without stating a claim, measured here the same way, with no verdict."""
  rows = []
  for name, words, measure, settings in EXPERIMENTS:
    for t in (tests[s][measure] for s in settings if s in tests):
      rows.append(tuple(Cell(x) for x in (name, f"“{words}”", f"{MEASURE_WORDS[measure]}: S {_mean(t.s, measure)}, "
                                          f"DR {_mean(t.dr, measure)}", paired_summary(t), p_text(t))))
  return Table("Measured, no claim stated", ("experiment", "the paper's words", "measured here (means over seeds)",
                                             "paired: DR − S, mean ± 95% t, sign-flip p", "unpaired Mann-Whitney p"),
               tuple(rows))


def not_tested_table() -> Table:
  return Table("The paper's claims not tested here", ("claim", "why"),
               tuple((Cell(claim), Cell(why)) for claim, why in NOT_TESTED))
