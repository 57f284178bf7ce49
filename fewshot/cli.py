"""What the command-line entry points share: absl flag parsing that fails with one line and exit status 2."""

from __future__ import annotations

import sys
from typing import Callable

from absl import app, flags

from fewshot.errors import FewshotError


def fail(message: str) -> None:
  print(f"error: {message}", file=sys.stderr)
  sys.exit(2)


def _parse_flags(argv: list[str]) -> list[str]:
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    fail(f"{e}; see --help.")


def run(main: Callable[[list[str]], None]) -> None:
  """``app.run`` whose bad flags and bad inputs print one line and exit with status 2."""

  def guarded(argv):
    try:
      main(argv)
    except FewshotError as e:
      fail(str(e))

  app.run(guarded, flags_parser=_parse_flags)
