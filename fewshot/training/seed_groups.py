"""Seed groups: runs of one configuration that differ only in their seed, trained as one compiled program.

A group's train state, keys and outputs carry a leading run axis; the compiled chunk is the
single run's, ``vmap``-ed over that axis (:func:`fewshot.episodic.learning.train_chunk`). The run axis
is sharded over the available devices (a ``jax.sharding.Mesh`` with one axis, ``runs``), each
device holding its runs' state and its own copy of a resident split; across hosts, after
``jax.distributed.initialize()``, each process holds the runs of its devices. A group whose
size does not divide over the devices is padded with copies of its last run, which train
along and are never written (:attr:`SeedGroup.size`).
(``--seeds`` itself is parsed by :func:`fewshot.training.run_flags.parse_seeds`.)
"""

from __future__ import annotations

import dataclasses
import os

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from fewshot.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class SeedGroup:
  """Where a group's runs live: the run axis sharded over ``mesh``, everything else replicated."""

  mesh: Mesh
  num_runs: int  # the group's own runs; the rest of `size` is padding

  @classmethod
  def over(cls, num_runs: int, devices=None) -> SeedGroup:
    devices = jax.devices() if devices is None else list(devices)
    return cls(Mesh(np.array(devices), ("runs",)), num_runs)

  @property
  def num_devices(self) -> int:
    return self.mesh.devices.size

  @property
  def size(self) -> int:
    """The run axis: the group padded to a multiple of the devices."""
    return -(-self.num_runs // self.num_devices) * self.num_devices

  @property
  def replicated(self) -> NamedSharding:
    return NamedSharding(self.mesh, PartitionSpec())

  @property
  def runs(self) -> NamedSharding:
    return NamedSharding(self.mesh, PartitionSpec("runs"))

  def pad(self, items: list) -> list:
    """``items`` (one per run) padded to :attr:`size` with copies of the last."""
    return list(items) + [items[-1]] * (self.size - len(items))

  def stack(self, trees: list):
    """Per-run pytrees (padded to :attr:`size`) stacked on a leading run axis, sharded over the devices.

    Each device stacks the runs it holds; across processes, each supplies its own devices' runs (the others'
    entries of ``trees`` are never read, so a process may pass anything of the right structure there).
    """
    per_device, devices = self.size // self.num_devices, list(self.mesh.devices.flat)
    held = [(device, devices.index(device)) for device in self.mesh.local_devices]

    def stacked(*leaves):
      shards = [_stack_on(leaves[k * per_device:(k + 1) * per_device], device) for device, k in held]
      return jax.make_array_from_single_device_arrays((self.size, *jnp.shape(leaves[0])), self.runs, shards)

    return jax.tree.map(stacked, *self.pad(trees))

  def held(self, process: int | None = None) -> list[int]:
    """Positions on the run axis whose state a process (default this one) holds, padding included."""
    process = jax.process_index() if process is None else process
    per_device = self.size // self.num_devices
    return [i for i in range(self.size) if self.mesh.devices.flat[i // per_device].process_index == process]

  def local_runs(self) -> list[int]:
    """The group's runs whose state this process holds (all of them on one host); padding excluded."""
    return [i for i in self.held() if i < self.num_runs]

  def check_processes(self) -> None:
    """Refuse, in one line, a group that leaves a process padding only: it would hold no run to resume from."""
    processes = sorted({d.process_index for d in self.mesh.devices.flat})
    empty = [p for p in processes if not any(i < self.num_runs for i in self.held(p))]
    if empty:
      enough = next(r for r in range(self.num_runs + 1, self.num_runs + self.num_devices + 1)
                    if all(any(i < r for i in dataclasses.replace(self, num_runs=r).held(p)) for p in processes))
      raise ConfigError(f"a group of {self.num_runs} runs over {len(processes)} processes ({self.num_devices} devices, "
                        f"consecutive runs on each) leaves process {empty[0]} with padding only; pass at least {enough} "
                        "seeds, or use fewer processes.")


def _stack_on(leaves, device):
  """Leaves stacked on ``device`` (runs unstacked from a group live on their own devices)."""
  return jnp.stack([jax.device_put(leaf, device) for leaf in leaves])


def local_step(step) -> int:
  """Steps trained, read from the first run this process holds (a group's runs train in step)."""
  shards = getattr(step, "addressable_shards", None)
  return int(np.asarray(shards[0].data if shards else step).ravel()[0])


def local_numpy(array) -> np.ndarray:
  """A group's array in host memory as far as this process holds it: the other processes' runs are zeros.

  With one process this is the whole array.
  """
  if getattr(array, "is_fully_addressable", True):
    return np.asarray(array)
  out = np.zeros(array.shape, array.dtype)
  for shard in array.addressable_shards:
    out[shard.index] = np.asarray(shard.data)
  return out


def device_memory_limit(device) -> int | None:
  """The bytes a device can hold, where it reports them (GPUs and TPUs do; the CPU does not)."""
  stats = device.memory_stats() if hasattr(device, "memory_stats") else None
  return None if not stats else stats.get("bytes_limit")


def host_memory_available() -> int | None:
  """The bytes of host memory free for a new program (what the CPU devices share), where the system says."""
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  try:
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
  except (AttributeError, ValueError, OSError):
    return None


def step_bytes(lowered) -> int:
  """Memory of one run's training step (its state, batch, outputs and temporaries), from its compiled program."""
  memory = lowered.compile().memory_analysis()
  return int(memory.argument_size_in_bytes + memory.output_size_in_bytes + memory.temp_size_in_bytes)


def step_bytes_bound(lowered) -> int | None:
  """A bound on :func:`step_bytes` without compiling (a second instead of ten): every byte the unoptimised
  program reads or writes, which its peak memory stays well under (~19 times for Conv4 on 28 px episodes); None where
  XLA does not say.
  """
  accessed = (program_cost(lowered) or {}).get("bytes accessed")
  return int(accessed) if accessed else None


def program_cost(lowered) -> dict | None:
  """XLA's cost analysis of a lowered, uncompiled program (``flops``, ``bytes accessed``); None where XLA does not say.

  A GPU's plugin (PJRT's C API) has no analysis of an uncompiled program, so there the same unoptimised module is
  analysed by the CPU's client: the counts are of the program, not of the backend that will run it.
  """
  try:
    cost = lowered.cost_analysis()
  except NotImplementedError:
    cost = None
  cost = cost[0] if isinstance(cost, (list, tuple)) and cost else cost
  if cost:
    return cost
  try:  # jax's internal route to that analysis: where it moves, the caller compiles instead
    from jax._src.lib import _jax

    return _jax.hlo_module_cost_analysis(jax.extend.backend.get_backend("cpu"), lowered._lowering.hlo().as_hlo_module())
  except Exception:  # noqa: BLE001 (any failure means no bound, never a wrong one)
    return None


def state_bytes(lowered) -> int:
  """The bytes of a lowered step's first argument: one run's train state."""
  return sum(int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize
             for leaf in jax.tree.leaves(lowered.args_info[0][0], is_leaf=lambda x: hasattr(x, "shape")))


def check_memory(group: SeedGroup, lowered, shared_bytes: int, run_fix: str | None = None) -> None:
  """Refuse, in one line with the estimate and the largest group that fits, a group too large for the memory.

  ``lowered`` is one run's training step lowered on ``(state, batch, ...)``; each device holds its runs and
  ``shared_bytes`` (its copy of the resident splits). An accelerator that reports its memory is checked against
  its own; on the CPU, where every device shares the host's memory, a run also holds a copy of its state (built,
  then stacked; saved from the host). Either way the step is compiled, to read its size, only where a bound
  (:func:`step_bytes_bound`) does not already fit. ``run_fix`` is what a single run too large is told to change
  (its batch, say).
  """
  device = group.mesh.local_devices[0]
  runs_per_device = group.size // group.num_devices
  limit = device_memory_limit(device)
  if limit is not None:
    bound = step_bytes_bound(lowered)
    if bound is not None and runs_per_device * bound + shared_bytes <= limit:
      return
    _refuse_over(group, runs_per_device, step_bytes(lowered), shared_bytes, limit,
                 f"on each of {group.num_devices} {device.platform} device(s)", "one holds", "more devices", run_fix)
    return
  limit = host_memory_available() if device.platform == "cpu" else None
  if limit is None:
    return
  local = len(group.mesh.local_devices)
  bound = step_bytes_bound(lowered)
  if bound is not None and local * (runs_per_device * (bound + state_bytes(lowered)) + shared_bytes) <= limit:
    return
  _refuse_over(group, runs_per_device * local, step_bytes(lowered) + state_bytes(lowered), shared_bytes * local,
               limit, f"of host memory on this process's {local} CPU device(s)", "the host has", "more hosts",
               run_fix, per_device=local)


def _refuse_over(group: SeedGroup, runs: int, per_run: int, shared: int, limit: int, where: str, holds: str,
                 more: str, run_fix: str | None, per_device: int = 1) -> None:
  """Refuse ``runs`` runs of ``per_run`` bytes and ``shared`` bytes of data in ``limit`` bytes, naming the
  largest group that fits (``per_device``: devices that share the limit).
  """
  need = runs * per_run + shared
  if need <= limit:
    return
  fits = max(0, (limit - shared) // max(per_run * per_device, 1)) * group.num_devices
  fix = f"use at most {fits} seeds, or {more}" if fits else f"no run fits beside the data; use {more}"
  gib = 2**30
  if group.num_runs == 1 and run_fix:
    raise ConfigError(f"the run needs about {need / gib:.1f} GiB {where} ({per_run / gib:.2f} GiB for a training "
                      f"step + {shared / gib:.2f} GiB of data) but {holds} {limit / gib:.1f} GiB available; {run_fix}.")
  raise ConfigError(f"a group of {group.num_runs} runs needs about {need / gib:.1f} GiB {where} ({runs} runs x "
                    f"{per_run / gib:.2f} GiB + {shared / gib:.2f} GiB of data) but {holds} {limit / gib:.1f} GiB "
                    f"available; {fix}.")


def form(seeds: tuple[int, ...] | None, own_seed: int, lower, shared_bytes: int,
         run_fix: str | None = None) -> tuple[SeedGroup | None, tuple[int, ...]]:
  """The runs' layout: for ``seeds``, a seed group over the devices, checked against the processes and the memory
  (:func:`check_memory`), and its seeds padded to the run axis; for None, one run of ``own_seed``, checked against
  the memory only where ``run_fix`` says what a run too large should change. ``lower()`` lowers one run's training
  step, called only where a check needs it (lowering takes a second).
  """
  if seeds is None:
    if run_fix is not None:
      check_memory(SeedGroup.over(1, jax.local_devices()[:1]), lower(), shared_bytes, run_fix)
    return None, (own_seed,)
  group = SeedGroup.over(len(seeds))
  group.check_processes()
  check_memory(group, lower(), shared_bytes, run_fix)
  return group, tuple(group.pad(list(seeds)))


def each_run(tree, group: SeedGroup | None, written: tuple[int, ...]) -> list:
  """Each written run's part of a value held the state's way: the value itself for one run, else its slices."""
  return [tree] if group is None else [unstack(tree, i) for i in written]


def unstack(tree, index: int):
  """Run ``index`` of a stacked pytree (a slice of the run axis), on the device that holds it.

  Read from that device's shard: indexing the sharded array would compile a gather whose collectives across
  the devices can deadlock XLA's CPU runtime under load, and would need every process's devices.
  """
  def take(leaf):
    for shard in getattr(leaf, "addressable_shards", ()):
      rows = range(leaf.shape[0])[shard.index[0]] if shard.index else range(leaf.shape[0])
      if index in rows:
        return shard.data[index - rows.start]
    return leaf[index]  # not a jax.Array (or not held here: indexing says so)

  return jax.tree.map(take, tree)
