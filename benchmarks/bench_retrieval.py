"""Exact retrieval and clustering metrics at gallery scale: fewshot.dml vs pytorch-metric-learning (faiss).

A seeded synthetic gallery of ``--n`` L2-normalised ``--dim``-d embeddings, ``--per-class``
items per class (class centre + Gaussian noise, ``--noise`` setting how mixed the classes
are, so that the metrics sit mid-range rather than near 0), queried against itself
(``ref_includes_query=True``). Every measurement runs in a fresh subprocess; its time is
wall-clock inside the worker (JAX compile included: one call), its peak memory the
worker's peak RSS from ``os.wait4``. Workers:

* ``ours-retrieval``: ``fewshot.dml.metrics.retrieval_metrics`` (P@1, R-Precision, MAP@R);
* ``pml-retrieval``: ``AccuracyCalculator(include=("precision_at_1", "r_precision",
  "mean_average_precision_at_r"), k="max_bin_count")`` (exact faiss ``IndexFlatL2``, CPU);
* ``ours-nmi`` / ``pml-nmi``: ``clustering_metrics`` (our k-means, 20 iterations) /
  ``AccuracyCalculator(include=("NMI",))`` (faiss k-means, 20 iterations), k = number of classes;
* ``ours-histograms``: ``pair_similarity_histograms`` over all n(n-1)/2 pairs;
* ``*-baseline``: imports and data only, the floor under each peak.

The four metrics of the brief in one ``AccuracyCalculator`` are the sum of its two workers
(the k-NN and the k-means do not share work). Ours and theirs alternate within every
repetition, so machine load hits both alike; ``paired`` ratios are per repetition.
``--sweep-blocks`` times the retrieval on the first ``--sweep-queries`` queries for each block size
(a second call in the same worker, compile excluded).

  python -m benchmarks.bench_retrieval --json /tmp/bench_retrieval.json
  python -m benchmarks.bench_retrieval --n 5000 --per-class 10 --sweep-blocks 64,256 --sweep-queries 1000   # smoke: seconds
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np


def gallery(n: int, dim: int, per_class: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(seed)
  classes = -(-n // per_class)
  labels = np.repeat(np.arange(classes), per_class)[:n]
  centres = rng.standard_normal((classes, dim), dtype=np.float32)
  x = centres[labels] + noise * rng.standard_normal((n, dim), dtype=np.float32)
  x /= np.linalg.norm(x, axis=1, keepdims=True)
  perm = rng.permutation(n)  # classes interleaved, not in contiguous runs
  return x[perm], labels[perm]


def worker(name: str, args) -> dict:
  x, labels = gallery(args.n, args.dim, args.per_class, args.noise, args.seed)
  if args.queries:
    queries, query_labels = x[:args.queries], labels[:args.queries]
  else:
    queries, query_labels = x, labels
  out: dict = {}
  if name.startswith("ours"):
    import jax  # pylint: disable=import-outside-toplevel

    from fewshot.dml import clustering, metrics, pair_similarities  # pylint: disable=import-outside-toplevel
    out["jax"] = jax.__version__
  else:
    import torch  # pylint: disable=import-outside-toplevel
    from pytorch_metric_learning import __version__ as pml_version  # pylint: disable=import-outside-toplevel
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator  # pylint: disable=import-outside-toplevel
    out["pml"] = pml_version
    out["torch_threads"] = torch.get_num_threads()
  t0 = time.perf_counter()
  if name == "ours-retrieval":
    m = metrics.retrieval_metrics(queries, query_labels, x, labels, True, recall_at=(1,), block_size=args.block_size)
    if args.queries:  # the block sweep: time a second, compiled call (compile is ~1 s of a few)
      out["first_call_seconds"] = time.perf_counter() - t0
      t0 = time.perf_counter()
      m = metrics.retrieval_metrics(queries, query_labels, x, labels, True, recall_at=(1,), block_size=args.block_size)
    out["values"] = {"precision_at_1": m.precision_at_1, "r_precision": m.r_precision, "map_at_r": m.map_at_r,
                     "num_queries_without_positive": m.num_queries_without_positive, "k": m.k}
  elif name == "ours-nmi":
    m = clustering.clustering_metrics(jax.random.key(args.seed), x, labels, iterations=args.kmeans_iterations,
                                      block_size=args.block_size)
    out["values"] = {"NMI": m.nmi, "pairwise_f1": m.f1}
  elif name == "ours-histograms":
    pos, neg, _ = pair_similarities.pair_similarity_histograms(x, labels, bins=100, block_size=args.hist_block_size)
    out["values"] = {"positive_pairs": int(pos.sum()), "negative_pairs": int(neg.sum()),
                     "jsd": pair_similarities.histogram_jsd(pos, neg)}
  elif name == "pml-retrieval":
    calc = AccuracyCalculator(include=("precision_at_1", "r_precision", "mean_average_precision_at_r"),
                              k="max_bin_count", device=torch.device("cpu"))
    if args.queries:
      v = calc.get_accuracy(queries, query_labels, x, labels, ref_includes_query=True)
    else:
      v = calc.get_accuracy(x, labels)  # reference = query, ref_includes_query=True
    out["values"] = {"precision_at_1": v["precision_at_1"], "r_precision": v["r_precision"],
                     "map_at_r": v["mean_average_precision_at_r"]}
  elif name == "pml-nmi":
    calc = AccuracyCalculator(include=("NMI",), device=torch.device("cpu"))
    out["values"] = {"NMI": calc.get_accuracy(x, labels)["NMI"]}
  elif not name.endswith("baseline"):
    raise SystemExit(f"unknown worker {name}")
  out["seconds"] = time.perf_counter() - t0
  out["values"] = {k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in out.get("values", {}).items()}
  return out


def run_worker(name: str, args, extra: list[str]) -> dict:
  """A fresh interpreter per measurement; its own peak RSS from wait4 (ru_maxrss is in KiB on Linux)."""
  cmd = [sys.executable, "-m", "benchmarks.bench_retrieval", "--worker", name, "--n", str(args.n), "--dim", str(args.dim),
         "--per-class", str(args.per_class), "--noise", str(args.noise), "--seed", str(args.seed),
         "--block-size", str(args.block_size), "--hist-block-size", str(args.hist_block_size),
         "--kmeans-iterations", str(args.kmeans_iterations), *extra]
  t0 = time.perf_counter()
  proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)  # stderr passes through
  stdout = proc.stdout.read()
  _, status, usage = os.wait4(proc.pid, 0)
  proc.returncode = os.waitstatus_to_exitcode(status)
  if proc.returncode != 0:
    raise SystemExit(f"worker {name} failed with exit code {proc.returncode}")
  result = json.loads(stdout.strip().splitlines()[-1])
  result.update(worker=name, peak_rss_mib=usage.ru_maxrss / 1024, process_seconds=time.perf_counter() - t0)
  return result


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
  parser.add_argument("--n", type=int, default=100_000, help="gallery size (queried against itself)")
  parser.add_argument("--dim", type=int, default=128)
  parser.add_argument("--per-class", type=int, default=10)
  parser.add_argument("--noise", type=float, default=1.5, help="per-dimension noise around unit-variance class centres")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--block-size", type=int, default=None, help="queries per block (default: knn.DEFAULT_BLOCK_SIZE)")
  parser.add_argument("--hist-block-size", type=int, default=None, help="tile of the pair histograms")
  parser.add_argument("--kmeans-iterations", type=int, default=20, help="ours; faiss (pml) runs its default 20")
  parser.add_argument("--repeats", type=int, default=1, help="repetitions of each ours/pml pair (alternating)")
  parser.add_argument("--skip", default="", help="comma-separated: retrieval, nmi, histograms, pml, baseline")
  parser.add_argument("--sweep-blocks", default="", help="block sizes to time on the first --sweep-queries queries")
  parser.add_argument("--sweep-queries", type=int, default=8192)
  parser.add_argument("--queries", type=int, default=0, help=argparse.SUPPRESS)  # the sweep's query subset
  parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
  parser.add_argument("--json", default=None, help="write the results here")
  args = parser.parse_args(argv)
  if args.block_size is None or args.hist_block_size is None:
    from fewshot.dml import knn, pair_similarities  # pylint: disable=import-outside-toplevel
    args.block_size = args.block_size or knn.DEFAULT_BLOCK_SIZE
    args.hist_block_size = args.hist_block_size or pair_similarities.HISTOGRAM_BLOCK_SIZE
  return args


def summarise(runs: list[dict], parts: list[str]) -> dict:
  """Per part: our median time and peak memory, pytorch-metric-learning's beside them, their paired time ratio and
  how far the values differ.
  """
  summary = {}
  for p in parts:
    ours = [r for r in runs if r["worker"] == f"ours-{p}"]
    theirs = [r for r in runs if r["worker"] == f"pml-{p}"]
    s = {"ours_seconds": statistics.median(r["seconds"] for r in ours),
         "ours_peak_rss_mib": max(r["peak_rss_mib"] for r in ours)}
    if theirs:
      s.update(pml_seconds=statistics.median(r["seconds"] for r in theirs),
               pml_peak_rss_mib=max(r["peak_rss_mib"] for r in theirs),
               paired_time_ratio_ours_over_pml=statistics.median(o["seconds"] / t["seconds"] for o, t in zip(ours, theirs)))
      s["value_differences"] = {k: abs(ours[0]["values"][k] - theirs[0]["values"][k])
                                for k in theirs[0]["values"] if k in ours[0]["values"]}
    summary[p] = s
  return summary


def main(argv=None) -> int:
  args = parse_args(argv)
  if args.worker:
    print(json.dumps(worker(args.worker, args)), flush=True)
    return 0

  skip = set(filter(None, args.skip.split(",")))
  print(f"python {platform.python_version()}; {os.cpu_count()} CPUs; load {os.getloadavg()}; "
        f"gallery {args.n} x {args.dim}, {args.per_class} per class, noise {args.noise}; "
        f"block {args.block_size}, histogram tile {args.hist_block_size}", flush=True)
  results: dict = {"argv": sys.argv, "config": vars(args), "runs": [], "sweep": []}

  def record(name: str, extra=()):
    r = run_worker(name, args, list(extra))
    results["runs"].append(r)
    print(f"  {name:16s} {r['seconds']:8.2f} s  peak RSS {r['peak_rss_mib']:7.0f} MiB  {r.get('values', {})}", flush=True)
    return r

  for b in filter(None, args.sweep_blocks.split(",")):
    args_b = argparse.Namespace(**{**vars(args), "block_size": int(b)})
    r = run_worker("ours-retrieval", args_b, ["--queries", str(args.sweep_queries)])
    r["block_size"] = int(b)
    results["sweep"].append(r)
    print(f"  sweep block {int(b):5d}: {1e3 * r['seconds'] / args.sweep_queries:7.3f} ms/query over {args.sweep_queries} "
          f"queries (second call; first {r['first_call_seconds']:.2f} s)  peak RSS {r['peak_rss_mib']:6.0f} MiB", flush=True)

  if "baseline" not in skip:
    record("ours-baseline")
    if "pml" not in skip:
      record("pml-baseline")
  pairs = [p for p in ("retrieval", "nmi") if p not in skip]
  for rep in range(args.repeats):
    print(f"repetition {rep + 1}/{args.repeats}, load {os.getloadavg()}", flush=True)
    for p in pairs:
      record(f"ours-{p}")
      if "pml" not in skip:
        record(f"pml-{p}")
    if "histograms" not in skip:
      record("ours-histograms")

  summary = summarise(results["runs"], pairs + (["histograms"] if "histograms" not in skip else []))
  results["summary"] = summary
  print(json.dumps(summary, indent=1))
  if args.json:
    with open(args.json, "w") as f:
      json.dump(results, f, indent=1)
    print(f"wrote {args.json}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
