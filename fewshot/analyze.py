"""Compare runs from their records: one arm of seeds, arms of a folder, run pairs (the DR paper's Tables 3-10).

    python -m fewshot.analyze PATH [PATH ...] [--list] [--pairs first|all]
        [--format table|markdown|csv|latex] [--out FILE]
    python -m fewshot.analyze [flags] A... -- B...              # two arms of seeds; flags go before --

A PATH is a run directory (it holds config.json) or a folder of them: every run directory below it, at any
depth, is read (runs with no metrics row yet are left out with a warning). The runs are then grouped into *arms* by
configuration: the runs of an arm share every option but --seed and where the data lives (--data_dir,
--tfds_dir). Few-shot runs (``python -m fewshot.train``) and metric-learning runs (``python -m fewshot.dml.train``)
are not compared with each other (refused in one line; ``--list`` lists both). What is printed of few-shot runs:

* ``A... -- B...``: the two arms compared (:mod:`fewshot.analysis.arms`): test accuracy across seeds (each arm's
  mean ± 95% t-interval, B − A ± Welch, Mann–Whitney U on the seeds, the exact sign-flip p over the seeds both arms
  have), per-seed geometric means of the
  diagnostics, and the paper's tables pooled over the seeds, then seed by seed. Two arms of metric-learning runs
  (``python -m fewshot.dml.train``) are compared by their test retrieval (MAP@R, R-precision, precision@1) with the
  same statistics (:mod:`fewshot.analysis.retrieval_arms`).
* ``--list``: one row per run (:mod:`fewshot.analysis.listing`): the options that vary among the runs, the test
  accuracy ± its interval, the best checkpoint's episode and the episodes trained; then a metric-learning run's row
  each (:func:`fewshot.analysis.retrieval_runs.listing_table`: its test MAP@R, R-precision and precision@1), and the
  re-tests ``python -m fewshot.evaluate`` recorded in them.
* Otherwise, by the arms the runs form:

  - one arm (a run, or the seeds of one configuration, e.g. ``runs/A_seed*``): its test accuracy across seeds
    (mean ± 95% t-interval, and each seed's) and each seed's geometric mean of every diagnostic with the arm's
    median (:mod:`fewshot.analysis.arm_tables`);
  - runs named one by one, each of its own configuration: the paper's tables of run pairs
    (:mod:`fewshot.analysis.pairs`): the first run against each other (``--pairs first``, the baseline-vs-model
    layout) or every pair (``--pairs all``);
  - otherwise (a folder, or arms of several seeds): a row per arm (its seeds' test accuracies, their mean ±
    95% t-interval, its directories), then, for two arms of one dataset and episode shape, the two-arm report
    that ``A -- B`` gives (arm A the one whose options come first: at their defaults, e.g. the softmax head),
    else each arm's diagnostics.

Of metric-learning runs (:mod:`fewshot.analysis.retrieval_runs`): one run's rows (each fold model's checkpoints:
epoch, loss, validation MAP@R, R-precision and precision@1) and test retrieval (each fold model's best checkpoint,
their mean, their embeddings concatenated); several runs as their arms, a row each (each seed's test MAP@R, each
metric's mean ± 95% t-interval), two arms then compared as ``A... -- B...`` compares them.

p < 0.05 is marked (``*`` in the terminal table, bold in markdown and LaTeX, a ``*_significant`` column in CSV).
``--format csv`` writes one table: the pairs' records (one per measure and pair), one record per run for arms (its
arm's mean and t half-width beside it) or for ``--list``. ``--format latex`` writes ASCII only. ``--out`` writes the
output whole (atomically) instead of to standard output.
"""

from __future__ import annotations

import os
import pathlib
import sys

from absl import flags

from fewshot import kinds, options, runner
from fewshot.analysis import arm_tables, arms, retrieval_runs
from fewshot.analysis import tables as tables_mod
from fewshot.analysis.measures import MEASURES
from fewshot.analysis.pairs import CSV_FIELDS, PAIRINGS, compare, compare_arms, csv_records, measure_table, runs_table
from fewshot.analysis.tables import format_p, format_proportion, render_csv  # noqa: F401  (as analyze has offered)
from fewshot.config import Config
from fewshot.errors import ConfigError, OutputError
from fewshot.records import reading
from fewshot.records.files import check_writable, make_dirs, write_text_atomic
from fewshot.records.reading import Run, data_warning, excluded, expand, numerics_warning, protocol_warning, read_runs
from fewshot.records.run_kinds import KINDS, run_kind

FORMATS = ("table", "markdown", "csv", "latex")


