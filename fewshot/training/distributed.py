"""Several processes (hosts) training one seed group: ``jax.distributed`` set up from three flags.

Launch the same command on every host, each with its own ``--process_id``::

  python -m fewshot.train ... --seeds 0-15 --coordinator_address host0:1234 --num_processes 4 --process_id K

The group's run axis is then sharded over the devices of every process (:class:`fewshot.training.seed_groups.SeedGroup`),
each process holds the runs of its own devices and writes their run directories; the run directories must
be on a filesystem that every host sees (each process checks the whole group's before any is written).
On the CPU the processes exchange collectives through gloo.

What goes wrong is one line naming the fix, before any run directory is written where it can be: the three
flags are checked before JAX starts (:class:`Processes`), the processes compare what they were given right after
they join (:func:`agree`), and a process that stops stops the others (:mod:`fewshot.training.peers`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import signal
import threading

from fewshot.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Processes:
  """Where this process stands among the processes of one launch (none given: a single process)."""

  coordinator_address: str | None = None
  num_processes: int | None = None
  process_id: int | None = None

  def __post_init__(self):
    given = [v is not None for v in dataclasses.astuple(self)]
    if any(given) and not all(given):
      raise ConfigError("a multi-process launch needs --coordinator_address HOST:PORT, --num_processes N and "
                        "--process_id K (0 <= K < N) together; pass all three, or none for one process.")
    if all(given):
      check_address(self.coordinator_address)
      if self.num_processes < 1:
        raise ConfigError(f"--num_processes must be a positive integer, got {self.num_processes}; pass how many "
                          "processes train the group.")
      if not 0 <= self.process_id < self.num_processes:
        raise ConfigError(f"--process_id {self.process_id} is not one of the {self.num_processes} processes; pass "
                          f"0 to {self.num_processes - 1}.")

  @property
  def several(self) -> bool:
    return self.coordinator_address is not None and self.num_processes > 1

  def initialize(self) -> None:
    """Join the other processes (returns once every process has): ``jax.distributed.initialize`` with gloo for
    the CPU's collectives (GPUs and TPUs use their own), a process that stops stopping the others
    (:mod:`fewshot.training.peers`).
    """
    if not self.several:
      return
    from fewshot.training import peers

    peers.watch(self.process_id, self.num_processes, self.coordinator_address)
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(self.coordinator_address, num_processes=self.num_processes,
                               process_id=self.process_id, heartbeat_timeout_seconds=peers.HEARTBEAT_SECONDS,
                               initialization_timeout=peers.JOIN_SECONDS)
    _take_back_signals()
    peers.start_watchdog()


def _take_back_signals() -> None:
  """Put Python's own handlers back in front of SIGTERM and SIGINT: ``jax.distributed.initialize`` hands SIGTERM to
  XLA's preemption notifier, which only logs it, so a group over several processes trained on to the end through
  SLURM's preemption signal. Python's handlers are the command's (:mod:`fewshot.runner`: one line, exit 143, every
  process stopped) or the default; setting one again installs Python's handler at the C level.
  """
  if threading.current_thread() is not threading.main_thread():
    return
  for signum in (signal.SIGTERM, signal.SIGINT):
    handler = signal.getsignal(signum)
    if handler is not None:  # None: a handler not set from Python, left as it is
      signal.signal(signum, handler)


# A host name or IPv4 address, or an IPv6 address in brackets; then the port.
_ADDRESS = re.compile(r"(?P<host>\[[^\[\]]+\]|[^:\[\]]+):(?P<port>[^:]*)")


def check_address(address: str) -> None:
  """Refuse, in one line, a ``--coordinator_address`` that is not HOST:PORT (an IPv6 host in brackets)."""
  fix = "pass HOST:PORT of process 0, e.g. host0:1234 or [::1]:1234, the same for every process"
  parsed = _ADDRESS.fullmatch(address)
  if parsed is None:
    if address.count(":") > 1 and "[" not in address:
      host, _, port = address.rpartition(":")
      raise ConfigError(f"--coordinator_address {address!r}: an IPv6 host goes in brackets, [{host}]:{port}; {fix}.")
    raise ConfigError(f"--coordinator_address {address!r} is not HOST:PORT; {fix}.")
  port = parsed["port"]
  if not re.fullmatch(r"[0-9]{1,5}", port) or not 1 <= int(port) <= 65535:
    raise ConfigError(f"--coordinator_address {address!r} has port {port!r}, not a number from 1 to 65535; {fix}.")


AGREE_SECONDS = 300  # how long a process waits for the others' options (they start within seconds of each other)


def agree(options: list[tuple[str, object]], dirs: dict[str, dict | None]) -> None:
  """Refuse, in every process alike, a launch whose processes were given different ``options`` (``(flag, value)``
  pairs) or see their run directories differently (``dirs``: each one's :func:`fewshot.records.reuse.saved_steps`).

  Right after ``jax.distributed.initialize``, before any run directory is written; the processes exchange what
  they were given through the coordination service's key-value store (no collective: nothing compiles).
  """
  import jax

  from fewshot.training import peers

  client, me = peers.client(), jax.process_index()
  client.key_value_set(f"fewshot/launch/{me}", json.dumps({"options": options, "dirs": dirs}))
  launches = [json.loads(client.blocking_key_value_get(f"fewshot/launch/{k}", AGREE_SECONDS * 1000))
              for k in range(jax.process_count())]
  problem = disagreement(launches)
  if problem is not None:
    # Every process has its verdict before process 0, which hosts the store, may exit.
    client.wait_at_barrier("fewshot/launch/compared", AGREE_SECONDS * 1000)
    error = ConfigError(problem)
    error.every_process = True  # each process finds the same, so none needs to tell the others
    raise error


def disagreement(launches: list[dict]) -> str | None:
  """The first difference between process 0's launch and another's, as one line naming the fix; None if none."""
  first = launches[0]
  for k, launch in enumerate(launches[1:], 1):
    for (flag, mine), (_, theirs) in zip(launch["options"], first["options"]):
      if mine != theirs:
        return (f"process {k} has {_flag(flag, mine)} where process 0 has "
                f"{_flag(flag, theirs) if isinstance(theirs, bool) else theirs}; start every process with the same "
                "command.")
    for path, seen in first["dirs"].items():
      if launch["dirs"].get(path) != seen:
        return (f"process {k} sees {path} {_seen(launch['dirs'].get(path))} where process 0 sees it "
                f"{_seen(seen)}; every process must see the same run directories: put --workdir on a filesystem "
                "that every host shares, at the same path.")
  return None


def _flag(flag: str, value) -> str:
  if isinstance(value, bool):
    return flag if value else f"--no{flag.removeprefix('--')}"
  return f"{flag} {value}"


def _seen(steps: dict | None) -> str:
  if steps is None:
    return "missing"
  if not steps:
    return "without a checkpoint"
  return "with " + ", ".join(f"{folder} at step {step}" for folder, step in steps.items())


def barrier(name: str) -> None:
  """Wait until every process reaches ``name`` (nothing to wait for in a single process)."""
  import jax

  if jax.process_count() > 1:
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)
