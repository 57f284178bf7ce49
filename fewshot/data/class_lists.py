"""Class splits given as lists of class names: Vinyals et al.'s published Omniglot split, or a user's own.

A folder of lists holds ``train.txt``, ``val.txt`` and ``test.txt``, one class name a line (blank lines and lines
whose first character past any indent is ``#`` aside). Omniglot's names are ``Alphabet/characterNN``, optionally with the rotation Vinyals et
al.'s lists carry (``Alphabet/characterNN/rot090``): a character is what a list places, so a character's rotations
must all be in one split (as published), and ``--rotations`` decides whether the four angles become classes.

    >>> lists = read(VINYALS)
    >>> [len(lists.splits[s]) for s in ("train", "val", "test")], lists.sha256[:12]
    ([1028, 172, 423], '7601aa16c174')

A run records the lists by content (:attr:`ClassLists.sha256`), so two runs on different lists never read as one
protocol, wherever the folders were.
"""

from __future__ import annotations

import dataclasses
import hashlib
import pathlib
from collections.abc import Callable

from fewshot.errors import ConfigError, DataError

LISTS = pathlib.Path(__file__).with_name("lists")
# Vinyals et al.'s split as published with the Prototypical Networks code (MIT; lists/vinyals/README.md).
VINYALS = LISTS / "vinyals"
# The class splits whose lists ship with the package (each folder's README says where they come from): Vinyals et
# al.'s, and Lake et al.'s "minimal" settings (one background-small zip trains, the evaluation alphabets test).
SHIPPED = {"vinyals_published": VINYALS, "lake_small1": LISTS / "lake_small1", "lake_small2": LISTS / "lake_small2"}
FILES = ("train.txt", "val.txt", "test.txt")
_ROTATION_PREFIX = "rot"


@dataclasses.dataclass(frozen=True)
class ClassLists:
  """{split: sorted class names} read from a folder, and the SHA-256 of the three files' text in split order, as
  UTF-8 with LF line ends and no byte-order mark: lists saved with CRLF ends or a BOM are the same protocol, while
  an edited line, a comment included, is another.
  """

  folder: str
  splits: dict[str, list[str]]
  sha256: str


def _character(name: str) -> str:
  """``Alphabet/characterNN`` of a listed name, its rotation suffix (``/rotDDD``) dropped."""
  parts = name.split("/")
  if len(parts) == 3 and parts[2].startswith(_ROTATION_PREFIX) and parts[2][len(_ROTATION_PREFIX):].isdigit():
    parts = parts[:2]
  return "/".join(parts)


def read(folder: str | pathlib.Path) -> ClassLists:
  """The lists in ``folder``; a one-line ``ConfigError`` for a missing or empty file or a class in two splits."""
  root = pathlib.Path(folder).expanduser()
  digest, splits, where = hashlib.sha256(), {}, {}
  for file in FILES:
    path = root / file
    try:
      data = path.read_bytes()
    except OSError as e:
      raise ConfigError(f"--split_lists {root} has no readable {file} ({e.strerror or e}); it needs train.txt, "
                        "val.txt and test.txt, one class name a line.") from None
    try:
      lines = data.decode("utf-8-sig").splitlines()  # a byte-order mark (as Notepad writes) is no part of a name
    except UnicodeDecodeError:
      raise ConfigError(f"{path} is not UTF-8 text; write one class name a line.") from None
    digest.update(file.encode() + b"\0" + "".join(line + "\n" for line in lines).encode() + b"\0")
    names = sorted({_character(line.strip()) for line in lines if line.strip() and not line.strip().startswith("#")})
    if not names:
      raise ConfigError(f"{path} lists no class; write one class name a line.")
    split = file.removesuffix(".txt")
    for name in names:
      if name in where:
        raise ConfigError(f"{name} is listed in both {where[name]}.txt and {file} of {root}; a class (with all its "
                          "rotations) belongs to one split.")
      where[name] = split
    splits[split] = names
  return ClassLists(str(root.resolve()), splits, digest.hexdigest())


def chosen(lists: ClassLists, found: list[str], advice: Callable[[str], str]) -> dict[str, list[str]]:
  """{split: names} of ``lists``, each checked against the classes ``found`` in the data; a one-line ``DataError``
  naming the first listed class that is not there and how many are missing, with ``advice(that name)``: the fix.
  """
  present = set(found)
  missing = [name for names in lists.splits.values() for name in names if name not in present]
  if missing:
    raise DataError(f"{len(missing)} of the classes listed in {lists.folder} are not in the data, the first "
                    f"{missing[0]}; {advice(missing[0])}.")
  return dict(lists.splits)
