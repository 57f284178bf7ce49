"""Re-test the best checkpoint of a run: ``python -m fewshot.evaluate --workdir runs/<name>``.

A metric-learning run (``python -m fewshot.dml.train``) is re-tested by its fold models' retrieval of the test split
(:mod:`fewshot.dml.retest`), written as ``test_<checkpoint>_retrieval.json``; with an episode's shape given
(``--test_way``, ``--shot``, ``--test_query``, ``--test_episodes``, ``--seed``; defaults 5-way 1-shot 15-query,
600 episodes, the run's seed) its embedder is tested on few-shot episodes of the test split instead, each query
given the class of the nearest mean support embedding, written as
``test_<checkpoint>_episodes_<W>w<S>s<Q>q_<N>ep_seed<K>.json``. What follows is a few-shot run's.

Uses the run's own configuration and test key, so it reproduces the accuracy the run
reported; ``--test_episodes`` or ``--seed`` draw a different set of test episodes.

``--test_by cached`` draws the same episodes over the test split embedded once
(:mod:`fewshot.episodic.cached_episodes`), so ``--test_episodes 10000`` costs seconds; ``--test_by both``
reports the per-episode protocol (the paper's, the default) beside it, the cached path
testing ``--cached_episodes`` episodes (default as many). ``--lake_runs`` scores Lake et
al.'s one-shot runs instead of the test split (:mod:`fewshot.episodic.lake`) and writes
``lake_runs.json`` into the run directory; ``--lake_design N`` scores ``N`` random runs of his design drawn from the
Omniglot images instead (:mod:`fewshot.episodic.lake_design`; ``--test_way``, default 20, and ``--seed``, default 0)
and writes ``lake_design_<N>runs_<W>way_seed<K>.json``, the name ``fewshot.reproduce`` gives the same runs' score.

What it measured is written into the run directory (``--norecord``: printed only), whole (atomically), as
``test_<checkpoint>@<its episode>_<N>ep[_cached | _both[_cached<M>ep]][_way<W>][_shot<S>][_query<Q>][_shifts<S>]
[_seed<K>].json``: the checkpoint and the episode it was saved at, the episodes tested (the cached path's with
``--test_by cached``), then only the options that differ from the run's own: ``_both_cached<M>ep`` where the cached
path tests another count, ``--test_way``, ``--shot``, ``--test_query``, ``--test_shifts``, ``--seed``. An episode of
another shape than the run's (``--shot 5`` on a 1-shot run, ``--test_way 20``) tests the same checkpoint. Every option that changes the measurement is in the name,
so a file is only ever replaced by the same measurement again; the file holds the results and every option used
(``options``, where the data was read from included). A line on stderr says what is tested before it starts
(``testing runs/X best checkpoint (episode 2000) on 10000 episodes``) and how long it took after.
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys
import time

from absl import flags, logging

from fewshot import kinds, lake_scoring, options, runner
from fewshot.config import Config
from fewshot.errors import ConfigError
from fewshot.lake_scoring import DESIGN_SEED, DESIGN_WAY, LAKE_FILE, design_record, evaluate_lake
from fewshot.method_rows import require
from fewshot.records.files import check_writable, finite_json, write_json_atomic
from fewshot.records.measurements import check_measured_data, record_name
from fewshot.records.run_kinds import DEFAULT, run_kind
from fewshot.records.rundir import RunDir, existing_checkpoint, existing_run

TEST_BY = ("episode", "cached", "both")
# The flags that ask for a metric-learning run's embedder to be tested on few-shot episodes.
DML_EPISODE_FLAGS = ("test_way", "shot", "test_query", "test_episodes", "seed")
# What the test split's episodes are drawn with: meaningless beside --lake_runs, so refused there; runs of Lake's
# design are drawn from --data_dir's images with their own --test_way and --seed.
EPISODE_FLAGS = ("test_episodes", "test_way", "shot", "test_query", "seed", "data_dir", "tfds_dir", "test_by",
                 "cached_episodes")
DESIGN_FLAGS = ("test_way", "seed", "data_dir")


def define_flags() -> None:
  """Define the command-line flags (only when run as a program, so importing this module defines none)."""
  with options.flag_heading("the run"):
    flags.DEFINE_string("workdir", None, "the run directory (required), written by python -m fewshot.train",
                        required=True)
    flags.DEFINE_string("checkpoint", "best", "which checkpoint to test: best or last")
  with options.flag_heading("test episodes"):
    flags.DEFINE_enum("test_by", "episode", TEST_BY, "episode: embed each test episode (the paper's protocol); "
                      "cached: the same episodes over the test split embedded once (seconds for 10,000); both: report "
                      "both")
    # The run's options a measurement may change, each defined once, in Config.
    options.define_overrides(Config, {"test_episodes": None, "test_way": "classes per test episode", "shot": None,
                                      "test_query": "query images per class in test episodes", "seed": "seed of the test "
                                      "episodes", "test_shifts": None})
    flags.DEFINE_integer("cached_episodes", None, "episodes of the cached test (default --test_episodes)")
    flags.DEFINE_bool("record", True, "write what was measured into the run directory, as test_<checkpoint>@<its "
                      "episode>_<N>ep[...].json (see above); --norecord: print it only")
  with options.flag_heading(options.DATA):
    flags.DEFINE_string("data_dir", None, "the dataset's folder, if it moved since training")
    flags.DEFINE_string("tfds_dir", None, "where prepared datasets live, if not where the run's did "
                        "(a dataset not prepared there yet is prepared there)")
  with options.flag_heading("Lake's one-shot runs"):
    flags.DEFINE_string("lake_runs", None, "Lake et al.'s one-shot runs (all_runs folder or all_runs.zip): score "
                        f"them instead of the test split and write {LAKE_FILE} into the run directory")
    flags.DEFINE_integer("lake_design", None, "score this many random runs of Lake's design instead (his 10 "
                         "evaluation alphabets, drawers 1-8, one drawer for a run's supports and another for its "
                         f"queries), drawn with --seed (default {DESIGN_SEED}) from the Omniglot images in --data_dir "
                         f"(default the run's), --test_way classes each (default {DESIGN_WAY}); writes "
                         "lake_design_<N>runs_<W>way_seed<K>.json into the run directory", lower_bound=1)

FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True)
class Measurement:
  """A measurement resolved once per command: the run directory, its configuration and the one tested (the run's,
  overrides replacing fields), the checkpoint, how the test episodes are embedded, and the cached path's count.
  """

  rundir: object  # fewshot.records.rundir.RunDir
  run: Config
  used: Config
  checkpoint: str
  test_by: str
  cached_episodes: int


def resolve(workdir: str, checkpoint: str = "best", test_by: str = "episode", cached_episodes: int | None = None,
            **overrides) -> Measurement:
  """The :class:`Measurement` of these options; bad options are one-line ``ConfigError``s, before anything is
  loaded.
  """
  if test_by not in TEST_BY:
    raise ConfigError(f"unknown --test_by {test_by!r}; choose one of {', '.join(TEST_BY)}.")
  if cached_episodes is not None and (cached_episodes < 1 or test_by == "episode"):
    raise ConfigError(f"--cached_episodes must be a positive integer with --test_by cached or both, got "
                      f"{cached_episodes} with --test_by {test_by}.")
  rundir = existing_checkpoint(workdir, checkpoint, "--checkpoint")
  config = rundir.read_options(Config.from_dict)
  if test_by != "episode":
    require(config.method, "distance_head", f"--test_by {test_by} embeds the test split once and classifies under a "
            "distance head", "use --test_by episode")
  used = dataclasses.replace(config, **{k: v for k, v in overrides.items() if v is not None})
  return Measurement(rundir, config, used, checkpoint, test_by, cached_episodes or used.test_episodes)


def _say(line: str, shown: bool) -> None:
  if shown:
    print(line, file=sys.stderr, flush=True)


def _what(test_by: str, episodes: int, cached: int) -> str:
  if test_by == "cached":
    return f"{cached} episodes over the test split embedded once"
  return f"{episodes} episodes" + (f", then {cached} over the test split embedded once" if test_by == "both" else "")


def evaluate(workdir: str, checkpoint: str = "best", test_by: str = "episode", cached_episodes: int | None = None,
             progress: bool = True, **overrides) -> dict:
  """Test accuracy of a run's checkpoint; ``overrides`` replace config fields (None keeps the run's).

  ``test_by``: ``episode`` (each episode embedded, the paper's protocol), ``cached`` (the
  same episodes over the test split embedded once: ``test_*`` are the cached path's) or
  ``both`` (``test_*`` per episode, ``cached_test_*`` over ``cached_episodes`` cached episodes).
  ``progress``: a line on stderr before testing and one after.
  """
  return run_measurement(resolve(workdir, checkpoint, test_by, cached_episodes, **overrides), progress)


def run_measurement(m: Measurement, progress: bool = True) -> dict:
  """:func:`evaluate` of a resolved measurement: the run's experiment on its test split, its evaluators run on the
  checkpoint (:mod:`fewshot.episodic.evaluators`).
  """
  from fewshot.episodic.experiment import Experiment  # the model machinery, once the options and run passed
  from fewshot.training import compilation_cache

  compilation_cache.enable()
  experiment = Experiment.build(m.used, splits=("test",), progress=progress)
  check_measured_data(m.rundir, experiment.data, m.used.data_dir)  # refused before the model is restored
  state = m.rundir.checkpoints.restore(m.checkpoint, experiment.initial_state())
  step = m.rundir.checkpoints.step(m.checkpoint)
  tested = _what(m.test_by, m.used.test_episodes, m.cached_episodes)
  _say(f"testing {m.rundir.path} {m.checkpoint} checkpoint (episode {step}) on {tested}", progress)
  started = time.perf_counter()
  if m.test_by == "cached":
    results = {"model": m.used.model_name, "test_query": m.used.test_query,
               **experiment.evaluator("cached", episodes=m.cached_episodes).run(state)}
  else:
    results = experiment.evaluator("episodes").run(state)
    if m.test_by == "both":
      results.update(experiment.evaluator("cached", episodes=m.cached_episodes, prefix="cached_").run(state))
  _say(f"tested in {time.perf_counter() - started:.1f} s", progress)
  results.update(test_by=m.test_by, checkpoint=m.checkpoint, checkpoint_episode=step)
  return results


def record_path(workdir: str, checkpoint: str = "best", test_by: str = "episode", cached_episodes: int | None = None,
                check: bool = True, **overrides) -> tuple[pathlib.Path, dict]:
  """Where :func:`evaluate`'s measurement of these options is written, and the options it records; with ``check``,
  refused in one line, before anything is tested, where the run directory cannot be written.
  """
  return measurement_record(resolve(workdir, checkpoint, test_by, cached_episodes, **overrides), check)


def measurement_record(m: Measurement, check: bool = True) -> tuple[pathlib.Path, dict]:
  """:func:`record_path` of a resolved measurement."""
  if check:
    check_writable(m.rundir.path, "--workdir")
  step = m.rundir.checkpoints.step(m.checkpoint)
  used = m.used
  options = {"checkpoint": m.checkpoint, "checkpoint_episode": step, "test_by": m.test_by,
             "test_episodes": used.test_episodes,
             "cached_episodes": None if m.test_by == "episode" else m.cached_episodes,
             "test_way": used.test_way, "shot": used.shot, "test_query": used.test_query, "seed": used.seed,
             "test_shifts": used.test_shifts, "data_dir": used.data_dir, "tfds_dir": used.tfds_dir}
  name = record_name(m.run, used, m.checkpoint, step, m.test_by, m.cached_episodes)
  return m.rundir.path / name, options


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  rundir = RunDir(FLAGS.workdir)
  kinds.resolve(run_kind(rundir.read_config()) if rundir.holds_run() else DEFAULT, "retest")()


def main_few_shot():
  """A few-shot run (its row's ``retest``): Lake's runs with ``--lake_runs`` or ``--lake_design``, else the test
  split's episodes.
  """
  if FLAGS.lake_runs is not None or FLAGS.lake_design is not None:
    main_lake()
  else:
    main_test()


def main_retrieval():
  """A metric-learning run: its fold models' test retrieval again, or with an episode's shape given (``--test_way``,
  ``--shot``, ``--test_query``, ``--test_episodes``, ``--seed``) its embedder tested on few-shot episodes of the test
  split (:func:`fewshot.dml.retest.measure`).
  """
  from fewshot.dml import retest

  refused = [f"--{name}" for name in ("test_by", "cached_episodes", "lake_runs", "lake_design", "test_shifts")
             if FLAGS[name].present]
  if refused:
    raise ConfigError(f"{', '.join(refused)} choose how a few-shot run is tested; {FLAGS.workdir} is a "
                      "metric-learning run, tested by its retrieval of the test split, or on few-shot episodes with "
                      "--test_way, --shot, --test_query, --test_episodes and --seed (leave them out).")
  shape = None
  if any(FLAGS[name].present for name in DML_EPISODE_FLAGS):
    shape = dict(way=FLAGS.test_way, shot=FLAGS.shot, query=FLAGS.test_query, episodes=FLAGS.test_episodes,
                 seed=FLAGS.seed)
  retest.measure(FLAGS.workdir, FLAGS.checkpoint, FLAGS.data_dir, FLAGS.tfds_dir, shape, FLAGS.record)


def main_lake():
  design = FLAGS.lake_design  # with --lake_runs too: evaluate_lake refuses the pair in one line
  kept = DESIGN_FLAGS if design is not None else ()
  given = [f"--{name}" for name in EPISODE_FLAGS if FLAGS[name].present and name not in kept]
  if given:
    raise ConfigError(f"{', '.join(given)} choose test-split episodes; {'--lake_runs' if design is None else '--lake_design'} "
                      "scores Lake's runs instead (leave them out, or run without it).")
  shape = None if design is None else dict(runs=design, way=FLAGS.test_way or DESIGN_WAY,
                                           seed=DESIGN_SEED if FLAGS.seed is None else FLAGS.seed)
  results = evaluate_lake(FLAGS.workdir, FLAGS.lake_runs, FLAGS.checkpoint, FLAGS.test_shifts, FLAGS.record,
                          design=shape, data_dir=FLAGS.data_dir)
  print(lake_scoring.report(results, FLAGS.checkpoint, shape))
  if FLAGS.record:
    print(f"wrote {existing_run(FLAGS.workdir).path / (LAKE_FILE if shape is None else design_record(**shape))}")


def measure(workdir: str, checkpoint: str = "best", test_by: str = "episode", cached_episodes: int | None = None,
            record: bool = True, progress: bool = True, **overrides) -> tuple[dict, dict, pathlib.Path | None]:
  """:func:`evaluate`, written (with ``record``) where :func:`record_path` says: ``(results, the options used, the
  file written or None)``.
  """
  resolved = resolve(workdir, checkpoint, test_by, cached_episodes, **overrides)  # once per command
  # Where it will be written (checked before the test starts, with record) and the options it records.
  target, options_used = measurement_record(resolved, check=record)
  results = run_measurement(resolved, progress)
  if record:
    write_json_atomic(target, finite_json({**results, "options": options_used}))
  return results, options_used, target if record else None


def main_test():
  overrides = dict(test_episodes=FLAGS.test_episodes, test_way=FLAGS.test_way, shot=FLAGS.shot,
                   test_query=FLAGS.test_query, seed=FLAGS.seed,
                   data_dir=FLAGS.data_dir, tfds_dir=FLAGS.tfds_dir, test_shifts=FLAGS.test_shifts)
  results, options_used, target = measure(FLAGS.workdir, FLAGS.checkpoint, FLAGS.test_by, FLAGS.cached_episodes,
                                          FLAGS.record, **overrides)
  shape = f"{options_used['test_way']}-way {options_used['shot']}-shot {options_used['test_query']}-query"
  where = f"{results['model']} ({FLAGS.checkpoint} checkpoint, episode {results['checkpoint_episode']}, {shape})"
  lines = [("", results["test_by"] == "cached")] + [("cached_", True)] * (results["test_by"] == "both")
  for prefix, cached in lines:
    print(f"{where}: test accuracy {results[prefix + 'test_accuracy']:.2f}% ± {results[prefix + 'test_ci95']:.2f}% "
          f"({results[prefix + 'test_episodes']} episodes{', split embedded once' if cached else ''})")
  if target is not None:
    print(f"wrote {target}")


if __name__ == "__main__":
  define_flags()
  runner.run(main)
