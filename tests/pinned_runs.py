"""Short runs whose records are pinned bit for bit: a restructuring must not change a result.

Each run is a command line of the toolkit; its pin is the run directory's ``metrics.jsonl``
rows and ``results.json``, less what a rerun may change (wall-clock ``seconds``, the
``workdir`` path). Floats compare exactly, so a pin holds on the machine and JAX build it
was recorded on (the ``fingerprint``); elsewhere XLA may round differently.

  python tests/pinned_runs.py --record    # rewrite tests/pins/*.json from the current code
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import platform
import subprocess
import sys
import tempfile

PINS = pathlib.Path(__file__).resolve().parent / "pins"
VOLATILE = ("seconds", "workdir")
FEWSHOT = ["--dataset", "strokes", "--episodes", "30", "--eval_every", "10", "--val_episodes", "10",
           "--test_episodes", "20"]
RUNS = {
    # A few-shot run with its diagnostics (every row), under the DR head so theta moves.
    "fewshot_dr": ["fewshot.train", *FEWSHOT, "--head", "dr", "--way", "5", "--shot", "1"],
    # The host-streamed path, 1-NN 2-shot.
    "fewshot_host": ["fewshot.train", *FEWSHOT, "--placement", "host", "--classifier", "nn", "--shot", "2",
                     "--query", "5", "--test_query", "5"],
    # Four DML fold models, separated and concatenated results.
    "dml_folds4": ["fewshot.dml.train", "--dataset", "strokes", "--folds", "4", "--loss", "triplet", "--miner",
                   "semi_hard", "--embedding_dim", "16", "--classes", "4", "--per_class", "2",
                   "--steps_per_epoch", "5", "--epochs", "2"],
}


def fingerprint() -> dict:
  """What decides float rounding: the JAX build, the machine and its CPU's instruction sets."""
  import jax
  import jaxlib

  cpu = pathlib.Path("/proc/cpuinfo").read_text() if pathlib.Path("/proc/cpuinfo").exists() else ""
  flags = next((line for line in cpu.splitlines() if line.startswith("flags")), "")
  model = next((line.split(":", 1)[1].strip() for line in cpu.splitlines() if line.startswith("model name")), "")
  return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "machine": platform.machine(), "cpu": model,
          "cpu_flags_sha1": hashlib.sha1(flags.encode()).hexdigest(), "backend": jax.default_backend()}


def _elsewhere(recorded: dict) -> str:
  """Why a difference may be the machine's, not the code's: the fingerprint's fields that differ from the pin's."""
  changed = [k for k, v in fingerprint().items() if recorded.get(k) != v]
  if not changed:
    return ""
  return (f" (pinned where {', '.join(changed)} differed: XLA may round otherwise on this machine; compare with the "
          "previous commit's records made here)")


def _stable(record: dict) -> dict:
  return {k: v for k, v in record.items() if k not in VOLATILE}


def records(workdir: pathlib.Path) -> dict:
  """Every metrics.jsonl (rows) and results.json under ``workdir``, keyed by relative path."""
  out = {}
  for path in sorted(workdir.rglob("metrics.jsonl")):
    out[str(path.relative_to(workdir))] = [_stable(json.loads(line)) for line in path.read_text().splitlines()]
  out["results.json"] = _stable(json.loads((workdir / "results.json").read_text()))
  return out


def run(name: str, workdir: pathlib.Path) -> dict:
  """Run one pinned command into ``workdir`` and return its records."""
  module, *args = RUNS[name]
  done = subprocess.run([sys.executable, "-m", module, *args, "--workdir", str(workdir)], capture_output=True,
                        text=True, cwd=pathlib.Path(__file__).resolve().parents[1])
  if done.returncode != 0:
    raise RuntimeError(f"{name} failed ({done.returncode}): {done.stderr[-2000:]}")
  return records(workdir)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--record", action="store_true", help="rewrite the pins from the current code")
  parser.add_argument("--runs", default=",".join(RUNS))
  args = parser.parse_args()
  PINS.mkdir(exist_ok=True)
  for name in args.runs.split(","):
    with tempfile.TemporaryDirectory() as tmp:
      got = run(name, pathlib.Path(tmp) / "run")
    pin = {"command": RUNS[name], "fingerprint": fingerprint(), "records": got}
    if args.record:
      (PINS / f"{name}.json").write_text(json.dumps(pin, indent=1) + "\n")
      print(f"recorded {name}")
    else:
      saved = json.loads((PINS / f"{name}.json").read_text())
      print(name, "identical" if saved["records"] == got else "DIFFERENT" + _elsewhere(saved["fingerprint"]))


if __name__ == "__main__":
  main()
