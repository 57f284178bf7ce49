"""The results page's claims recomputed from its kept records with numpy and scipy alone, none of the page's code:
each run's measure as ``docs/results/preregistration.md`` defines it, the per-seed differences DR − S, their mean ±
95% t-interval, the exact two-sided sign-flip p, Holm within a claim, the unpaired exact Mann-Whitney p and the
verdict the page's rule gives. Seeds 0-9 (the first look) always; the preregistered seeds 10-19 once all 40 runs are
kept, with the declared secondary measures and the authors' code's centring beside them.
"""

import itertools
import json
import pathlib
import re
import shutil

import numpy as np
import pytest
import scipy.stats

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
RECORDS = DOCS / "results" / "omniglot"
# claim: (the run's measure, the shots it covers); every claim expects DR − S > 0 (preregistration.md).
CLAIMS = {0: ("test", (1, 5)), 1: ("val_mean", (1, 5)), 2: ("norm_ratio", (1, 5)), 3: ("div_alpha", (1, 5)),
          4: ("con_alpha", (1,))}


def _measures(run: pathlib.Path, suffix: str = "") -> dict[str, float]:
  rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
  assert [r["episode"] for r in rows] == list(range(100, 4001, 100))
  column = lambda name: np.array([r[name + suffix] for r in rows], np.float64)  # noqa: E731
  return {"test": json.loads((run / "results.json").read_text())["test_accuracy"],
          "val_mean": float(np.mean([r["val_accuracy"] for r in rows])),
          "norm_ratio": float(np.exp(np.mean(np.log(column("norm_ratio"))))),
          "div_alpha": float(np.mean(column("div_alpha") > 1)), "con_alpha": float(np.mean(column("con_alpha") < 1)),
          "div_alpha_gm": float(np.exp(np.mean(np.log(column("div_alpha"))))),
          "con_alpha_gm": float(np.exp(np.mean(np.log(column("con_alpha")))))}


def _arms(records: pathlib.Path, seeds, suffix: str = "") -> dict[tuple[int, str], dict[int, dict]]:
  """``{(shot, head): {seed: measures}}`` of the ProtoNet runs of ``seeds``."""
  arms: dict = {}
  for path in sorted(records.glob("*/config.json")):
    config = json.loads(path.read_text())
    if config["classifier"] == "proto" and config["seed"] in seeds:
      arms.setdefault((config["shot"], config["head"]), {})[config["seed"]] = _measures(path.parent, suffix)
  return arms


def _sign_flip_p(d: np.ndarray) -> float:
  sums = np.array([np.dot(signs, d) for signs in itertools.product((1.0, -1.0), repeat=len(d))])
  return float(np.mean(np.abs(sums) >= abs(d.sum()) * (1 - 1e-12)))


def _holm(ps: list[float]) -> list[float]:
  order, adjusted, running = np.argsort(ps), [0.0] * len(ps), 0.0
  for rank, i in enumerate(order):
    running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
    adjusted[i] = running
  return adjusted


def _verdict(means: list[float], adjusted: list[float]) -> str:
  significant = [p < 0.05 for p in adjusted]
  if any(s and m < 0 for s, m in zip(significant, means)):
    return "contradicted"
  agree = [s and m > 0 for s, m in zip(significant, means)]
  return "supported" if all(agree) else "partly supported" if any(agree) else "not detected"


def _paired(arms, shot: int, measure: str) -> tuple[np.ndarray, str]:
  s, dr = arms[(shot, "softmax")], arms[(shot, "dr")]
  assert sorted(s) == sorted(dr)
  d = np.array([dr[seed][measure] - s[seed][measure] for seed in sorted(s)])
  half = scipy.stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
  return d, f"{shot}-shot ProtoNet: {d.mean():+.3g} ± {half:.3g}, p = {_p(_sign_flip_p(d))}"


def _p(p: float) -> str:
  return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def _rows(text: str) -> dict[str, dict[str, str]]:
  """The first markdown table in ``text``: ``{first cell: {header: cell}}``."""
  lines = list(itertools.takewhile(lambda line: line.startswith("|"),
                                   itertools.dropwhile(lambda line: not line.startswith("|"), text.splitlines())))
  header = [c.strip() for c in lines[0].strip("|").split(" | ")]
  return {cells[0]: dict(zip(header, cells)) for cells in
          ([c.strip() for c in line.strip("|").split(" | ")] for line in lines[2:])}