def define_flags() -> None:
  """Define the command-line flags (only when run as a program, so importing this module defines none)."""
  with options.flag_heading("comparison"):
    flags.DEFINE_enum("pairs", "first", PAIRINGS, "runs named one by one, each of its own configuration: first: the "
                      "first run against each other run; all: every pair")
    flags.DEFINE_bool("list", False, "list the runs instead: a row per run, the options that vary among them, its "
                      "test accuracy, best episode and episodes trained; then python -m fewshot.evaluate's "
                      "measurements recorded in them; then metric-learning runs, with their test MAP@R")
    flags.DEFINE_multi_string("exclude", [], "leave out the runs this path or shell pattern names (repeatable), e.g. "
                              "a second run of one configuration and seed: --exclude 'runs/old/*'")
    flags.DEFINE_string("measurement", None, "compare the runs' test accuracy by their python -m fewshot.evaluate "
                        "record whose file name matches this pattern (e.g. 'test_best@*_600ep_shot5.json') instead "
                        "of results.json")
  with options.flag_heading("output"):
    flags.DEFINE_enum("format", "table", FORMATS, "output format")
    flags.DEFINE_string("out", None, "write the output to this file instead of standard output")


FLAGS = flags.FLAGS


def _check_format(fmt: str) -> None:
  if fmt not in FORMATS:
    raise ConfigError(f"unknown --format {fmt!r}; choose one of {', '.join(FORMATS)}.")


def _render(tables: list[tables_mod.Table], fmt: str) -> str:
  return tables_mod.RENDERERS[fmt](tables)


# ----------------------------------------------------------------------------- reports of runs already read
def report(runs: list[Run], pairing: str = "first", fmt: str = "table") -> str:
  """The paper's tables of run pairs, for runs already read."""
  _check_format(fmt)
  pairs = compare(runs, pairing)
  if fmt == "csv":
    return render_csv(csv_records(pairs), CSV_FIELDS)
  return _render([runs_table(runs)] + [measure_table(m, pairs) for m in MEASURES], fmt)


def arms_tables(a: list[Run], b: list[Run]) -> list[tables_mod.Table]:
  pairs = compare_arms(a, b)
  return [arms.accuracy_table(a, b), arms.seed_means_table(a, b)] + [measure_table(m, pairs, pooled=True)
                                                                     for m in MEASURES]


def report_arms(a: list[Run], b: list[Run], fmt: str = "table") -> str:
  """The output of ``python -m fewshot.analyze A... -- B...``: two arms of seed groups (in CSV, the test accuracy
  and the per-seed diagnostics' records first, then the per-checkpoint comparisons, as the tables come).
  """
  _check_format(fmt)
  arms.check_arms(a, b)
  if fmt == "csv":
    records = arms.csv_records(a, b) + csv_records(compare_arms(a, b))
    return render_csv([{**dict.fromkeys(arms.CSV_EXTRA_FIELDS, ""), **r} for r in records],
                      CSV_FIELDS + arms.CSV_EXTRA_FIELDS)
  return tables_mod.with_verdict(arms.verdict_line(a, b), _render(arms_tables(a, b), fmt), fmt)


def report_found_arms(arms_: list[list[Run]], fmt: str = "table") -> tuple[str, str | None]:
  """One arm, or several (a row each, then two arms compared or each arm's diagnostics); and a warning or None."""
  _check_format(fmt)
  overview, warning = arm_tables.overview_table(arms_), None
  if len(arms_) == 2:
    try:
      arms.check_arms(*arms_)
      if fmt == "csv":
        return report_arms(*arms_, fmt), None
      text = _render([overview] + arms_tables(*arms_), fmt)
      return tables_mod.with_verdict(arms.verdict_line(*arms_), text, fmt), None
    except ConfigError as e:  # two arms of different shapes: each is shown alone
      warning = f"warning: the two arms are not compared ({e})"
  if fmt == "csv":
    return render_csv(arm_tables.csv_records(arms_), arm_tables.csv_fields(arms_)), warning
  differing = arm_tables.varying([arm[0].config for arm in arms_])
  titles = [f"Arm {name}: {arm_tables.arm_label(arm, differing)}" for name, arm in
            zip(arm_tables.arm_names(len(arms_)), arms_)]
  if len(arms_) == 1:
    titles = [f"{arm_tables.arm_label(arms_[0], [])}, {len(arms_[0])} seed{'s' * (len(arms_[0]) != 1)}"]
  return _render([overview] + [arm_tables.diagnostics_table(arm, t) for arm, t in zip(arms_, titles)], fmt), warning


