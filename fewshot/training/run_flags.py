"""What the training commands (``python -m fewshot.train``, ``python -m fewshot.dml.train``) share: the flags of
where a run goes (``--workdir``, ``--resume``, ``--seeds``, ``--config``, the hosts of a launch) and their ``main``:
one run or a seed group from the parsed flags, its results printed. Nothing here imports JAX.
"""

from __future__ import annotations

import os
import re

from fewshot import options, usage
from fewshot.errors import ConfigError
from fewshot.options import LOCATION_FIELDS
from fewshot.records.reuse import saved_steps
from fewshot.training import distributed
from fewshot.training.distributed import Processes

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
