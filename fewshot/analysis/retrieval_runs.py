"""Metric-learning runs (``python -m fewshot.dml.train``) as ``python -m fewshot.analyze`` shows them.

A run's test retrieval is :func:`fewshot.analysis.retrieval_arms.test_retrieval`'s: its fold models' embeddings
concatenated where it trained several, else its one model's; metrics are in percent. What is printed:

* one run: its rows (:func:`checkpoints_table`: each checkpoint's epoch, step, training loss and validation MAP@R,
  R-precision and precision@1, a fold model's each where it trained several, the checkpoint tested marked ``best``)
  and its test retrieval (:func:`test_table`: each fold model's best checkpoint alone, and with several their
  mean and their embeddings concatenated);
* several runs: their arms (runs that share every option but the seed, :func:`fewshot.analysis.arm_tables.arms_of`),
  a row each (:func:`overview_table`: each seed's test MAP@R, each metric's mean ± 95% t-interval); two arms are
  then compared as ``A... -- B...`` compares them (:func:`report_arms`);
* ``--list``: a row per run (:func:`listing_table`), the options in which the runs differ, its test retrieval, its
  fold models' best epochs and the epochs trained; then the re-tests ``python -m fewshot.evaluate`` recorded in them
  (:func:`retests_table`) and its tests on few-shot episodes (:func:`episodes_table`).

In CSV, a record per run (:func:`csv_records`), or two arms' comparison as ``A... -- B...`` writes it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fewshot.analysis import arm_tables, retrieval_arms, stats
from fewshot.analysis.tables import MISSING, RENDERERS, Cell, Table, format_mean_interval, render_csv, with_verdict
from fewshot.errors import ConfigError
from fewshot.options import LOCATION_FIELDS
from fewshot.records.reading import Run

METRICS = retrieval_arms.METRICS
CONCATENATED = "the fold models concatenated where a run has several"


def _percent(value) -> str:
  return MISSING if value is None else f"{100.0 * float(value):.2f}"


def _best_epochs(run: Run) -> dict[int, int]:
  """Each fold model's best (tested) checkpoint's epoch, by results.json (none before the run is tested)."""
  return {entry.get("fold", 0): entry.get("best_epoch") for entry in (run.results or {}).get("separated") or ()}


def _epochs_trained(run: Run) -> str:
  """The epochs each fold model has trained (its last row's): one number where they agree."""
  last: dict[int, int] = {}
  for row in run.rows:
    last[row.get("fold", 0)] = max(last.get(row.get("fold", 0), 0), int(row["epoch"]))
  return ", ".join(str(e) for e in dict.fromkeys(last[k] for k in sorted(last)))


def checkpoints_table(run: Run) -> Table:
  """A row per checkpoint of each fold model: epoch, step, training loss, validation retrieval (%), the best one."""
  several = any("fold" in row for row in run.rows)
  best = _best_epochs(run)
  headers = (*("fold",) * several, "epoch", "step", "training loss", *(f"val {label} (%)" for _, label in METRICS),
             "tested")
  rows = []
  for row in run.rows:
    fold = row.get("fold", 0)
    loss = MISSING if row.get("loss") is None else f"{row['loss']:.4f}"
    cells = (*(str(fold),) * several, str(int(row["epoch"])), str(row.get("step", MISSING)), loss,
             *(_percent(row.get(f"val_{metric}")) for metric, _ in METRICS), "best" * (best.get(fold) == row["epoch"]))
    rows.append(tuple(Cell(text) for text in cells))
  return Table(f"{run.path} ({run.config.model_name}): validation retrieval at each checkpoint", headers, tuple(rows))


def test_table(run: Run) -> Table:
  """Test retrieval (%) of each fold model's best checkpoint, and with several their mean and their concatenation."""
  results = run.results or {}
  separated = results.get("separated") or []
  if not separated:
    return Table("Test retrieval", ("test retrieval",), ((Cell(
        f"not tested yet (no results.json): the run is training or was stopped; python -m fewshot.dml.train "
        f"--workdir {run.path} --resume finishes it"),),))
  several = len(separated) > 1
  models = [(f"fold {e.get('fold')}" if several else "model", e.get("dim"), e.get("best_epoch"), e.get("test") or {})
            for e in separated]
  if several:
    models += [("separated mean", separated[0].get("dim"), None, results.get("separated_mean") or {}),
               ("concatenated", (results.get("concatenated") or {}).get("dim"), None,
                (results.get("concatenated") or {}).get("test") or {})]
  rows = tuple(tuple(Cell(text) for text in (name, MISSING if dim is None else str(dim),
                                             MISSING if epoch is None else str(epoch),
                                             *(_percent(test.get(metric)) for metric, _ in METRICS)))
               for name, dim, epoch, test in models)
  classes = results.get("test_classes")
  return Table(f"Test retrieval (%) of the best checkpoints{f', {classes} test classes' if classes else ''}",
               ("model", "dimensions", "best epoch", *(label for _, label in METRICS)), rows)


def _tested(run: Run) -> list[float | None]:
  """The run's test retrieval, a value per metric (percent; None where untested)."""
  values = [retrieval_arms.test_retrieval(run, metric) for metric, _ in METRICS]
  return [None if np.isnan(v) else v for v in values]


def overview_table(arms: list[list[Run]]) -> Table:
  """A row per arm: its label, seeds, each seed's test MAP@R, each metric's mean ± 95% t-interval, its runs."""
  differing = arm_tables.varying([arm[0].config for arm in arms])
  headers = ("arm", "configuration", "seeds", "test MAP@R per seed (%)",
             *(f"{label} mean ± 95% t-interval (%)" for _, label in METRICS), "runs")
  rows = []
  for name, arm in zip(arm_tables.arm_names(len(arms)), arms):
    tested = [_tested(run) for run in arm]
    per_seed = arm_tables.per_seed(arm, [t[0] for t in tested])
    cells = (name, arm_tables.arm_label(arm, differing), str(len(arm)), per_seed,
             *(format_mean_interval([t[k] for t in tested]) for k in range(len(METRICS))), arm_tables.directories(arm))
    rows.append(tuple(Cell(text) for text in cells))
  arms_ = "Test retrieval" if len(arms) == 1 else f"{len(arms)} arms: test retrieval"
  return Table(f"{arms_} across seeds ({CONCATENATED})", headers, tuple(rows))


def listing_table(runs: list[Run]) -> Table:
  """A row per run: the options in which the runs differ, its test retrieval, best epochs and epochs trained."""
  differing = arm_tables.varying([run.config for run in runs], keep=LOCATION_FIELDS)
  headers = ("run", *differing, *(f"test {label} (%)" for _, label in METRICS), "best epoch", "epochs trained")
  rows = []
  for run in runs:
    best = ", ".join(str(e) for e in _best_epochs(run).values()) or MISSING
    cells = (run.path, *(str(getattr(run.config, n)) for n in differing),
             *(MISSING if v is None else f"{v:.2f}" for v in _tested(run)), best, _epochs_trained(run))
    rows.append(tuple(Cell(text) for text in cells))
  shared = "" if differing else " (they share every option)"
  return Table(f"{len(runs)} metric-learning runs: the options in which they differ{shared}, and their test "
               f"retrieval ({CONCATENATED})", headers, tuple(rows))


def _retests(runs: list[Run]) -> list[tuple[Run, str, dict]]:
  """``python -m fewshot.evaluate``'s re-tests recorded in the runs (``test_<checkpoint>_retrieval.json``)."""
  return [(run, name, record) for run in runs for name, record in run.measurements if name.endswith("_retrieval.json")]


def retests_table(runs: list[Run]) -> Table | None:
  """A row per re-test recorded in the runs: its checkpoint, the steps of its fold models' checkpoints and its test
  retrieval; None where there are none.
  """
  rows = []
  for run, name, record in _retests(runs):
    steps = ", ".join(str(s) for s in record.get("checkpoint_steps", ())) or MISSING
    tested = _tested(dataclasses.replace(run, results=record))
    rows.append(tuple(Cell(text) for text in (run.path, name, str(record.get("checkpoint", MISSING)), steps,
                                               *(MISSING if v is None else f"{v:.2f}" for v in tested))))
  if not rows:
    return None
  return Table(f"Re-tests python -m fewshot.evaluate recorded in the runs ({CONCATENATED})",
               ("run", "measurement", "checkpoint", "steps", *(f"test {label} (%)" for _, label in METRICS)),
               tuple(rows))


def retest_records(runs: list[Run]) -> list[dict]:
  """A CSV record per re-test recorded in the runs: its directory, its file (``measurement``) and test retrieval."""
  return [{"directory": run.path, "measurement": name, **{f"test_{metric}": v for (metric, _), v in zip(
      METRICS, _tested(dataclasses.replace(run, results=record)))}} for run, name, record in _retests(runs)]


def _episode_tests(runs: list[Run]) -> list[tuple[Run, str, dict]]:
  """``python -m fewshot.evaluate``'s tests on few-shot episodes recorded in the runs (``test_<checkpoint>_episodes_
  ...json``), each with the test of the fold models concatenated where the run has several, else of its one model.
  """
  return [(run, name, record) for run in runs for name, record in run.measurements if "_episodes_" in name]


def _episode_test(record: dict) -> dict:
  return (record.get("concatenated") or record["separated"][0])["test"]


def episodes_table(runs: list[Run]) -> Table | None:
  """A row per test on few-shot episodes recorded in the runs: its checkpoint, its episodes and its accuracy; None
  where there are none.
  """
  rows = []
  for run, name, record in _episode_tests(runs):
    o, test = record.get("options", {}), _episode_test(record)
    shape = f"{o.get('way', '?')}-way {o.get('shot', '?')}-shot {o.get('query', '?')}-query, seed {o.get('seed', '?')}"
    rows.append(tuple(Cell(text) for text in (
        run.path, name, str(record.get("checkpoint", MISSING)), shape, str(test.get("test_episodes", MISSING)),
        f"{test['test_accuracy']:.2f} ± {test['test_ci95']:.2f}")))
  if not rows:
    return None
  return Table(f"Few-shot episodes python -m fewshot.evaluate tested the runs on (nearest mean support embedding; "
               f"{CONCATENATED})", ("run", "measurement", "checkpoint", "tested", "episodes", "test accuracy (%)"),
               tuple(rows))


def episode_records(runs: list[Run]) -> list[dict]:
  """A CSV record per test on few-shot episodes recorded in the runs: its directory, its file and its accuracy."""
  records = []
  for run, name, record in _episode_tests(runs):
    o, test = record.get("options", {}), _episode_test(record)
    records.append({"directory": run.path, "measurement": name, "test_accuracy": test["test_accuracy"],
                    "test_ci95": test["test_ci95"], "test_episodes": test.get("test_episodes"),
                    "test_way": o.get("way"), "shot": o.get("shot"), "test_query": o.get("query"),
                    "test_seed": o.get("seed")})
  return records


def csv_fields(runs: list[Run], arms: bool = True) -> tuple[str, ...]:
  """The fields of :func:`csv_records`: the options in which the runs differ, and with ``arms`` each run's arm, its
  seed and its arm's MAP@R across seeds.
  """
  tested = tuple(f"test_{metric}" for metric, _ in METRICS)
  if not arms:
    differing = arm_tables.varying([run.config for run in runs], keep=LOCATION_FIELDS)
    return ("directory", "measurement", *differing, *tested, "best_epoch", "epochs_trained")
  return ("arm", "configuration", *arm_tables.varying([run.config for run in runs]), "seed", "directory", *tested,
          "best_epoch", "epochs_trained", "arm_seeds", "arm_mean_test_map_at_r", "arm_t95_half_width")


def csv_records(arms: list[list[Run]], fields: tuple[str, ...]) -> list[dict]:
  """A record per run of the arms, the values in percent at full precision, with its arm's mean test MAP@R and
  t half-width beside it where ``fields`` has them; None is empty.
  """
  differing = arm_tables.varying([arm[0].config for arm in arms]) if arms else []
  records = []
  for name, arm in zip(arm_tables.arm_names(len(arms)), arms):
    finite = [t[0] for t in map(_tested, arm) if t[0] is not None]
    mean, half = stats.t_interval(finite) if finite else (None, None)
    for run in arm:
      record = {"arm": name, "configuration": arm_tables.arm_label(arm, differing), "directory": run.path,
                "measurement": "results.json",
                **{f: getattr(run.config, f) for f in fields if hasattr(run.config, f)},
                **{f"test_{metric}": v for (metric, _), v in zip(METRICS, _tested(run))},
                "best_epoch": "; ".join(str(e) for e in _best_epochs(run).values()),
                "epochs_trained": _epochs_trained(run).replace(", ", "; "), "arm_seeds": len(arm),
                "arm_mean_test_map_at_r": mean, "arm_t95_half_width": half}
      records.append({f: "" if record.get(f) is None else record[f] for f in fields})
  return records


def tables(runs: list[Run]) -> list[Table]:
  """Metric-learning runs' part of ``analyze --list``: a row per run, then the re-tests and the tests on few-shot
  episodes recorded in them.
  """
  return [table for table in (listing_table(runs), retests_table(runs), episodes_table(runs)) if table]


def csv_listing(runs: list[Run]) -> tuple[tuple[str, ...], list[dict]]:
  """Metric-learning runs' part of ``analyze --list --format csv``: its fields and records (a run's, then its
  re-tests').
  """
  fields = csv_fields(runs, arms=False)
  episodes = episode_records(runs)
  if episodes:  # their fields only where there are some, so a listing without them keeps its columns
    fields += tuple(field for field in episodes[0] if field not in fields)
  records = csv_records([[run] for run in runs], fields) + retest_records(runs) + episodes
  return fields, [{field: "" if record.get(field) is None else record[field] for field in fields} for record in records]


def report_arms(a: list[Run], b: list[Run], fmt: str) -> str:
  """Two arms compared by their test retrieval, as ``A... -- B...`` prints them: the verdict on MAP@R, then the
  metrics' table (in CSV, that table's rows).
  """
  retrieval_arms.check_arms(a, b)
  table = retrieval_arms.retrieval_table(a, b)
  if fmt == "csv":
    return render_csv([dict(zip(table.headers, (c.text for c in row))) for row in table.rows], table.headers)
  return with_verdict(retrieval_arms.verdict_line(a, b), RENDERERS[fmt]([table]), fmt)


def report(runs: list[Run], fmt: str) -> tuple[str, str | None]:
  """What ``python -m fewshot.analyze`` prints of metric-learning runs (this module's docstring), and a warning
  (two arms that cannot be compared) or None.
  """
  arms = arm_tables.arms_of(runs)
  warning = None
  if len(arms) == 2:
    try:
      retrieval_arms.check_arms(*arms)
      if fmt == "csv":
        return report_arms(*arms, fmt), None
      overview = RENDERERS[fmt]([overview_table(arms), retrieval_arms.retrieval_table(*arms)])
      return with_verdict(retrieval_arms.verdict_line(*arms), overview, fmt), None
    except ConfigError as e:  # two arms of different protocols: each is shown, not compared
      warning = f"warning: the two arms are not compared ({e})"
  if fmt == "csv":
    fields = csv_fields(runs)
    return render_csv(csv_records(arms, fields), fields), warning
  if len(runs) == 1:
    return RENDERERS[fmt]([checkpoints_table(runs[0]), test_table(runs[0])]), None
  return RENDERERS[fmt]([overview_table(arms)]), warning
