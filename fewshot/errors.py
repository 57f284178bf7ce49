"""What went wrong, by kind: each error's message is one line naming the problem and the fix.

The command-line entry points print any of these as ``error: <message>`` and exit with
status 2 (:mod:`fewshot.runner`); from Python they are ordinary exceptions.
"""

from __future__ import annotations

import re


class FewshotError(ValueError):
  """Bad input a user can fix; the message is one line naming the problem and the fix."""


class ConfigError(FewshotError):
  """A bad option or combination of options."""


class DataError(FewshotError):
  """Bad input data: a missing, malformed or corrupt dataset, or one that cannot supply the episodes asked for."""


class RunDirError(FewshotError):
  """A run directory that cannot be used as asked: another run's, not a run, missing a record or checkpoint.

  Raised as ``RunDirError(problem, fix)`` where the fix names the training command's own flags (``--resume``,
  ``--seed``, ``--workdir``): a command that opens run directories for its own runs (``fewshot.reproduce``) keeps
  the problem and gives its own fix (``error.problem``, ``error.fix``); the message is ``"<problem>; <fix>"``.
  """

  def __init__(self, problem: str, fix: str | None = None):
    super().__init__(problem if fix is None else f"{problem}; {fix}")
    self.problem, self.fix = problem, fix


class OutputError(FewshotError):
  """An output path that cannot be written as asked (a folder where a file is wanted, or the reverse)."""


class TrainingError(FewshotError):
  """A run that cannot go on: its training loss became non-finite (it diverged)."""


class Interrupted(KeyboardInterrupt):
  """Ctrl-C during training; the message says where the run stopped and how to continue it."""


# PIL names the in-memory file it could not read by its repr, which tells a user nothing.
_OBJECT_REPR = re.compile(r"\s*<_io\.\w+ object at 0x[0-9a-fA-F]+>")


def one_line(e: BaseException) -> str:
  """An exception as a short single line, for error messages that quote a library's."""
  if type(e).__name__ == "UnidentifiedImageError":  # PIL: no decoder recognised the bytes
    return "not an image format PIL can read"
  return " ".join(_OBJECT_REPR.sub("", str(e)).split()) or type(e).__name__
