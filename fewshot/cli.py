"""What the command-line entry points share: absl flag parsing that fails with one line and exit status 2.

Bad input (any :class:`~fewshot.errors.FewshotError`) prints ``error: <message>`` and exits 2; Ctrl-C prints
one line (where a training run stopped, from :class:`~fewshot.errors.Interrupted`) and exits 130, the
shell's status for SIGINT; SIGTERM (preemption) prints the same line and exits 143. Nothing here imports JAX: a command checks its flags and configuration first.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
import threading
from typing import Callable

from absl import app, flags

from fewshot import options, usage
from fewshot.errors import ConfigError, FewshotError
from fewshot.options import LOCATION_FIELDS
from fewshot.records import held_output
from fewshot.records.reuse import saved_steps
from fewshot.training import distributed, peers
from fewshot.training.distributed import Processes

INTERRUPTED = 130  # 128 + SIGINT


def fail(message: str, every_process: bool = False) -> None:
  """Print ``error: <message>`` and exit 2; in a multi-process launch, the other processes stop too (unless
  ``every_process`` meets the same error at the same point).
  """
  if peers.watching():
    peers.stop(f"error: {message}", 2, kind=None if every_process else "error")
  print(f"error: {message}", file=sys.stderr)
  sys.exit(2)


def run_script(main: Callable[[], object]) -> None:
  """Run an argparse script's ``main`` (the experiments') with this module's rule for bad input: a
  ``FewshotError`` is one line and exit status 2, never a traceback.
  """
  try:
    main()
  except FewshotError as e:
    fail(str(e))


def _parse_flags(argv: list[str], takes_paths: bool = False) -> list[str]:
  if usage.asks_for_help(argv):  # the command's own flags by heading (absl's --help lists only __main__'s)
    print(usage.help_text(usage.command_name(), sys.modules["__main__"].__doc__))
    sys.exit(0)
  try:
    usage.check_command_line(argv, takes_paths)
  except ConfigError as e:
    fail(str(e))
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    fail(f"{usage.flagfile_prefix(argv, str(e))}{usage.renamed_flag(str(e)) or e}; see --help.")


def run(main: Callable[[list[str]], None], takes_paths: bool = False, resume: str = "with --resume") -> None:
  """``app.run`` whose bad flags and bad inputs print one line and exit with status 2; an argument that is not a flag
  is one of them unless the command ``takes_paths``. ``resume``: how the interrupt line tells the command to continue
  (``again`` for a command that continues by itself and has no ``--resume``).
  """
  _resume[0] = resume

  def guarded(argv):
    try:
      main(argv)
    except FewshotError as e:
      fail(usage.flagfile_prefix(sys.argv, str(e)) + str(e), getattr(e, "every_process", False))
    except KeyboardInterrupt as e:
      _exit_interrupted(str(e) or None)
    except Exception as e:
      if peers.watching():  # a peer gone mid-collective, or this process's own error: every process stops
        peers.lost_contact(e)
        peers.crash(e)
      raise

  _exit_at_once_on_signals()
  app.run(guarded, flags_parser=lambda argv: _parse_flags(argv, takes_paths))


_exiting = threading.Lock()
_wakeup_sockets: list = []


_resume = ["with --resume"]  # run's resume words, for the interrupt line


def _interrupted_message(cause: str = "interrupted") -> str:
  loop = sys.modules.get("fewshot.training.loop")  # imported only by commands that train
  return f"{cause}." if loop is None else loop.interrupted_message(cause, _resume[0])


def _exit_interrupted(message: str | None, status: int = INTERRUPTED, cause: str = "interrupted") -> None:
  """Print the one line (``message``, or where training stopped and why) and exit at once (130 for Ctrl-C, 143 for
  SIGTERM), from whichever thread saw it first; in a multi-process launch the other processes stop too.

  Every record is whole on disk at any moment (atomic writes, as after a SIGKILL), so the
  interpreter's teardown of JAX's and the loaders' threads is skipped.
  """
  with _exiting:
    held_output.release()  # a checkpoint save holding stderr as the signal came: this line must reach it
    if peers.watching():
      # First: where training stopped is read once the others know. SIGTERM is a preemption: every process exits 143.
      peers.post("interrupted", cause, status if cause.startswith("terminated") else 2)
      peers.finish(message or _interrupted_message(cause), status)
    message = message or _interrupted_message(cause)
    print(message, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _exit_on(signum: int) -> None:
  cause = "interrupted" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"
  _exit_interrupted(None, 128 + signum, cause)


def _exit_at_once_on_signals() -> None:
  """Exit on Ctrl-C, and on SIGTERM (what SLURM and cloud preemption send), even while the main thread waits on a
  compiled computation.

  Python runs a signal's handler only when the main thread runs Python again, which a chunk of training episodes
  delays by seconds; the signal's wake-up byte reaches this watcher at once.
  """
  if threading.current_thread() is not threading.main_thread():
    return
  receive, send = socket.socketpair()
  _wakeup_sockets[:] = [receive, send]  # kept open for the process's life
  send.setblocking(False)
  signal.set_wakeup_fd(send.fileno(), warn_on_full_buffer=False)
  # Python handlers, so that SIGTERM reaches the wake-up socket, and so that Ctrl-C raises no KeyboardInterrupt in
  # the main thread while the watcher prints its line (one raised inside a finaliser printed "Exception ignored in:"
  # into that line); whichever thread runs first exits, the other waits on the lock.
  for signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(signum, lambda signum, frame: _exit_on(signum))

  def watch():
    while True:
      received = receive.recv(64)
      for signum in (signal.SIGINT, signal.SIGTERM):
        if signum in received:
          _exit_on(signum)

  threading.Thread(target=watch, name="fewshot-signals", daemon=True).start()


# ---- the training commands' shared flags and main ------------------------------------------------------------
_SEEDS = re.compile(r"^\d+(-\d+)?$")


def parse_seeds(text: str) -> tuple[int, ...]:
  """``"0-7"``, ``"0,3,5"`` or a mix (``"0-3,9"``) as the seeds, in order; a one-line ``ConfigError`` otherwise."""
  fix = "pass --seeds as a range 0-7 or a list 0,3,5 of distinct non-negative integers"
  parts = [p.strip() for p in str(text).split(",")]
  if not text or not all(_SEEDS.match(p) for p in parts):
    raise ConfigError(f"--seeds {text!r} is not a list of seeds; {fix}.")
  seeds = []
  for part in parts:
    first, _, last = part.partition("-")
    lo, hi = int(first), int(last or first)
    if hi < lo:
      raise ConfigError(f"--seeds range {part} runs backwards; write it {hi}-{lo}.")
    seeds.extend(range(lo, hi + 1))
  if len(set(seeds)) < len(seeds):  # linear: a set of what was seen, not a count per seed
    seen = set()
    repeated = next(s for s in seeds if s in seen or seen.add(s))
    raise ConfigError(f"--seeds names seed {repeated} twice; {fix}.")
  return tuple(seeds)


def read_runs_of(paths: list[str], kind: str, measurement: str | None = None) -> list:
  """The records of runs of one ``kind`` (``records.rundir.RUN_KINDS``) as ``analyze`` and ``plot`` read them, each
  kind's options by its own class (``Config``, ``DMLConfig``: options only, no JAX); ``measurement``: a few-shot run's
  ``python -m fewshot.evaluate`` record to read as its results (:func:`fewshot.records.reading.measured`).
  """
  from fewshot.records.reading import read_runs

  if kind == "fewshot":
    from fewshot.config import Config

    return read_runs(paths, Config.from_dict, measurement)
  if measurement is not None:
    raise ConfigError("--measurement chooses a python -m fewshot.evaluate record; metric-learning runs have none "
                      "(their test retrieval is in results.json): drop it.")
  from fewshot.dml.config import DMLConfig

  return read_runs(paths, DMLConfig.from_dict, kind="dml")


def define_run_flags(default_workdir: str) -> None:
  """The flags of a training command that are not part of the run's configuration: where it runs and is written."""
  from absl import flags

  from fewshot.choices import PLACEMENTS

  with options.flag_heading(options.DATA):
    flags.DEFINE_enum("placement", "auto", PLACEMENTS, "where split images live: on the device, streamed from host "
                      "memory, or auto (on the device when a split fits 4 GiB); the draws are the same either way")
  with options.flag_heading(options.RUNS):
    flags.DEFINE_string("workdir", None, f"run directory (default {default_workdir}; with --seeds, the folder that "
                        "holds the group's run directories, default runs)")
    flags.DEFINE_bool("resume", False, "continue the run in --workdir from its last checkpoint, with the options "
                      "its config.json records (a flag given that differs from them is refused); --data_dir and "
                      "--tfds_dir may name new places, which the resumed run then reads (and records)")
    flags.DEFINE_string("seeds", None, "train a seed group: the seeds as a range 0-7 or a list 0,3,5 (instead of "
                        "--seed)")
    flags.DEFINE_string("config", None, "replay a run: the options its config.json (runs/NAME/config.json) records "
                        "are the defaults, the flags given override them; the run goes where that configuration's "
                        "run goes (--workdir as above)")
  # A seed group over several processes (hosts): fewshot.training.distributed.
  with options.flag_heading(options.HOSTS):
    flags.DEFINE_string("coordinator_address", None, "with --seeds, train the group over several processes: "
                        "HOST:PORT of process 0, the same for every process (with --num_processes and --process_id)")
    flags.DEFINE_integer("num_processes", None, "how many processes train the group (with --coordinator_address)")
    flags.DEFINE_integer("process_id", None, "this process's index, 0 to --num_processes - 1 (with "
                         "--coordinator_address)")