def report_listing(runs: list[Run], fmt: str = "table") -> str:
  """A row per run, each kind's part as its row says (few-shot runs' table, then metric-learning runs':
  :mod:`fewshot.analysis.listing`, :mod:`fewshot.analysis.retrieval_runs`).
  """
  _check_format(fmt)
  by_kind = [(kind, [run for run in runs if run_kind(run.config.to_dict()) == kind]) for kind in KINDS]
  by_kind = [(kind, own) for kind, own in by_kind if own]
  if fmt == "csv":  # one table: each kind's fields, those it lacks empty
    listed = [kinds.resolve(kind, "list_csv")(own) for kind, own in by_kind]
    fields = tuple(dict.fromkeys(field for own_fields, _ in listed for field in own_fields))
    return render_csv([{f: r.get(f, "") for f in fields} for _, records in listed for r in records], fields)
  return _render([table for kind, own in by_kind for table in kinds.resolve(kind, "list_tables")(own)], fmt)


def _joined(*warnings: str | None) -> str | None:
  return "\n".join(w for w in warnings if w) or None


def analyze_arms(paths_a: list[str], paths_b: list[str], fmt: str = "table", measurement: str | None = None) -> str:
  """Read two arms of run directories (or folders of them) and return the output."""
  return analyze_arms_warned(paths_a, paths_b, fmt, measurement)[0]


def analyze_arms_warned(paths_a: list[str], paths_b: list[str], fmt: str = "table",
                        measurement: str | None = None, exclude: tuple[str, ...] = ()) -> tuple[str, str | None]:
  found_a, _, warning_a = expand(paths_a)
  found_b, _, warning_b = expand(paths_b)
  kept, dropped = excluded(found_a + found_b, exclude)  # each pattern must match a run of one arm or the other
  found_a, found_b = [r for r in found_a if r in kept], [r for r in found_b if r in kept]
  warning_a = _joined(warning_a, f"warning: left out {len(dropped)} runs: {', '.join(dropped)} (--exclude)."
                      if dropped else None)
  compared = kinds.resolve(reading.one_kind([*found_a, *found_b]), "compare_arms")
  text, warning = compared(found_a, found_b, fmt, measurement)
  return text, _joined(warning_a, warning_b, warning)


def compare_few_shot_arms(paths_a: list[str], paths_b: list[str], fmt: str,
                          measurement: str | None) -> tuple[str, str | None]:
  """Two arms of few-shot runs (their row's ``compare_arms``): :func:`report_arms`, and the warnings."""
  runs = read_runs([*paths_a, *paths_b], Config.from_dict, measurement)
  a, b = runs[: len(paths_a)], runs[len(paths_a):]
  return report_arms(a, b, fmt), _joined(numerics_warning(runs), data_warning([a, b], ["A", "B"]))


def compare_retrieval_arms(paths_a: list[str], paths_b: list[str], fmt: str,
                           measurement: str | None) -> tuple[str, str | None]:
  """Two arms of metric-learning runs (their row's ``compare_arms``): :func:`report_retrieval_arms`."""
  return report_retrieval_arms([*paths_a, *paths_b], len(paths_a), fmt, measurement), None


def report_retrieval_arms(paths: list[str], count_a: int, fmt: str, measurement: str | None) -> str:
  """Two arms of metric-learning runs compared by their test retrieval (:mod:`fewshot.analysis.retrieval_arms`)."""
  _check_format(fmt)
  runs = kinds.read_runs_of(paths, "dml", measurement)
  return retrieval_runs.report_arms(runs[:count_a], runs[count_a:], fmt)


def analyze(paths: list[str], pairing: str = "first", fmt: str = "table") -> tuple[str, str | None]:
  """The paper's tables of run pairs of the run directories, and the protocol warning (or None)."""
  if len(paths) < 2:
    raise ConfigError(f"need at least two run directories, got {len(paths)}; usage: python -m fewshot.analyze runs/A runs/B.")
  runs = read_runs(paths, Config.from_dict)
  return report(runs, pairing, fmt), _joined(protocol_warning(runs), numerics_warning(runs))


