"""Several processes (hosts) training one seed group: ``jax.distributed`` set up from three flags.

Launch the same command on every host, each with its own ``--process_id``::

  python -m fewshot.train ... --seeds 0-15 --coordinator_address host0:1234 --num_processes 4 --process_id K

The group's run axis is then sharded over the devices of every process (:class:`fewshot.training.seed_groups.SeedGroup`),
each process holds the runs of its own devices and writes their run directories; the run directories must
be on a filesystem that every host sees (each process checks the whole group's before any is written).
On the CPU the processes exchange collectives through gloo.
"""

from __future__ import annotations

import dataclasses

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
      if ":" not in self.coordinator_address:
        raise ConfigError(f"--coordinator_address {self.coordinator_address!r} is not HOST:PORT; pass e.g. "
                          "host0:1234, the address of process 0.")
      if self.num_processes < 1 or not 0 <= self.process_id < self.num_processes:
        raise ConfigError(f"--process_id {self.process_id} is not one of the {self.num_processes} processes; pass "
                          f"0 to {self.num_processes - 1}.")

  @property
  def several(self) -> bool:
    return self.coordinator_address is not None and self.num_processes > 1

  def initialize(self) -> None:
    """Join the other processes (returns once every process has): ``jax.distributed.initialize`` with gloo for
    the CPU's collectives (GPUs and TPUs use their own).
    """
    if not self.several:
      return
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(self.coordinator_address, num_processes=self.num_processes,
                               process_id=self.process_id)


def barrier(name: str) -> None:
  """Wait until every process reaches ``name`` (nothing to wait for in a single process)."""
  import jax

  if jax.process_count() > 1:
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)