def seed_group_from_flags(config) -> tuple[tuple[int, ...], list[str]] | None:
  """A seed group's seeds and run directories (``<--workdir>/<run name>``) from ``--seeds``; None for one run."""
  from absl import flags

  values = flags.FLAGS
  if values.seeds is None:
    return None
  if values["seed"].present:
    raise ConfigError("--seeds trains a group and --seed a single run; pass one of them.")
  seeds = parse_seeds(values.seeds)
  parent = values.workdir or "runs"
  return seeds, [f"{parent}/{config.with_seed(s).run_name}" for s in seeds]


def group_line(seeds: tuple[int, ...], held: int, measures: dict[str, list[float | None]]) -> str:
  """One line after a seed group's per-seed results: each measure's mean ± 95% Student-t interval across the seeds
  (values in %; a run's missing value is left out), e.g.
  ``seed group of 3 seeds: test accuracy 91.23% ± 1.45% (mean ± 95% t-interval)``.
  """
  from fewshot.analysis.tables import format_mean_interval

  whose = f"{len(seeds)} seeds" if held == len(seeds) else f"{len(seeds)} seeds ({held} of them this process's)"
  shown = ", ".join(f"{name} {format_mean_interval(values, '%')}" for name, values in measures.items())
  return f"seed group of {whose}: {shown} (mean ± 95% t-interval)"


