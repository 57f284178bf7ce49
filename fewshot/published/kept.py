"""The records the page is built from (``docs/reproductions/``): kept only where each run is its entry's, readable,
and never replaced.

A run folder's place names what it must be (``<entry>/<schedule>/<model>_<arm>/<stage>/seed<k>``,
:mod:`fewshot.published.plan`), and its ``config.json`` must say the same: the entry's options for that model,
schedule and arm (the length aside, which a select run chooses), train + val for a final run, seed ``k``. A run that
is not (a run copied in from elsewhere, or one trained before the entry's options changed) is refused in one line
naming the difference, before anything is copied; so is a record that does not parse, which the page would otherwise
drop without a word.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil

from fewshot.errors import ConfigError
from fewshot.published import plan
from fewshot.published.registry import Entry

RECORD_FILES = ("config.json", "metrics.jsonl", "results.json")
# A run's measurements: evaluate's (test_*.json) and its scores on Lake's runs (plan.LAKE_RECORDS).
MEASUREMENT_PREFIXES = ("test_", "lake_")
_LENGTH = ("episodes", "patience")  # chosen by the stage (a select run's best, a schedule's length), not the entry


def is_record(name: str) -> bool:
  return name in RECORD_FILES or (name.startswith(MEASUREMENT_PREFIXES) and name.endswith(".json"))


def unreadable(path: str) -> str | None:
  """Why a record does not parse (None where it does): a JSON object, or a JSON object per line of ``.jsonl``."""
  try:
    with open(path) as f:
      text = f.read()
    rows = [json.loads(line) for line in text.splitlines() if line.strip()] if path.endswith(".jsonl") else [
        json.loads(text)]
  except (OSError, UnicodeDecodeError, ValueError) as e:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
  return None if all(isinstance(r, dict) for r in rows) else "not a JSON object"


def expected_options(entry: Entry, schedule, model, arm: str, stage: str) -> dict:
  """The options a run of this place trains with, the length aside (JSON values, as ``config.json`` holds them)."""
  options = {k: v for k, v in entry.run_options(model, schedule, arm).items() if k not in _LENGTH}
  if stage == plan.FINAL:
    options["train_splits"] = "train+val"
  return json.loads(json.dumps(options))


def option_differences(config: dict, expected: dict, trains: str) -> list[str]:
  """``--key <recorded> where <trains> trains <expected>`` for each of ``expected``'s options a run's ``config``
  recorded otherwise (values compared as JSON holds them).
  """
  expected = json.loads(json.dumps(expected))
  return [f"--{k} {config.get(k)!r} where {trains} trains {v!r}" for k, v in expected.items() if config.get(k) != v]


def check_run(relative: str, config: dict, entries: dict[str, Entry]) -> None:
  """Refuse, in one line, a run whose folder ``relative`` (to the records) is not a place of a registered entry or
  whose ``config.json`` trained something else than that place names.
  """
  parts = relative.split(os.sep)
  where = f"{relative} is not a run of a registered entry (<entry>/<schedule>/<model>_<arm>/<stage>/seed<k>)"
  if len(parts) != 5 or parts[0] not in entries or not parts[4].startswith("seed") or not parts[4][4:].isdigit():
    raise ConfigError(f"{where}; move it out of the folder kept.")
  entry = entries[parts[0]]
  names = {s.name for s in entry.schedules}
  arms = {f"{m.name}_{h}": (m, h) for m in entry.models for h in entry.arms}
  if parts[1] not in names or parts[2] not in arms or parts[3] not in (plan.SELECT, plan.FINAL):
    raise ConfigError(f"{where}: {entry.name} has no {'/'.join(parts[1:4])}; move it out of the folder kept.")
  model, arm = arms[parts[2]]
  expected = {**expected_options(entry, entry.schedule(parts[1]), model, arm, parts[3]), "seed": int(parts[4][4:])}
  differs = option_differences(config, expected, entry.name)
  if differs:
    raise ConfigError(f"{relative} is not {entry.name}'s run: it trained with {differs[0]}"
                      f"{f' (and {len(differs) - 1} more)' if len(differs) > 1 else ''}; train it again with the "
                      "entry's options, or move it out of the folder kept.")


def keep(out: str, records: str, entries: dict[str, Entry]) -> list[str]:
  """Copy every finished run's records under ``out`` into ``records`` (same layout); returns the run folders
  copied. Every run is checked first (:func:`check_run`, :func:`unreadable`), and a kept record is never replaced by
  another: one that differs is refused in one line, before anything is copied (a seed trained again elsewhere is
  another run, not the kept one).
  """
  if not os.path.isdir(out):
    raise ConfigError(f"--keep {out} is not a folder; pass the --out of the runs made (runs/reproduce by default).")
  copies = []
  for folder, _, files in sorted(os.walk(out)):
    if "config.json" not in files or "results.json" not in files:
      continue
    relative = os.path.relpath(folder, out)
    for name in (n for n in sorted(files) if is_record(n)):
      problem = unreadable(os.path.join(folder, name))
      if problem:
        raise ConfigError(f"{os.path.join(folder, name)} does not parse ({problem}); train or evaluate that run "
                          "again, or move it out of the folder kept.")
    check_run(relative, plan.read_json(os.path.join(folder, "config.json")), entries)
    target = os.path.join(records, relative)
    copies += [(os.path.join(folder, name), os.path.join(target, name)) for name in sorted(files) if is_record(name)]
  for source, kept in copies:
    if os.path.exists(kept) and not filecmp.cmp(source, kept, shallow=False):
      raise ConfigError(f"{kept} is kept and {source} differs from it; a kept record is never replaced: move one of "
                        "them aside (git checkout -- docs/reproductions restores the kept one).")
  for source, kept in copies:
    os.makedirs(os.path.dirname(kept), exist_ok=True)
    if not os.path.exists(kept):
      shutil.copyfile(source, kept)
  return sorted({os.path.dirname(kept) for _, kept in copies})


def check_kept(records: str, entries: dict[str, Entry]) -> None:
  """Refuse, in one line, a kept folder the page cannot stand on: missing, a record that does not parse, or a run
  that is not its entry's (a page built on it would drop a seed or show another run without a word).
  """
  if not os.path.isdir(records):
    raise ConfigError(f"--records {records} is not a folder; pass the folder of kept records (docs/reproductions "
                      "in the checkout).")
  for folder, _, files in sorted(os.walk(records)):
    if "config.json" not in files:
      continue
    for name in (n for n in sorted(files) if is_record(n)):
      problem = unreadable(os.path.join(folder, name))
      if problem:
        raise ConfigError(f"the kept {os.path.join(folder, name)} does not parse ({problem}); restore it (git "
                          "checkout -- docs/reproductions) before building the page.")
    check_run(os.path.relpath(folder, records), plan.read_json(os.path.join(folder, "config.json")), entries)
