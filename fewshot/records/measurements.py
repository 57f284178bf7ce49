"""Where ``python -m fewshot.evaluate`` writes a measurement: one file name per set of options, so none is overwritten.

``test_<checkpoint>@<its episode>_<N>ep[_cached | _both[_cached<M>ep]][_way<W>][_shot<S>][_query<Q>][_shifts<S>]
[_seed<K>].json``: the checkpoint and the episode it was saved at, the episodes tested, then only the options that
differ from the run's own (:data:`NAMED_OPTIONS`).

    >>> measurement_name({"test_way": 5, "shot": 1}, {"test_way": 20, "shot": 1}, "best", 900, 1000)
    'test_best@900_1000ep_way20.json'
"""

from __future__ import annotations

from fewshot.errors import RunDirError
from fewshot.records.reuse import data_differences, said_data

# The test episode's options a measurement may change, and their short names in its file's name.
NAMED_OPTIONS = (("test_way", "way"), ("shot", "shot"), ("test_query", "query"), ("test_shifts", "shifts"),
                 ("seed", "seed"))


def measurement_name(run: dict, used: dict, checkpoint: str, step: int, episodes: int, test_by: str = "episode",
                     cached: int | None = None) -> str:
  """The file of a measurement of ``checkpoint`` (saved at ``step``) over ``episodes`` episodes with the options
  ``used`` (a mapping of :data:`NAMED_OPTIONS`' fields) of a run whose own are ``run``.
  """
  parts = [f"test_{checkpoint}@{step}", f"{cached if test_by == 'cached' else episodes}ep"]
  if test_by != "episode":
    parts.append(test_by + (f"_cached{cached}ep" if test_by == "both" and cached != episodes else ""))
  for field, short in NAMED_OPTIONS:
    if used.get(field, run.get(field)) != run.get(field):
      parts.append(f"{short}{used[field]}")
  return "_".join(parts) + ".json"


def record_name(run, used, checkpoint: str, step: int, test_by: str, cached: int) -> str:
  """:func:`measurement_name` of two configurations (the run's and the one tested)."""
  fields = [field for field, _ in NAMED_OPTIONS]
  return measurement_name({f: getattr(run, f) for f in fields}, {f: getattr(used, f) for f in fields}, checkpoint,
                          step, used.test_episodes, test_by, cached)


# What a re-test reads of the data a run recorded: its test split, the files and the class lists.
TESTED_DATA = ("test", "files", "class_lists_sha256")


def check_measured_data(run, data: dict, data_dir: str | None, keys: tuple[str, ...] = TESTED_DATA) -> None:
  """A one-line ``RunDirError`` where a re-test of ``run`` (a :class:`~fewshot.records.rundir.RunDir`) would read
  ``data`` (:func:`fewshot.training.provenance.data_record`) other than the run recorded in ``keys``: the
  measurement would stand beside the run's own as if of the same test split. ``--data_dir`` is for a run's data
  moved elsewhere. The record holds each split's counts, the files' names and the lists' SHA-256, so other
  characters in same-named files, split to the same counts, go unseen.
  """
  record = run.read_config()
  differ = data_differences(record.get("data"), data, keys)
  if differ:
    key = differ[0]
    raise RunDirError(f"{run.path} was trained and tested on data whose {key} was {said_data(record['data'].get(key))}"
                      f", but --data_dir {data_dir} yields {said_data(data.get(key))}; "
                      "a re-test reads the run's own data (--data_dir is for that data moved elsewhere): pass "
                      f"--data_dir {record.get('data_dir')}, or train a run on the other data.")