def resumed_record(values) -> str | None:
  """``--resume --workdir RUN`` of one run: the ``config.json`` RUN records, whose options stand in for the flags not
  given (as ``--config`` would); None otherwise (a group's ``--workdir`` is the folder of its runs).
  """
  if not values.resume or values.workdir is None or values.seeds is not None:
    return None
  record = os.path.join(values.workdir, "config.json")
  return record if os.path.isfile(record) else None


def launch_options(config, values) -> list[tuple[str, object]]:
  """What every process of a launch must be given alike: the configuration (less where its data lives, which may
  differ between hosts), the seeds, the run directories' folder and ``--resume``.
  """
  configured = [(f"--{name}", value) for name, value in config.to_dict().items() if name not in LOCATION_FIELDS]
  return [*configured, ("--seeds", values.seeds), ("--workdir", values.workdir or "runs"), ("--resume", values.resume)]


def train_from_flags(config_type, train, train_group, format_results, format_group=None, **train_options) -> None:
  """A training command's ``main``: one run (``--seed``) or a seed group (``--seeds``) of the parsed flags, results printed;
  a group's then summarised in one line by ``format_group(config, seeds, held results)``.
  """
  from absl import flags, logging

  logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  values = flags.FLAGS
  if values.workdir is not None and not values.workdir.strip():  # not the default folder: what the user meant is lost
    raise ConfigError(f"--workdir is empty ({values.workdir!r}: an unset variable in quotes?); pass the run's folder, "
                      "or leave --workdir out for runs/<run name>.")
  # A replayed config.json's seed is no flag given, so --seeds replaces it without the --seed conflict.
  replayed = values.config or resumed_record(values)
  recorded = usage.recorded_options(config_type, replayed, usage.command_name()) if replayed else None
  config = options.from_flags(config_type, recorded=recorded)
  group = seed_group_from_flags(config)
  processes = Processes(values.coordinator_address, values.num_processes, values.process_id)
  if processes.several and group is None:
    raise ConfigError("several processes train a seed group, each writing its own runs; pass --seeds (a single run "
                      "trains in one process).")
  processes.initialize()
  if processes.several:  # the processes stop together, before any is written, unless they were given the same
    distributed.agree(launch_options(config, values), {w: saved_steps(w) for w in group[1]})
  if group is None:
    results = train(config, values.workdir or f"runs/{config.run_name}", resume=values.resume,
                    placement=values.placement, **train_options)
    print(format_results(config, results))
    print(f"run directory: {results['workdir']}")
    return
  seeds, workdirs = group
  held = []
  for seed, workdir, results in zip(seeds, workdirs, train_group(config, seeds, workdirs, resume=values.resume,
                                                                  placement=values.placement)):
    if results is not None:  # None: another host's run
      print(f"seed {seed} [{workdir}]:\n{format_results(config, results)}")
      held.append(results)
  if format_group is not None and held:
    print(format_group(config, seeds, held))
