"""What the reproduction scripts share: run a list of configurations resumably, write the summary."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Callable, Hashable

import jax

from fewshot.errors import RunDirError
from fewshot.options import LOCATION_FIELDS
from fewshot.records.rundir import RunDir


def finished_results(workdir: pathlib.Path, config) -> dict | None:
  """The results of a finished run of ``config`` in ``workdir``, None if unfinished; refuses another run's.

  Run names need not name every option (reality_check's are the loss alone), so a finished run of
  another configuration (a --smoke run, another --backbone) would otherwise be reported as this one.
  """
  rundir = RunDir(workdir)
  if not (workdir / "results.json").exists():
    return None
  changed = rundir.differences(config, ignore=LOCATION_FIELDS)
  if changed:
    raise RunDirError(f"{workdir} holds a finished run that differs in {', '.join('--' + c for c in changed)}; "
                      "choose another --out or repeat that grid's options.")
  return rundir.read_results()


def run_all(runs: dict[Hashable, tuple[str, object]], out: pathlib.Path, train: Callable) -> dict:
  """Train each ``key -> (name, config)`` in ``out/name``; a run with a results.json is read back, not retrained."""
  results = {}
  for i, (key, (name, config)) in enumerate(runs.items(), 1):
    workdir = out / name
    done = finished_results(workdir, config)
    print(f"[{i}/{len(runs)}] {name}: " + ("done, skipped" if done else "training"), flush=True)
    # An interrupted run continues; an absent one starts afresh.
    results[key] = done or train(config, str(workdir), resume=RunDir(workdir).holds_run(), progress=False)
    release_compiled_programs()
  return results


def run_groups(configs: list, seeds: tuple[int, ...], out: pathlib.Path, train_group: Callable) -> dict:
  """Train each config as a seed group, run k in ``out/<run name of seed k>``; a group whose runs all have
  results is read back, not retrained. Returns ``{config: [results of each seed]}``.
  """
  results = {}
  for i, config in enumerate(configs, 1):
    members = [dataclasses.replace(config, seed=s) for s in seeds]
    workdirs = [out / m.run_name for m in members]
    done = [finished_results(w, m) for w, m in zip(workdirs, members)]
    name = members[0].run_name.rsplit("_seed", 1)[0]
    print(f"[{i}/{len(configs)}] {name} x{len(seeds)} seeds: " + ("done, skipped" if all(done) else "training"),
          flush=True)
    resume = any(RunDir(w).holds_run() for w in workdirs)
    results[config] = done if all(done) else train_group(config, seeds, [str(w) for w in workdirs], resume=resume,
                                                         progress=False)
    release_compiled_programs()
  return results


def release_compiled_programs() -> None:
  """Drops the finished configuration's compiled programs. JAX keeps a program per learner for the life of the
  process, and XLA:CPU maps each program's kernels into memory maps of their own (a process that had trained one
  Conv4 arm of 5 seeds and begun the next held about 3,600): a grid of a few dozen configurations in one process
  would reach the kernel's limit of maps per process (``vm.max_map_count``, 65,530 by default), where the next
  compile dies of a segmentation fault.
  """
  jax.clear_caches()


def write_summary(out: pathlib.Path, summary: str) -> str:
  out.mkdir(parents=True, exist_ok=True)
  (out / "summary.md").write_text(summary)
  print(summary)
  print(f"wrote {out / 'summary.md'}")
  return summary
