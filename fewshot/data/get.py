"""Fetch and verify a dataset's files: ``python -m fewshot.data.get omniglot --to DIR``.

Every file is pinned by size and checksum in :mod:`fewshot.data.downloads` and tried from its sources in order
(:mod:`fewshot.data.fetch`: resumed after an interruption, verified, only then put in place, never fetched again
once there and verified). The folder it leaves is what ``--data_dir DIR`` reads as it is. ``--only`` fetches some of
the files (``--only images_background.zip,images_evaluation.zip``); ``--list`` names each dataset's files.

From Python: ``fewshot.data.get.get("omniglot", "DIR")``.
"""

from __future__ import annotations

from absl import flags

from fewshot import cli, options
from fewshot.data.downloads import DATASETS
from fewshot.data.fetch import fetch
from fewshot.errors import ConfigError


def define_flags() -> None:
  """Define the command-line flags (only when run as a program, so importing this module defines none)."""
  with options.flag_heading("what to fetch"):
    flags.DEFINE_string("to", None, "the data folder to fetch into (what --data_dir then reads)")
    flags.DEFINE_list("only", None, "fetch only these of the dataset's files (default all)")
    flags.DEFINE_bool("list", False, "list each dataset's files, sizes and sources, and exit")


def get(name: str, to: str, only: list[str] | None = None, progress: bool = True) -> list[str]:
  """Fetch dataset ``name``'s files (or ``only`` those) into ``to``; returns their paths."""
  if name not in DATASETS:
    raise ConfigError(f"no dataset {name!r} to fetch; choose one of {', '.join(DATASETS)} (mini_imagenet is built "
                      "from your own ILSVRC-2012: docs/protocol.md).")
  dataset = DATASETS[name]
  names = [f.name for f in dataset.files]
  unknown = [n for n in only or () if n not in names]
  if unknown:
    raise ConfigError(f"{name} has no file {unknown[0]!r}; choose from {', '.join(names)}.")
  chosen = [f for f in dataset.files if only is None or f.name in only]
  return [str(fetch(remote, to, dataset.manual, progress)) for remote in chosen]


def listing() -> str:
  lines = []
  for name, dataset in DATASETS.items():
    lines.append(f"{name}:")
    for f in dataset.files:
      size = "size unpublished" if f.size is None else f"{f.size:,} bytes"
      lines.append(f"  {f.name} ({size}; {f.pinned_by}): {', '.join(f.urls)}")
  return "\n".join(lines)


def main(argv):
  values = flags.FLAGS
  if values.list:
    print(listing())
    return
  if len(argv) != 2 or not values.to:
    raise ConfigError(f"name one dataset and where it goes: python -m fewshot.data.get omniglot --to DIR (one of "
                      f"{', '.join(DATASETS)}).")
  for path in get(argv[1], values.to, values.only):
    print(path)


if __name__ == "__main__":
  define_flags()
  cli.run(main, takes_paths=True)
