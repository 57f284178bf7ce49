"""Fetch and verify a dataset's files: ``python -m fewshot.data.get omniglot --to DIR``; build mini-ImageNet.

Every file is pinned by size and checksum in :mod:`fewshot.data.downloads` and tried from its sources in order
(:mod:`fewshot.data.fetch`: resumed after an interruption, verified, only then put in place, never fetched again
once there and verified). The folder it leaves is what ``--data_dir DIR`` reads as it is. ``--only`` fetches some of
the files (``--only images_background.zip,images_evaluation.zip``); ``--list`` names each dataset's files.

mini-ImageNet is built, not fetched: from the user's own ILSVRC-2012 training folder with Ravi & Larochelle's lists,
shipped in the package (``python -m fewshot.data.get mini_imagenet --from ILSVRC/train --to DIR``, ``--resize 0`` to
keep the ILSVRC files as they are; :mod:`fewshot.data.ilsvrc`).

From Python: ``fewshot.data.get.get("omniglot", "DIR")``, ``get("mini_imagenet", "DIR", source="ILSVRC/train")``.
"""

from __future__ import annotations

from absl import flags

from fewshot import options, runner
from fewshot.data import ilsvrc
from fewshot.data.downloads import DATASETS
from fewshot.data.fetch import fetch
from fewshot.errors import ConfigError


def define_flags() -> None:
  """Define the command-line flags (only when run as a program, so importing this module defines none)."""
  with options.flag_heading("what to fetch"):
    flags.DEFINE_string("to", None, "the data folder to fetch into (what --data_dir then reads)")
    flags.DEFINE_list("only", None, "fetch only these of the dataset's files (default all)")
    flags.DEFINE_bool("list", False, "list each dataset's files, sizes and sources, and exit")
  with options.flag_heading("what to build (mini_imagenet)"):
    flags.DEFINE_string("from", None, "mini_imagenet: your ILSVRC-2012 train/ folder (a folder per class, extracted)")
    flags.DEFINE_integer("resize", ilsvrc.SIDE, "mini_imagenet: the side images are resized to (84, Ravi & "
                         "Larochelle's); 0 copies the ILSVRC files as they are")


BUILT = "mini_imagenet"  # built from the user's ILSVRC-2012, not fetched


def get(name: str, to: str, only: list[str] | None = None, progress: bool = True, source: str | None = None,
        resize: int = ilsvrc.SIDE) -> list[str]:
  """Fetch dataset ``name``'s files (or ``only`` those) into ``to``, or build mini-ImageNet there from ILSVRC-2012's
  train/ folder ``source``; returns their paths.
  """
  if name == BUILT:
    if source is None or only:
      raise ConfigError("mini_imagenet is built from your own ILSVRC-2012 training folder, whole: python -m "
                        "fewshot.data.get mini_imagenet --from ILSVRC/train --to DIR (without --only).")
    built = ilsvrc.build(source, to, resize, progress=progress)
    return [str(built / f) for f in (*ilsvrc.CSVS, "images")]
  if name not in DATASETS:
    raise ConfigError(f"no dataset {name!r} to fetch; choose one of {', '.join(DATASETS)}, or {BUILT} (built from "
                      "your own ILSVRC-2012: --from ILSVRC/train).")
  if source is not None:
    raise ConfigError(f"--from is for {BUILT} only (your ILSVRC-2012 train/ folder); {name} is fetched: drop it.")
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
  lines.append(f"{BUILT}: built from your ILSVRC-2012 train/ folder (--from) with Ravi & Larochelle's lists, "
               f"{ilsvrc.RAVI_LAROCHELLE}")
  return "\n".join(lines)


def main(argv):
  values = flags.FLAGS
  if values.list:
    print(listing())
    return
  if len(argv) != 2 or not values.to:
    raise ConfigError(f"name one dataset and where it goes: python -m fewshot.data.get omniglot --to DIR (one of "
                      f"{', '.join(DATASETS)}; {BUILT} also takes --from ILSVRC/train).")
  for path in get(argv[1], values.to, values.only, source=values["from"].value, resize=values.resize):
    print(path)


if __name__ == "__main__":
  define_flags()
  runner.run(main, takes_paths=True)
