"""The runs one training call writes, and the bookkeeping around the loop that both training commands share.

One run, or a seed group's runs (:mod:`fewshot.training.seed_groups`): their configurations, their directories, and
which of them this process writes (all of them on one host; across hosts, those of its own devices). A training
command opens them before JAX loads (:meth:`Runs.open`: bad directories are refused, nothing written); the trainer
(:func:`fewshot.training.trainer.train_runs`) lays them over the devices once the experiment is built
(:meth:`Runs.on`), records their configurations once every process has checked them (:meth:`Runs.begin`, under each
directory's lock: one writer per directory), trains them with :func:`fewshot.training.loop.train_until`, restores
their best checkpoints (:meth:`Runs.restore`) and writes their results (:meth:`Runs.finish`). The experiment
supplies only its chunk, its rows and its test.
"""

from __future__ import annotations

import dataclasses
import pathlib

from fewshot.options import EXTENDABLE_FIELDS
from fewshot.records import events, writer_lock
from fewshot.records.reuse import check_for_training, check_same_data, open_group_for_training, record_config
from fewshot.records.rundir import RunDir
from fewshot.training import distributed


@dataclasses.dataclass(frozen=True)
class Runs:
  """The runs of one training call; ``group`` is None for one run, else the seed group they form on the devices."""

  dirs: tuple[RunDir, ...]  # every run's directory, in the order of its seeds
  configs: tuple = ()  # every run's configuration, in the same order (what begin records)
  group: object | None = None  # a fewshot.training.seed_groups.SeedGroup (imported with JAX, so not named here)
  resume: bool = False  # whether the runs were opened to continue (checked again under each directory's lock)

  @classmethod
  def open(cls, config, seeds: tuple[int, ...] | None, workdirs: list[str], resume: bool,
           checkpoint_every: int | None = None) -> Runs:
    """The runs of ``config`` (under each of ``seeds``, or its own seed), run k in ``workdirs[k]``; a directory
    that holds another run, or a group whose runs stopped at different checkpoints (other than one checkpoint of
    ``checkpoint_every`` steps apart, a stop between their saves), is refused whole (nothing is written, and JAX is not
    loaded).
    """
    configs = [config] if seeds is None else [config.with_seed(s) for s in seeds]
    dirs = open_group_for_training(workdirs, configs, resume, checkpoint_every)
    return cls(tuple(dirs), tuple(configs), resume=resume)

  def completed(self) -> list[dict] | None:
    """Every run's results where each was trained and tested as configured (``results.json``, the recorded length
    the configuration's): a ``--resume`` then has nothing left to do. None where any run is not complete.
    """
    results = []
    for rundir, config in zip(self.dirs, self.configs):
      done = rundir.read_results() if rundir.holds_run() else None
      saved = rundir.read_config() if done is not None else {}
      if done is None or any(saved.get(f) != getattr(config, f, None) for f in EXTENDABLE_FIELDS):
        return None
      results.append(done)
    return results

  def extensions(self) -> list[str]:
    """How a resume changes the first written run's :data:`EXTENDABLE_FIELDS` (``--episodes 400 (was 200)``), read
    before its configuration is written again.
    """
    rundir, config = self.written_dirs[0], self.configs[self.written[0]]
    saved = rundir.read_config() if self.resume and rundir.holds_run() else {}
    said = lambda value: "none" if value is None else value  # noqa: E731
    return [f"--{f} {said(getattr(config, f, None))} (was {said(saved.get(f))})" for f in EXTENDABLE_FIELDS
            if f in saved and saved.get(f) != getattr(config, f, None)]

  def on(self, group) -> Runs:
    """These runs laid out as ``group`` (a seed group's layout on the devices; None for one run)."""
    return dataclasses.replace(self, group=group)

  def under(self, folder: str | None) -> Runs:
    """The same runs writing into ``<run directory>/<folder>`` (a metric-learning fold model's), or as they are."""
    if folder is None:
      return self
    return dataclasses.replace(self, dirs=tuple(RunDir(pathlib.Path(d.path) / folder) for d in self.dirs))

  @property
  def written(self) -> tuple[int, ...]:
    """Positions on the run axis of the runs this process writes: the one run, or its own runs of a group."""
    return (0,) if self.group is None else tuple(self.group.local_runs())

  @property
  def written_dirs(self) -> tuple[RunDir, ...]:
    return tuple(self.dirs[i] for i in self.written)

  def begin(self, **recorded) -> None:
    """Write each of this process's runs' configuration (with ``recorded`` beside its options), once every process
    has checked the whole group's directories.
    """
    distributed.barrier("fewshot: every process checked the group's run directories")  # before any is written
    for i in self.written:
      # One writer per directory; checked again under its lock, since another command may have written it since open.
      writer_lock.hold(self.dirs[i].path)
      check_for_training(self.dirs[i].path, self.configs[i], self.resume)
      if "data" in recorded and self.resume:  # a new run in a directory of one that never trained may take any data
        check_same_data(self.dirs[i], recorded["data"])
      record_config(self.dirs[i], {**self.configs[i].to_dict(), **recorded})

  def states(self, tree) -> list:
    """Each written run's part of a value held the state's way: the value itself for one run, else its slices."""
    if self.group is None:
      return [tree]
    from fewshot.training import seed_groups

    return seed_groups.each_run(tree, self.group, self.written)

  def join(self, states: list):
    """The value of every run from those of the written runs, held the state's way (a padding run, or another
    process's, repeats the last: every process writes at least one run, :meth:`SeedGroup.check_processes`).
    """
    if self.group is None:
      return states[0]
    by_index = dict(zip(self.written, states))
    return self.group.stack([by_index.get(i, states[-1]) for i in range(self.group.size)])

  def restore(self, kind: str, like):
    """Every written run's ``kind`` checkpoint, in the structure of ``like`` (held the state's way)."""
    return self.join([d.checkpoints.restore(kind, s) for d, s in zip(self.written_dirs, self.states(like))])

  def finish(self, results: list[dict]) -> list[dict | None]:
    """Write each written run's ``results`` (in the order of :attr:`written`) with its ``workdir``, and show them in
    its TensorBoard events with its options; returns every run's results in seed order, None for the runs another
    process writes.
    """
    out = [None] * len(self.dirs)
    for i, result in zip(self.written, results):
      out[i] = {**result, "workdir": str(self.dirs[i].path)}
      self.dirs[i].write_results(out[i])
      events.write_results(self.dirs[i].path, self.configs[i].to_dict(), result, result.get("best_episode"))
      writer_lock.release(self.dirs[i].path)
    return out