def _check_claims(table: dict[str, dict[str, str]], arms) -> int:
  """Every claim's row; the number of unpaired tests checked (those without ties, where scipy's exact p applies)."""
  checked = 0
  for claim, (measure, shots) in CLAIMS.items():
    row = next(cells for name, cells in table.items() if name.startswith(f"{claim}. "))
    tests = [_paired(arms, shot, measure) for shot in shots]
    assert row["paired: DR − S per seed, mean ± 95% t, exact sign-flip p"] == "; ".join(t[1] for t in tests)
    adjusted = _holm([_sign_flip_p(d) for d, _ in tests])
    assert row["paired p, Holm-corrected within the claim"] == "; ".join(
        f"{shot}-shot ProtoNet: {_p(p)}" for shot, p in zip(shots, adjusted))
    assert row["verdict"].startswith(_verdict([d.mean() for d, _ in tests], adjusted))
    for shot in shots:
      s, dr = ([v[measure] for _, v in sorted(arms[(shot, head)].items())] for head in ("softmax", "dr"))
      if len(set(s + dr)) == len(s + dr):  # no ties: scipy's exact distribution is the page's
        p = scipy.stats.mannwhitneyu(dr, s, method="exact").pvalue
        assert f"{shot}-shot ProtoNet: {_p(p)} (exact)" in row["unpaired Mann-Whitney p"]
        checked += 1
  return checked


def _check_block(records: pathlib.Path, page: str) -> None:
  """The confirmatory block's claims, declared secondary measures and the authors' code's centring."""
  arms = _arms(records, range(10, 20))
  confirmatory = page.split("## Confirmatory")[1].split("### Exploratory")[0]
  assert _check_claims(_rows(confirmatory), arms) == 6  # claims 0-2: continuous measures
  secondary = confirmatory.split("### Declared secondary")[1]
  for measure in ("div_alpha_gm", "con_alpha_gm"):
    for shot in (1, 5):
      assert _paired(arms, shot, measure)[1] in secondary
  code = _rows(confirmatory.split("### Claims 2-4 under each centring")[1])
  features = _arms(records, range(10, 20), suffix="_features")
  for claim in (2, 3, 4):
    measure, shots = CLAIMS[claim]
    tests = [_paired(features, shot, measure) for shot in shots]
    said = next(c for name, c in code.items() if name.startswith(f"{claim}. "))["the authors' code's centring (features)"]
    adjusted = _holm([_sign_flip_p(d) for d, _ in tests])
    assert said.startswith("; ".join(t[1] for t in tests))
    assert re.search(rf"— {_verdict([d.mean() for d, _ in tests], adjusted)}( \(|$)", said), said


def test_the_first_look_s_claims_recompute_from_the_kept_records():
  first_look = (DOCS / "results.md").read_text().split("## Seeds 0-9: the first look")[1]
  assert _check_claims(_rows(first_look), _arms(RECORDS, range(10))) == 6  # claims 0-2: continuous measures


def test_the_kept_preregistered_block_recomputes_from_its_records():
  arms = _arms(RECORDS, range(10, 20))
  if sorted(len(runs) for runs in arms.values()) != [10] * 4:
    pytest.skip(f"{sum(map(len, arms.values()))} of the preregistered block's 40 runs are kept")
  _check_block(RECORDS, (DOCS / "results.md").read_text())


@pytest.mark.slow  # the page built anew (7 s); the kept page's checks above stay in the default tier
def test_a_complete_block_s_page_recomputes(tmp_path):
  """Until the block is kept whole: seeds 0-9's records trained again as seeds 10-19 (the authors' centring made
  up as the paper's times a per-checkpoint factor), kept as the block's runs are, and the page built from them.
  """
  from projects.dr_ratio import dr_prereg, dr_results  # noqa: PLC0415

  shutil.copytree(DOCS / "results", tmp_path / "results")
  shutil.copytree(DOCS / "reproductions", tmp_path / "reproductions")
  records = tmp_path / "results" / "omniglot"
  for run in records.glob("*_seed1[0-9]"):
    shutil.rmtree(run)
  (records / dr_prereg.MADE).unlink()
  rng = np.random.default_rng(0)
  for path in sorted(records.glob("*ProtoNet*_seed[0-9]/config.json")):
    config = json.loads(path.read_text())
    config["seed"] += 10
    run = tmp_path / "runs" / re.sub(r"seed\d+$", f"seed{config['seed']}", path.parent.name)
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(config))
    shutil.copyfile(path.parent / "results.json", run / "results.json")
    rows = [json.loads(line) for line in (path.parent / "metrics.jsonl").read_text().splitlines()]
    for row in rows:
      for name in ("alpha", "norm_ratio", "con_alpha", "div_alpha"):
        row[name + "_features"] = row[name] * (1 + 0.01 * rng.standard_normal())
    (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
  assert len(dr_prereg.keep(tmp_path / "runs", records)) == 40
  page = dr_results.main(["--out", str(tmp_path), "--runs", str(tmp_path / "runs")])
  _check_block(records, page)
