"""A listing of runs: a row per run, the options in which the runs differ, and each run's results.

``python -m fewshot.analyze --list runs/`` (or run directories named one by one): the options shown are only those
whose values vary among the listed runs (the seed among them; where the data lives never), then the run's test
accuracy ± its 95% interval over test episodes, its best checkpoint's episode and the episodes it has trained (its
last metrics row): a run still training, or stopped, has no test accuracy yet. The measurements ``python -m
fewshot.evaluate`` recorded in the runs (``test_*.json``: another checkpoint, episode shape, count or seed) follow
in a table of their own (in CSV, a record each after its run's, named in ``measurement``).
"""

from __future__ import annotations

from fewshot.analysis.arm_tables import accuracy_of, varying
from fewshot.analysis.tables import MISSING, Cell, Table
from fewshot.options import LOCATION_FIELDS
from fewshot.records.reading import Run

# A run's results (not --test_episodes: an option, a column of its own where it varies).
RESULT_FIELDS = ("test_accuracy", "test_ci95", "best_episode", "episodes_trained")


def _differing(runs: list[Run]) -> list[str]:
  return varying([run.config for run in runs], keep=LOCATION_FIELDS)


def _results(run: Run) -> dict:
  results = run.results or {}
  tested = accuracy_of(run) is not None  # a run's other results mean nothing without its accuracy
  return {"test_accuracy": accuracy_of(run), "test_ci95": results.get("test_ci95") if tested else None,
          "best_episode": results.get("best_episode") if tested else None,
          "episodes_trained": run.rows[-1]["episode"]}


def listing_table(runs: list[Run]) -> Table:
  differing = _differing(runs)
  headers = ("run", *differing, "test accuracy (%)", "best episode", "episodes trained")
  rows = []
  for run in runs:
    r = _results(run)
    test = MISSING if r["test_accuracy"] is None else f"{r['test_accuracy']:.2f}" + (
        "" if r["test_ci95"] is None else f" ± {r['test_ci95']:.2f}")
    option = lambda n: MISSING if getattr(run.config, n) is None else str(getattr(run.config, n))  # noqa: E731
    cells = (run.path, *(option(n) for n in differing), test,
             MISSING if r["best_episode"] is None else str(r["best_episode"]), str(r["episodes_trained"]))
    rows.append(tuple(Cell(text) for text in cells))
  shared = "" if differing else " (they share every option)"
  return Table(f"{len(runs)} runs: the options in which they differ, and their results{shared}", headers, tuple(rows))


def _shape(options: dict) -> str:
  return (f"{options.get('checkpoint', '?')} checkpoint, {options.get('test_way', '?')}-way "
          f"{options.get('shot', '?')}-shot {options.get('test_query', '?')}-query, seed {options.get('seed', '?')}")


def measurements_table(runs: list[Run]) -> Table | None:
  """``python -m fewshot.evaluate``'s measurements recorded in the runs, a row each; None where there are none."""
  rows = []
  for run in runs:
    for name, record in run.measurements:
      ci = record.get("test_ci95")
      rows.append(tuple(Cell(text) for text in (
          run.path, name, _shape(record.get("options", {})), str(record.get("test_episodes", MISSING)),
          f"{record['test_accuracy']:.2f}" + ("" if ci is None else f" ± {ci:.2f}"))))
  if not rows:
    return None
  headers = ("run", "measurement", "tested", "episodes", "test accuracy (%)")
  return Table("Measurements python -m fewshot.evaluate recorded in the runs", headers, tuple(rows))


def csv_fields(runs: list[Run]) -> tuple[str, ...]:
  return ("directory", "measurement", *_differing(runs), *RESULT_FIELDS, "test_episodes", "test_way", "shot",
          "test_query", "test_seed")


def csv_records(runs: list[Run]) -> list[dict]:
  """A record per run (``measurement`` results.json): its directory, the options that vary among the runs, its
  results; then a record per measurement ``python -m fewshot.evaluate`` recorded in it. None is empty.
  """
  differing = _differing(runs)
  records = []
  for run in runs:
    options = {n: getattr(run.config, n) for n in differing}
    records.append({"directory": run.path, "measurement": "results.json", **options, **_results(run)})
    for name, record in run.measurements:
      used = record.get("options", {})
      records.append({"directory": run.path, "measurement": name, **options, "test_accuracy": record["test_accuracy"],
                      "test_ci95": record.get("test_ci95"), "test_episodes": record.get("test_episodes"),
                      "test_way": used.get("test_way"), "shot": used.get("shot"), "test_query": used.get("test_query"),
                      "test_seed": used.get("seed")})
  return [{key: "" if value is None else value for key, value in record.items()} for record in records]


def tables(runs: list[Run]) -> list[Table]:
  """Few-shot runs' part of ``analyze --list``: a row per run, then the measurements recorded in them."""
  measured = measurements_table(runs)
  return [listing_table(runs)] + ([measured] if measured else [])


def csv_listing(runs: list[Run]) -> tuple[tuple[str, ...], list[dict]]:
  """Few-shot runs' part of ``analyze --list --format csv``: its fields and records."""
  return csv_fields(runs), csv_records(runs)
