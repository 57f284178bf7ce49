"""What the command-line entry points share: absl flag parsing that fails with one line and exit status 2.

Bad input (any :class:`~fewshot.errors.FewshotError`) prints ``error: <message>`` and exits 2; Ctrl-C prints
one line (where a training run stopped, from :class:`~fewshot.errors.Interrupted`) and exits 130, the
shell's status for SIGINT. Nothing here imports JAX: a command checks its flags and configuration first.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from typing import Callable

from absl import app, flags

from fewshot.errors import FewshotError

INTERRUPTED = 130  # 128 + SIGINT


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
    except KeyboardInterrupt as e:
      _exit_interrupted(str(e) or _interrupted_message())

  _exit_at_once_on_ctrl_c()
  app.run(guarded, flags_parser=_parse_flags)


_exiting = threading.Lock()
_wakeup_sockets: list = []


def _interrupted_message() -> str:
  loop = sys.modules.get("fewshot.training.loop")  # imported only by commands that train
  return "interrupted." if loop is None else loop.interrupted_message()


def _exit_interrupted(message: str) -> None:
  """Print the one line and exit 130 at once, from whichever thread saw Ctrl-C first.

  Every record is whole on disk at any moment (atomic writes, as after a SIGKILL), so the
  interpreter's teardown of JAX's and the loaders' threads is skipped.
  """
  with _exiting:
    print(message, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(INTERRUPTED)


def _exit_at_once_on_ctrl_c() -> None:
  """Exit on Ctrl-C even while the main thread waits on a compiled computation.

  Python raises KeyboardInterrupt only when the main thread runs Python again, which a chunk of
  training episodes delays by seconds; the signal's wake-up byte reaches this watcher at once.
  """
  if threading.current_thread() is not threading.main_thread():
    return
  receive, send = socket.socketpair()
  _wakeup_sockets[:] = [receive, send]  # kept open for the process's life
  send.setblocking(False)
  signal.set_wakeup_fd(send.fileno(), warn_on_full_buffer=False)

  def watch():
    while True:
      if signal.SIGINT in receive.recv(64):
        _exit_interrupted(_interrupted_message())

  threading.Thread(target=watch, name="fewshot-ctrl-c", daemon=True).start()