def analyze_paths(paths: list[str], fmt: str = "table", pairing: str | None = None,
                  list_runs: bool = False, measurement: str | None = None,
                  exclude: tuple[str, ...] = ()) -> tuple[str, str | None]:
  """The command's output for ``PATH...`` (no ``--``), by the rules of this module's docstring, and its warnings.
  ``pairing`` None: ``--pairs`` not given (the first run against each other where runs are compared in pairs).
  """
  _check_format(fmt)
  if not paths:
    raise ConfigError("no run directories given; pass runs or a folder of them: python -m fewshot.analyze runs/A "
                      "runs/B, or python -m fewshot.analyze runs/.")
  found, folder, warning = expand(paths, exclude)
  if list_runs and measurement is not None:
    raise ConfigError("--list lists every measurement of the runs; --measurement chooses one to compare them by: "
                      "pass one of them.")
  if list_runs:  # both kinds of run, a table each
    if pairing is not None:
      raise ConfigError("--list lists the runs and --pairs compares them in pairs; pass one of them.")
    kind_of = reading.run_kinds(found)
    return report_listing([run for kind in KINDS for run in kinds.read_runs_of(
        [path for path in found if kind_of[path] == kind], kind)], fmt), warning
  return kinds.resolve(reading.one_kind(found), "report")(found, folder, pairing, fmt, measurement, warning)


def report_retrieval(found: list[str], folder: bool, pairing: str | None, fmt: str, measurement: str | None,
                     warning: str | None) -> tuple[str, str | None]:
  """Metric-learning runs (their row's ``report``): :func:`fewshot.analysis.retrieval_runs.report`."""
  if pairing is not None:
    raise ConfigError("--pairs compares few-shot runs in the DR paper's tables of run pairs; metric-learning runs "
                      "are compared as arms of seeds: leave it out.")
  runs = kinds.read_runs_of(found, "dml", measurement)
  text, not_compared = retrieval_runs.report(runs, fmt)
  return text, _joined(warning, not_compared, numerics_warning(runs))


def report_few_shot(found: list[str], folder: bool, pairing: str | None, fmt: str, measurement: str | None,
                    warning: str | None) -> tuple[str, str | None]:
  """Few-shot runs (their row's ``report``): run pairs, one arm, or arms, by the arms they form (the docstring)."""
  runs = read_runs(found, Config.from_dict, measurement)
  arms_ = arm_tables.arms_of(runs)
  pairwise = not folder and len(arms_) > 1 and all(len(arm) == 1 for arm in arms_)
  if pairwise:
    return report(runs, pairing or "first", fmt), _joined(protocol_warning(runs), numerics_warning(runs))
  if pairing is not None:
    raise ConfigError(f"--pairs compares runs named one by one, each of its own configuration; these form "
                      f"{len(arms_)} arm(s) of seeds (leave out --pairs, or compare two arms as A... -- B...).")
  text, not_compared = report_found_arms(arms_, fmt)
  return text, _joined(warning, not_compared, numerics_warning(runs),
                       data_warning(arms_, arm_tables.arm_names(len(arms_))))


# ----------------------------------------------------------------------------- the command
def _second_arm(argv_b: list[str]) -> list[str]:
  """The paths after ``--``; a flag there (absl reads everything after ``--`` as an argument) is refused."""
  for k, arg in enumerate(argv_b):
    if arg.startswith("-") and not os.path.exists(arg):
      value = argv_b[k + 1] if "=" not in arg and k + 1 < len(argv_b) else ""
      flag = f"{arg} {value}" if value and not value.startswith("-") else arg
      raise ConfigError(f"{flag} comes after --, where every argument is read as a run directory; put flags before "
                        f"--: python -m fewshot.analyze {flag} runs/A_seed* -- runs/B_seed*.")
  return argv_b


def write_out(text: str, out: str) -> None:
  path = pathlib.Path(out)
  if path.is_dir():
    raise OutputError(f"--out {path} is a folder; pass a file name such as {path / 'table.md'}.")
  check_writable(path.parent, "--out's folder")
  make_dirs(path.parent)
  write_text_atomic(path, text)
  print(f"wrote {path}")


def main(argv):
  # absl drops the "--" that separates two arms; the raw command line still has it.
  if "--" in sys.argv[1:]:
    arm_b = _second_arm(sys.argv[sys.argv.index("--") + 1:])
    if FLAGS.list or FLAGS["pairs"].present:
      raise ConfigError("A... -- B... compares two arms; --list and --pairs apply to runs named without --.")
    paths = argv[1:]
    text, warning = analyze_arms_warned(paths[: len(paths) - len(arm_b)], arm_b, FLAGS.format, FLAGS.measurement,
                                        tuple(FLAGS.exclude))
  else:
    pairing = FLAGS.pairs if FLAGS["pairs"].present else None
    text, warning = analyze_paths(argv[1:], FLAGS.format, pairing, FLAGS.list, FLAGS.measurement, tuple(FLAGS.exclude))
  if warning:
    print(warning, file=sys.stderr)
  if FLAGS.out:
    write_out(text, FLAGS.out)
  else:
    sys.stdout.write(text)


if __name__ == "__main__":
  define_flags()
  runner.run(main, takes_paths=True)
