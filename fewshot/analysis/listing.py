"""A listing of runs: a row per run, the options in which the runs differ, and each run's results.

``python -m fewshot.analyze --list runs/`` (or run directories named one by one): the options shown are only those
whose values vary among the listed runs (the seed among them; where the data lives never), then the run's test
accuracy ± its 95% interval over test episodes, its best checkpoint's episode and the episodes it has trained (its
last metrics row): a run still training, or stopped, has no test accuracy yet.
"""

from __future__ import annotations

from fewshot.analysis.groups import accuracy_of, varying
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
    cells = (run.path, *(str(getattr(run.config, n)) for n in differing), test,
             MISSING if r["best_episode"] is None else str(r["best_episode"]), str(r["episodes_trained"]))
    rows.append(tuple(Cell(text) for text in cells))
  shared = "" if differing else " (they share every option)"
  return Table(f"{len(runs)} runs: the options in which they differ, and their results{shared}", headers, tuple(rows))


def csv_fields(runs: list[Run]) -> tuple[str, ...]:
  return ("directory", *_differing(runs), *RESULT_FIELDS)


def csv_records(runs: list[Run]) -> list[dict]:
  """A record per run: its directory, the options that vary among the runs, its results; None is empty."""
  differing = _differing(runs)
  records = []
  for run in runs:
    record = {"directory": run.path, **{n: getattr(run.config, n) for n in differing}, **_results(run)}
    records.append({key: "" if value is None else value for key, value in record.items()})
  return records
