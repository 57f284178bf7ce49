"""What a reviewer asks when two runs disagree: the versions, the commit, the devices; and where the data went.

Recorded in each run's ``config.json`` (``provenance`` and ``data``, beside the options) when the run starts, and
printed in the first lines a training command writes.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import pathlib
import platform
import re
import shlex
import subprocess
import sys

CHECKOUT = pathlib.Path(__file__).resolve().parents[2]  # the repository, when fewshot runs from a checkout


def git_commit() -> str | None:
  """The commit of the checkout fewshot runs from (``+dirty`` with uncommitted changes), None outside a checkout."""
  if not (CHECKOUT / ".git").exists():
    return None
  try:
    run = lambda *args: subprocess.run(["git", "-C", str(CHECKOUT), *args], capture_output=True, text=True,  # noqa: E731
                                       timeout=10, check=True).stdout.strip()
    commit = run("rev-parse", "HEAD")
    dirty = run("status", "--porcelain", "--untracked-files=no")
  except (OSError, subprocess.SubprocessError):
    return None
  return commit + ("+dirty" if dirty else "")


def version() -> tuple[str, bool]:
  """fewshot's version and whether it is installed; from a checkout on ``PYTHONPATH`` (no package metadata), the
  version ``pyproject.toml`` names beside it, or ``unknown``.
  """
  try:
    return importlib.metadata.version("fewshot"), True
  except importlib.metadata.PackageNotFoundError:
    pass
  try:
    found = re.search(r'^version\s*=\s*"([^"]+)"', (CHECKOUT / "pyproject.toml").read_text(), re.MULTILINE)
  except (OSError, UnicodeDecodeError):
    found = None
  return (found.group(1) if found else "unknown"), False


def devices() -> str:
  """The backend and devices JAX trains on, e.g. ``cpu: 1 device (cpu)`` or ``gpu: 8 devices (NVIDIA H100) on 2
  hosts``.
  """
  import jax

  local = jax.devices()
  hosts = f" on {jax.process_count()} hosts" if jax.process_count() > 1 else ""
  count = f"{len(local)} device{'s' * (len(local) > 1)}"
  return f"{jax.default_backend()}: {count} ({local[0].device_kind}){hosts}"


def command_line() -> str:
  """The command line as typed: ``python -m fewshot.train --head=dr``, or the script's path and its arguments."""
  spec = getattr(sys.modules.get("__main__"), "__spec__", None)
  program = ["-m", spec.name.removesuffix(".__main__")] if spec is not None and spec.name else sys.argv[:1]
  return shlex.join([os.path.basename(sys.executable), *program, *sys.argv[1:]])


def cpu_model() -> str:
  """The host's CPU as the kernel names it (``AMD EPYC 7B13``), or Python's word for it where there is no
  ``/proc/cpuinfo``: two records from one commit can still differ by the machine's arithmetic and speed.
  """
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine() or "unknown"


def provenance() -> dict:
  """The software and hardware a run trains on, the command line that started it and when (UTC)."""
  import flax
  import jax
  import jaxlib

  fewshot_version, installed = version()
  return {"fewshot": fewshot_version, "installed": installed, "git_commit": git_commit(),
          "python": platform.python_version(),
          "jax": jax.__version__, "jaxlib": jaxlib.__version__, "flax": flax.__version__,
          "backend": jax.default_backend(), "device_kind": jax.devices()[0].device_kind,
          "device_count": jax.device_count(), "process_count": jax.process_count(), "cpu": cpu_model(),
          "command": command_line(),
          "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


# What a dataset's files end in (archives, annotation and split files): a LICENSE or README beside them is no data.
DATA_FILE_ENDINGS = (".zip", ".tar", ".tgz", ".gz", ".mat", ".csv", ".txt", ".pkl", ".pickle", ".json", ".png", ".jpg")


def data_files(data_dir: str | None) -> list[str]:
  """What a data folder holds at its top (archives and folders, hidden ones aside): which of a dataset's files a run
  read (Omniglot's background-small zips, say, not the full set).
  """
  if not data_dir or not os.path.isdir(data_dir):
    return []
  with os.scandir(data_dir) as entries:
    return sorted(entry.name + "/" * entry.is_dir() for entry in entries if not entry.name.startswith(".") and
                  (entry.is_dir() or entry.name.lower().endswith(DATA_FILE_ENDINGS)))


def data_record(splits: dict, data_dir: str | None = None, files: list[str] | None = None,
                not_read: list[str] | None = None) -> dict:
  """How the dataset was split: classes and images of each split (:class:`fewshot.data.Split`), and in all; and the
  files of ``data_dir`` it was read from: ``files`` where the reader knows them, else :func:`data_files` (none for
  the embedded strokes); ``not_read``, the folder's files its reader left unopened on purpose, where there are any.
  """
  record = {name: {"classes": int(split.num_classes), "images": int(len(split.labels))} for name, split in
            splits.items()}
  record["total"] = {key: sum(r[key] for r in record.values()) for key in ("classes", "images")}
  files = data_files(data_dir) if files is None else files
  extra = {**({"files": files} if files else {}), **({"not_read": list(not_read)} if not_read else {})}
  if {"val", "test"} <= set(splits) and tuple(splits["val"].class_names) == tuple(splits["test"].class_names):
    extra["test_is_val"] = True  # nothing held out beyond validation (background-only data): said wherever tested
  return {**record, **extra}


def describe_data(dataset: str, record: dict) -> str:
  """One line: ``omniglot: 242 classes, 4840 images: train 145 classes / 2900 images, val ..., test ...``."""
  parts = ", ".join(f"{name} {r['classes']} classes / {r['images']} images" for name, r in record.items()
                    if name != "total" and isinstance(r, dict))
  total = record["total"]
  files = f" (read from {', '.join(record['files'])})" if record.get("files") else ""
  if record.get("not_read"):
    files += f" (not read: {', '.join(record['not_read'])}, not its image files)"
  if record.get("test_is_val"):
    parts += " (the test split is the validation split: the data hold no classes beyond it)"
  return f"data: {dataset}{files}, {total['classes']} classes and {total['images']} images in use: {parts}"
