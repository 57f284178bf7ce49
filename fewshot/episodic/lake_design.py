"""Random one-shot runs of Lake et al.'s own design, drawn from the Omniglot image files: the official 20 runs'
population, for a score with a tight interval beside theirs.

Lake's 20 runs (``all_runs.zip``, :func:`fewshot.episodic.lake.read_runs`) use 10 of the 20 evaluation alphabets
(:data:`ALPHABETS`), two runs per alphabet, and drawers 1–8 only: in a run all 20 supports are one drawer's drawings
and all 20 queries another drawer's. A run drawn here follows that design: an alphabet of the 10, 20 of its
characters, two different drawers of 1–8 (supports, queries), the queries in a shuffled order; seeded.

The drawer of an image is read from its file name (``NNNN_MM.png``: drawing ``NNNN``, drawer ``MM``), never from the
order in which a split stores a character's images (a prepared split holds them in its records' order). Images go
through the training data's decoder (:func:`fewshot.data.omniglot.decode`) at the model's ``image_size``.

    runs = design_runs("omniglot_full", num_runs=400, seed=0)   # each a LakeRun, scored by lake.score
"""

from __future__ import annotations

import re

import numpy as np

from fewshot.data import omniglot
from fewshot.episodic.lake import LakeRun
from fewshot.errors import DataError

# The evaluation alphabets of Lake's 20 runs (each holds two of them), and the drawers his runs draw from.
ALPHABETS = ("Atlantean", "Ge_ez", "Glagolitic", "Gurmukhi", "Kannada", "Malayalam", "Manipuri",
             "Old_Church_Slavonic_(Cyrillic)", "Tengwar", "Tibetan")
DRAWERS = tuple(range(1, 9))
_FILE = re.compile(r"(\d+)_(\d+)\.png", re.IGNORECASE)


def drawer(member: str) -> int:
  """The drawer of an Omniglot image from its file name: ``.../0965_07.png`` is drawer 7.

  >>> drawer("images_evaluation/Tengwar/character01/1543_03.png")
  3
  """
  found = _FILE.fullmatch(member.rsplit("/", 1)[-1])
  if found is None:
    raise DataError(f"{member} is not named NNNN_MM.png (drawing, drawer) as Omniglot's images are; re-extract the "
                    "archive as released.")
  return int(found.group(2))


def by_drawer(classes: dict[str, tuple[str, ...]], alphabets, drawers) -> dict[str, dict[str, dict[int, str]]]:
  """{alphabet: {character: {drawer: member}}} of the characters of ``alphabets``, each with every one of
  ``drawers``; a one-line ``DataError`` where an alphabet is missing or a character lacks a drawer.
  """
  found: dict[str, dict[str, dict[int, str]]] = {a: {} for a in alphabets}
  for name, members in classes.items():
    alphabet = name.split("/")[0]
    if alphabet in found:
      found[alphabet][name] = {drawer(m): m for m in members}
  for alphabet, characters in found.items():
    if not characters:
      raise DataError(f"no character of the alphabet {alphabet} among the images; --data_dir needs "
                      "images_evaluation.zip.")
    for name, files in characters.items():
      missing = sorted(set(drawers) - set(files))
      if missing:
        raise DataError(f"{name} has no drawing by drawer {missing[0]}; re-extract images_evaluation.zip as released.")
  return found


def design_runs(data_dir: str, num_runs: int = 400, way: int = 20, seed: int = 0, image_size: int = 28,
                alphabets=ALPHABETS, drawers=DRAWERS, resize: str = "box") -> list[LakeRun]:
  """``num_runs`` runs of Lake's design from the Omniglot images under ``data_dir`` (see the module docstring),
  decoded as the model's training data (``resize``: its ``--resize``); each run's files name what was drawn
  (``Tengwar/character07/1549_03.png``), so a record says which runs scored.
  """
  characters = omniglot.scan(data_dir)
  found = by_drawer(characters.classes, alphabets, drawers)
  small = [a for a, c in found.items() if len(c) < way]
  if small:
    raise DataError(f"the alphabet {small[0]} has {len(found[small[0]])} characters, fewer than a {way}-way run "
                    "needs; choose a smaller way.")
  rng = np.random.default_rng(seed)
  picks = []
  for _ in range(num_runs):
    alphabet = alphabets[int(rng.integers(len(alphabets)))]
    names = sorted(found[alphabet])
    chosen = [names[i] for i in np.sort(rng.choice(len(names), way, replace=False))]
    support, query = (int(d) for d in rng.choice(drawers, 2, replace=False))
    order = rng.permutation(way)
    picks.append(([found[alphabet][c][support] for c in chosen], [found[alphabet][chosen[k]][query] for k in order],
                  order.astype(np.int32)))
  decoded: dict[str, np.ndarray] = {}
  with characters.tree as tree:
    def image(member):
      if member not in decoded:
        decoded[member] = omniglot.decode(tree.read(member), tree.where(member), image_size, resize)
      return decoded[member]

    return [LakeRun(f"design{number:04d}", tuple(_short(m) for m in support), tuple(_short(m) for m in queries),
                    np.stack([image(m) for m in support]), np.stack([image(m) for m in queries]), labels)
            for number, (support, queries, labels) in enumerate(picks, 1)]


def _short(member: str) -> str:
  """``Alphabet/characterNN/NNNN_MM.png`` of a member, whatever folders and zip hold it."""
  return "/".join(member.split("/")[-3:])
