"""What the reproduction scripts share: run a list of configurations resumably, write the summary."""

from __future__ import annotations

import pathlib
from typing import Callable, Hashable

from fewshot.rundir import RunDir


def run_all(runs: dict[Hashable, tuple[str, object]], out: pathlib.Path, train: Callable) -> dict:
  """Train each ``key -> (name, config)`` in ``out/name``; a run with a results.json is read back, not retrained."""
  results = {}
  for i, (key, (name, config)) in enumerate(runs.items(), 1):
    workdir = out / name
    done = RunDir(workdir).read_results() if (workdir / "results.json").exists() else None
    print(f"[{i}/{len(runs)}] {name}: " + ("done, skipped" if done else "training"), flush=True)
    # resume=True continues an interrupted run and starts an absent one afresh.
    results[key] = done or train(config, str(workdir), resume=True, progress=False)
  return results


def write_summary(out: pathlib.Path, summary: str) -> str:
  out.mkdir(parents=True, exist_ok=True)
  (out / "summary.md").write_text(summary)
  print(summary)
  print(f"wrote {out / 'summary.md'}")
  return summary
