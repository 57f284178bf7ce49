"""One command that checks fewshot on the machine it runs on (a GPU's, above all) and writes what it saw.

  python -m benchmarks.device_check --out DIR          # about 8 minutes on one H100
  python -m benchmarks.device_check --out DIR --smoke  # the same steps, small, in a few minutes on a CPU

Each step runs as its own subprocess, with a time limit, so one that fails or hangs leaves the others' figures:

1. the backend, devices and versions (``fewshot.training.provenance``);
2. the numerics-sensitive tests on this backend (the numerics policy, distances, heads, diagnostics, backbones,
   the DML losses' values and gradients against float64);
3. the main command, ``python -m fewshot.train --way 5 --shot 1 --head dr``, its wall time and test accuracy;
4. ``benchmarks.bench_episodes`` at 28 and 84 px under every ``--precision`` (the eager PyTorch twin beside it where
   torch sees the device), with each precision's share of the matrix-product peak;
5. ``benchmarks.bench_runs``: seed groups of 1, 8 and 32 runs against the same runs one after another, with the
   backbone's convolutions as ``lax`` ones (``vmap`` makes each one grouped convolution) and, at 84×84, in the other
   forms of :mod:`fewshot.convolutions` (im2col: batched matrix products; map: dense convolutions mapped over the
   runs; im2col_grad: lax with im2col's kernel gradient): which fills a GPU is what this step is for, and its winner
   per backend is what ``fewshot.convolutions.AUTO`` is to say.

It writes ``DIR/device_check.md`` (a table per step, then what an accelerator must show and whether it did) and
``DIR/device_check.json`` (every figure), and each step's output beside them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
NUMERICS_TESTS = ["tests/test_numerics.py", "tests/test_distances.py", "tests/test_head_distances.py",
                  "tests/test_heads.py", "tests/test_backbones.py", "tests/episodic/test_diagnostics.py",
                  "tests/dml/losses", "tests/dml/test_metrics.py"]
GROUP_GAIN_NEEDED = 2.0  # what a seed group of 8-32 runs must give at 84x84 on an accelerator (issue 28)


def steps(out: pathlib.Path, smoke: bool) -> dict[str, list[str]]:
  """Each step's command line (run from the repository's root)."""
  python = [sys.executable, "-m"]
  main = ["--episodes=20", "--eval_every=10", "--val_episodes=5", "--test_episodes=20"] if smoke else []
  bench = ["--repeats=1", "--episodes=2", "--no-loop"] if smoke else ["--repeats=5"]
  groups = "1,2" if smoke else "1,8,32"
  parallel = [] if importlib.util.find_spec("xdist") is None else ["-n", "4"]
  return {
      "provenance": [sys.executable, "-c", "import json; from fewshot.training import provenance; "
                     "print(json.dumps({**provenance.provenance(), 'devices': provenance.devices()}))"],
      # In one process they outran 110 s on an H100 (compilation): four processes where pytest-xdist is installed.
      "numerics tests": [*python, "pytest", "-q", "-p", "no:cacheprovider", *parallel, *NUMERICS_TESTS],
      "main command": [*python, "fewshot.train", "--way=5", "--shot=1", "--head=dr", f"--workdir={out / 'main_run'}",
                       *main],
      "bench_episodes": [*python, "benchmarks.bench_episodes", "--sizes=28,84", "--heads=dr", "--torch",
                         "--precisions=float32,tensorfloat32,bfloat16", f"--json={out / 'bench_episodes.json'}",
                         *bench],
      "bench_runs": [*python, "benchmarks.bench_runs", "--sizes=28,84", "--heads=dr", f"--groups={groups}",
                     "--repeats=1" if smoke else "--repeats=3", f"--json={out / 'bench_runs.json'}"],
      # 84 px is where the forms differ on a GPU; the smoke run only shows the step works (28 px: minutes on a CPU).
      "bench_runs forms": [*python, "benchmarks.bench_runs", f"--sizes={28 if smoke else 84}", "--heads=dr",
                           "--conv=im2col,map,im2col_grad", f"--groups={groups.split(',', 1)[1]}",
                           *(["--repeats=1", "--episodes=2"] if smoke else ["--repeats=3"]),
                           f"--json={out / 'bench_runs_forms.json'}"],
  }


def run_step(name: str, command: list[str], out: pathlib.Path, timeout: float) -> dict:
  """Run one step, its output to ``out/<name>.log``; its exit status, seconds and output's last lines."""
  log = out / f"{name.replace(' ', '_')}.log"
  start = time.perf_counter()
  try:
    # Each process takes the device memory it uses, not 75% of it: the steps' programs run side by side.
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)
    status, text = done.returncode, done.stdout + done.stderr
  except subprocess.TimeoutExpired as e:
    status = "timed out"
    text = "".join(part.decode() if isinstance(part, bytes) else (part or "") for part in (e.stdout, e.stderr))
  log.write_text(text)
  print(f"device_check: {name}: {status} in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
  return {"command": command, "status": status, "seconds": time.perf_counter() - start, "tail": text[-4000:]}


def read_json(path: pathlib.Path):
  try:
    return json.loads(path.read_text())
  except (OSError, ValueError):
    return None


def findings(results: dict, out: pathlib.Path) -> dict:
  """The figures each step produced, read from its output."""
  found = {"provenance": None, "numerics": None, "main": None, "episodes": read_json(out / "bench_episodes.json"),
           "runs": (read_json(out / "bench_runs.json") or []) + (read_json(out / "bench_runs_forms.json") or [])}
  lines = results.get("provenance", {}).get("tail", "").strip().splitlines()
  found["provenance"] = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None
  summary = re.findall(r"^=*\s*(.*(?:passed|failed).*?)\s*=*$", results.get("numerics tests", {}).get("tail", ""),
                       re.MULTILINE)
  found["numerics"] = summary[-1] if summary else None
  accuracy = re.search(r"test accuracy ([0-9.]+)% ± ([0-9.]+)%", results.get("main command", {}).get("tail", ""))
  if accuracy:
    found["main"] = {"accuracy": float(accuracy[1]), "ci95": float(accuracy[2]),
                     "seconds": results["main command"]["seconds"]}
  return found


def verdicts(found: dict, backend: str) -> list[tuple[str, str]]:
  """What an accelerator run must show, each with what this run showed."""
  numerics = found["numerics"] or "did not finish"
  green = "failed" not in numerics and "passed" in numerics and "error" not in numerics
  gains = [(r["group_vs_sequential"], r["runs"], r["conv"]) for r in found["runs"] if r["size"] == 84
           and r["runs"] >= 8]
  if gains:
    best, runs, conv = max(gains)
    group = f"best {best:.2f}× ({runs} runs, conv {conv}; {'met' if best >= GROUP_GAIN_NEEDED else 'NOT met'})"
  else:
    group = "not measured"
  if backend == "cpu":
    group += "; a CPU is not held to it"
  return [("the numerics-sensitive tests pass on this backend", f"{numerics} ({'met' if green else 'NOT met'})"),
          (f"a seed group of 8-32 runs at 84×84 trains ≥ {GROUP_GAIN_NEEDED:.0f}× the episodes/s of the same runs one "
           "after another", group)]


FORM_MARGIN = 1.05  # a form replaces lax as --conv auto's choice only where its group is this much faster


def form_winners(runs: list[dict], precision: str = "float32") -> dict[int, tuple[str, float]]:
  """Per episode side, the convolution form ``--conv auto`` should take on the measured backend, with its group
  throughput over ``lax``'s: the form whose largest group (the runs' count bench_runs measured most of) trains the
  most episodes per second at ``precision``, where it beats lax's by :data:`FORM_MARGIN`; else lax (noise, and
  forms that tie, keep the default).

  >>> form_winners([{"size": 84, "precision": "float32", "runs": 32, "conv": "lax", "group_episodes_per_s": 100.0},
  ...               {"size": 84, "precision": "float32", "runs": 32, "conv": "im2col", "group_episodes_per_s": 130.0}])
  {84: ('im2col', 1.3)}
  """
  winners = {}
  ours = [r for r in runs if r.get("precision", "float32") == precision]  # records before --precisions: float32
  for size in sorted({r["size"] for r in ours}):
    at = [r for r in ours if r["size"] == size]
    largest = max(r["runs"] for r in at)
    # A row of the default form names what it ran as "auto (lax)".
    speed = {re.sub(r"^auto \((\w+)\)$", r"\1", r["conv"]): r["group_episodes_per_s"] for r in at
             if r["runs"] == largest}
    if "lax" not in speed:
      continue
    form = max(speed, key=speed.get)
    ratio = speed[form] / speed["lax"]
    winners[size] = (form, round(ratio, 3)) if ratio >= FORM_MARGIN else ("lax", 1.0)
  return winners


def _winner_lines(found: dict, backend: str) -> list[str]:
  from fewshot import convolutions  # the table the winners are for (JAX imported, no device taken)

  winners = form_winners(found["runs"])
  if not winners:
    return []
  chosen = ", ".join(f"{size}×{size}: {form} ({ratio:.2f}× lax's group)" for size, (form, ratio) in winners.items())
  return ["", f"`--conv auto` on {backend} by this run's groups at float32 (fewshot.convolutions.AUTO; a form "
          f"replaces lax only {FORM_MARGIN:.2f}× faster): {chosen}; AUTO now says {convolutions.AUTO.get(backend, 'lax')}"
          f" ({convolutions.MEASURED_ON.get(backend, 'not measured')})."]


def summary(found: dict, results: dict) -> str:
  """The markdown page: each step's figures, then the verdicts."""
  prov = found["provenance"] or {}
  lines = ["# device_check", "", f"Backend: {prov.get('devices', 'unknown')}; fewshot {prov.get('fewshot')} "
           f"(git {prov.get('git_commit')}), jax {prov.get('jax')}, jaxlib {prov.get('jaxlib')}, flax "
           f"{prov.get('flax')}, python {prov.get('python')}.", "", "| step | status | seconds |", "|---|---|---|"]
  lines += [f"| {name} | {r['status']} | {r['seconds']:.0f} |" for name, r in results.items()]
  if found["main"]:
    m = found["main"]
    lines += ["", f"Main command: test accuracy {m['accuracy']:.2f}% ± {m['ci95']:.2f}% in {m['seconds']:.0f} s of "
              "wall time (compilation included)."]
  if found["episodes"]:
    lines += ["", "| episode | precision | JAX ms/episode | GFLOP/s | of peak | eager PyTorch ms/episode |",
              "|---|---|---|---|---|---|"]
    for r in found["episodes"]["results"]:
      scan, torch = r["variants"]["scan"], r["variants"].get("torch")
      lines.append(f"| {r['size']}×{r['size']} | {r['precision']} | {scan['ms_per_episode']:.2f} | "
                   f"{scan['gflops']:.0f} | {100 * scan['peak_fraction']:.1f}% | "
                   f"{'–' if torch is None else format(torch['ms_per_episode'], '.2f')} |")
  if found["runs"]:
    lines += ["", "| episode | conv | runs | group episodes/s | sequential episodes/s | group / sequential | group "
              "GFLOP/s (of peak) |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['size']}×{r['size']} | {r['conv']} | {r['runs']} | {r['group_episodes_per_s']:.1f} | "
              f"{r['sequential_episodes_per_s']:.1f} | {r['group_vs_sequential']:.2f} | {r['group_gflops']:.0f} "
              f"({100 * r['group_peak_fraction']:.1f}%) |" for r in found["runs"]]
  lines += _winner_lines(found, prov.get("backend", "unknown"))
  lines += ["", "| an accelerator must show | this run |", "|---|---|"]
  lines += [f"| {need} | {seen} |" for need, seen in verdicts(found, prov.get("backend", "unknown"))]
  return "\n".join(lines) + "\n"


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", required=True, help="folder for device_check.md, device_check.json and the logs")
  parser.add_argument("--smoke", action="store_true", help="every step, small (a CPU finishes in minutes)")
  parser.add_argument("--timeout", type=float, default=240, help="seconds each step may take")
  args = parser.parse_args(argv)
  if not args.out.strip():
    parser.error("--out names no folder; pass --out DIR (the report, the JSON and the logs go there).")
  if not args.timeout > 0:
    parser.error(f"--timeout must be a positive number of seconds, got {args.timeout}.")
  out = pathlib.Path(args.out).resolve()
  try:
    out.mkdir(parents=True, exist_ok=True)
  except OSError as e:
    parser.error(f"--out {out} cannot be made ({e.strerror or e}); pass a writable folder.")
  shutil.rmtree(out / "main_run", ignore_errors=True)  # this command's own run of an earlier check
  results, name = {}, None
  try:
    for name, command in steps(out, args.smoke).items():
      results[name] = run_step(name, command, out, args.timeout)
  except KeyboardInterrupt:  # the step's process got the Ctrl-C too; no report is written from a part of the steps
    print(f"interrupted: device_check stopped in its step '{name}' ({len(results)} of {len(steps(out, args.smoke))} "
          f"done) and wrote no report; the logs of the steps done are in {out}; run the same command again.",
          file=sys.stderr)
    return 130
  found = findings(results, out)
  (out / "device_check.json").write_text(json.dumps({"steps": results, "findings": found}, indent=1))
  page = summary(found, results)
  (out / "device_check.md").write_text(page)
  print(page)
  return 0 if all(r["status"] == 0 for r in results.values()) else 1


if __name__ == "__main__":
  sys.exit(main())
