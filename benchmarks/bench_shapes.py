"""Training throughput of the episode shapes this project trains: this checkout, an older commit and eager PyTorch,
side by side in one run.

Each row is one training setting (Conv4 ProtoNet, DR head, a random uint8 split resident in memory):

* ``5w1s16q-28`` / ``5w1s16q-84``: the DR paper's 5-way 1-shot 16-query episode at 28×28×1 and 84×84×3;
* ``snell60w1s5q-28`` / ``snell60w5s5q-28``: Snell et al.'s Omniglot training episodes, 60-way 1- and 5-shot, 5
  queries;
* ``kim5w1s16q-84aug``: Kim et al.'s mini-ImageNet episode, stored at 96 px and augmented on the fly to 84 px;
* ``group3-28``: a seed group of 3 runs of the 28 px episode in one program (PyTorch: the 3 runs one after another).

Each side runs in its own process (``benchmarks/bench_worker.py``): ``new`` this checkout, ``old`` a git worktree
of ``--old`` (made under ``--worktrees`` if missing), ``torch`` ``benchmarks/torch_conv4.py``. All sides of a row
are built first; then each repetition times one chunk of every side in turn, only one side computing at a time (the
others stopped by SIGSTOP, so that their idle thread pools spin on no core), so a change in the machine's load hits
all of them alike, and each ratio is the median of the per-repetition ratios
(paired). A JAX chunk is ``learning.train_chunk`` as training runs it (one scan; its last update diagnosed), so its
compile time is the first call less one steady chunk. FLOPs come from the new side's lowered step
(``benchmarks/flops.py``) and the share of the float32 peak uses the peak measured in the same worker.

  python -m benchmarks.bench_shapes --old 3900b17 --json /tmp/shapes.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "benchmarks", "bench_worker.py")

_EPISODE = dict(channels=1, size=28, stored=28, way=5, shot=1, query=16, head="dr", classes=64, per_class=20,
                augment=False, runs=1)
ROWS = {
    "5w1s16q-28": dict(_EPISODE, episodes=20),
    "5w1s16q-84": dict(_EPISODE, channels=3, size=84, stored=84, episodes=5),
    "snell60w1s5q-28": dict(_EPISODE, way=60, query=5, classes=120, episodes=6),
    "snell60w5s5q-28": dict(_EPISODE, way=60, shot=5, query=5, classes=120, episodes=4),
    "kim5w1s16q-84aug": dict(_EPISODE, channels=3, size=84, stored=96, augment=True, episodes=5),
    "group3-28": dict(_EPISODE, runs=3, episodes=10),
}


class Side:
  """A worker process holding one side of one row."""

  def __init__(self, name: str, side: str, tree: str, row: dict):
    self.name = name
    command = [sys.executable, WORKER, "--side", side, "--tree", tree, "--row", json.dumps(row)]
    self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    self.facts = self._answer()
    self.pause()

  def _answer(self) -> dict:
    line = self.process.stdout.readline()
    if not line:
      raise RuntimeError(f"the {self.name} worker ended without an answer (its stderr is above)")
    return json.loads(line)

  def pause(self) -> None:
    """Stopped between its chunks: an idle side's thread pools (XLA's, OpenMP's) spin, and on two cores they took
    about a fifth of the working side's time.
    """
    self.process.send_signal(signal.SIGSTOP)

  def chunk(self) -> float:
    self.process.send_signal(signal.SIGCONT)
    self.process.stdin.write("run\n")
    self.process.stdin.flush()
    seconds = self._answer()["s"]
    self.pause()
    return seconds

  def close(self) -> None:
    self.process.send_signal(signal.SIGCONT)
    self.process.stdin.close()
    self.process.wait()


def old_tree(rev: str, worktrees: str) -> str:
  """A worktree of ``rev`` (made once, then reused)."""
  sha = subprocess.run(["git", "-C", ROOT, "rev-parse", rev], check=True, capture_output=True, text=True).stdout.strip()
  path = os.path.join(worktrees, f"fewshot-{sha[:12]}")
  if not os.path.isdir(path):
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", path, sha], check=True, capture_output=True)
  return path


def measure(name: str, row: dict, trees: dict[str, str], repeats: int) -> dict:
  """One row: every side built, then ``repeats`` interleaved chunks of each."""
  sides = {}
  try:
    for side, tree in trees.items():
      spec = dict(row, count_flops=side == "new")
      sides[side] = Side(side, "torch" if side == "torch" else "jax", tree, spec)
    times = {side: [] for side in sides}
    for _ in range(repeats):
      for side, worker in sides.items():
        times[side].append(worker.chunk())
  finally:
    for worker in sides.values():
      worker.close()
  episodes = row["episodes"] * row["runs"]
  facts = sides["new"].facts
  out = {"row": name, **row, "gflop_per_episode": facts["gflop_per_episode"], "peak_gflops": facts["peak_gflops"],
         "sides": {}}
  for side, ts in times.items():
    median = statistics.median(ts)
    first = sides[side].facts["first_call_s"]
    out["sides"][side] = {
        "chunk_s": ts, "ms_per_episode": 1e3 * median / episodes, "episodes_per_s": episodes / median,
        "compile_s": max(first - median, 0.0) if side != "torch" else None, "first_call_s": first,
        "peak_fraction": facts["gflop_per_episode"] * episodes / median / facts["peak_gflops"],
        **{k: v for k, v in sides[side].facts.items() if k not in ("ready", "first_call_s", "gflop_per_episode",
                                                                    "peak_gflops")}}
  for side in times:
    if side != "new":  # paired: this repetition's new chunk over the other side's, then the median
      out["sides"][side]["new_speedup"] = statistics.median(o / n for o, n in zip(times[side], times["new"]))
  return out


def table(results: list[dict]) -> str:
  """The rows as a Markdown table: ms per episode (share of the float32 peak) per side, and the paired ratios."""
  has = lambda side: all(side in r["sides"] for r in results)  # noqa: E731
  head = ["row", "new ms/ep (peak)", "compile s"]
  if has("old"):
    head += ["old ms/ep", "old / new"]
  if has("torch"):
    head += ["torch ms/ep", "torch / new"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for r in results:
    s = r["sides"]
    cells = [r["row"], f"{s['new']['ms_per_episode']:.1f} ({100 * s['new']['peak_fraction']:.0f}%)",
             f"{s['new']['compile_s']:.1f}"]
    for side in ("old", "torch"):
      if has(side):
        cells += [f"{s[side]['ms_per_episode']:.1f}", f"{s[side]['new_speedup']:.2f}"]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, among {', '.join(ROWS)}")
  parser.add_argument("--old", default="3900b17", help="the commit measured beside this checkout ('' for none)")
  parser.add_argument("--worktrees", default=os.path.join(tempfile.gettempdir(), "fewshot-bench"),
                      help="where the old commit's worktree is made")
  parser.add_argument("--no-torch", action="store_true", help="leave eager PyTorch out")
  parser.add_argument("--repeats", type=int, default=5, help="timed chunks per side (medians reported)")
  parser.add_argument("--episodes", type=int, default=None, help="episodes per chunk for every row (default: the row's)")
  parser.add_argument("--json", default=None, help="write every timing here")
  args = parser.parse_args(argv)
  args.rows = [r for r in args.rows.split(",") if r]
  unknown = [r for r in args.rows if r not in ROWS]
  if unknown:
    parser.error(f"unknown --rows {', '.join(unknown)}; choose among {', '.join(ROWS)}")
  if args.repeats < 1:
    parser.error("--repeats takes a positive integer")
  return args


def main(argv=None) -> int:
  args = parse_args(argv)
  trees = {"new": ROOT}
  if args.old:
    trees["old"] = old_tree(args.old, args.worktrees)
  if not args.no_torch:
    trees["torch"] = ROOT
  print(f"python {platform.python_version()}; {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}); "
        f"load {os.getloadavg()}; sides: {', '.join(f'{k} ({v})' for k, v in trees.items())}", flush=True)
  results = []
  for name in args.rows:
    row = dict(ROWS[name], **({"episodes": args.episodes} if args.episodes else {}))
    result = measure(name, row, trees, args.repeats)
    results.append(result)
    s = result["sides"]
    print(f"{name}: " + ", ".join(f"{side} {v['ms_per_episode']:.1f} ms/ep" +
                                  (f" (new ×{v['new_speedup']:.2f} faster)" if "new_speedup" in v else "")
                                  for side, v in s.items()) + f"; load {os.getloadavg()[0]:.2f}", flush=True)
  print(table(results))
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"argv": sys.argv, "results": results}, f, indent=1)
    print(f"wrote {args.json}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
