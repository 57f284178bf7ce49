"""The command runner every ``python -m fewshot...`` command shares: bad input is one line and exit status 2.

Bad input (any :class:`~fewshot.errors.FewshotError`) prints ``error: <message>`` and exits 2; Ctrl-C prints
one line (where a training run stopped, from :class:`~fewshot.errors.Interrupted`) and exits 130, the
shell's status for SIGINT; SIGTERM (preemption) prints the same line and exits 143. Nothing here imports JAX: a
command checks its flags and configuration first.

The runner sits in the kernel, below everything a command runs, so that a command of any folder can use it. What
training adds to an exit registers itself here when it is in use (:data:`AT_EXIT`): the stderr a checkpoint save
holds back (:mod:`fewshot.records.held_output`), the other processes of a multi-process launch
(:mod:`fewshot.training.peers`) and the line that says where training stopped (:mod:`fewshot.training.loop`).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import sys
import threading
from typing import Any, Callable

from absl import app, flags

from fewshot import usage
from fewshot.errors import ConfigError, FewshotError

INTERRUPTED = 130  # 128 + SIGINT


@dataclasses.dataclass
class AtExit:
  """What the layers above register for an exit (each None until a command uses it).

  ``release``: ends a held stderr, so the exit's line reaches the terminal; ``peers``: the module that stops a
  multi-process launch's other processes (``stop``, ``post``, ``finish``, ``lost_contact``, ``crash``);
  ``where``: ``where(cause, resume)``, the line saying where training stopped.
  """

  release: Callable[[], None] | None = None
  peers: Any = None
  where: Callable[[str, str], str] | None = None


AT_EXIT = AtExit()


def fail(message: str, every_process: bool = False) -> None:
  """Print ``error: <message>`` and exit 2; in a multi-process launch, the other processes stop too (unless
  ``every_process`` meets the same error at the same point).
  """
  if AT_EXIT.peers is not None:
    AT_EXIT.peers.stop(f"error: {message}", 2, kind=None if every_process else "error")
  print(f"error: {message}", file=sys.stderr)
  sys.exit(2)


def run_script(main: Callable[[], object]) -> None:
  """Run an argparse script's ``main`` (the experiments') with this module's rule for bad input: a
  ``FewshotError`` is one line and exit status 2, never a traceback.
  """
  try:
    main()
  except FewshotError as e:
    fail(str(e))


def _parse_flags(argv: list[str], takes_paths: bool = False) -> list[str]:
  if usage.asks_for_help(argv):  # the command's own flags by heading (absl's --help lists only __main__'s)
    print(usage.help_text(usage.command_name(), sys.modules["__main__"].__doc__))
    sys.exit(0)
  try:
    usage.check_command_line(argv, takes_paths)
  except ConfigError as e:
    fail(str(e))
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    fail(f"{usage.flagfile_prefix(argv, str(e))}{usage.renamed_flag(str(e)) or e}; see --help.")


def run(main: Callable[[list[str]], None], takes_paths: bool = False, resume: str = "with --resume") -> None:
  """``app.run`` whose bad flags and bad inputs print one line and exit with status 2; an argument that is not a flag
  is one of them unless the command ``takes_paths``. ``resume``: how the interrupt line tells the command to continue
  (``again`` for a command that continues by itself and has no ``--resume``).
  """
  _resume[0] = resume

  def guarded(argv):
    try:
      main(argv)
    except FewshotError as e:
      fail(usage.flagfile_prefix(sys.argv, str(e)) + str(e), getattr(e, "every_process", False))
    except KeyboardInterrupt as e:
      _exit_interrupted(str(e) or None)
    except Exception as e:
      if AT_EXIT.peers is not None:  # a peer gone mid-collective, or this process's own error: every process stops
        AT_EXIT.peers.lost_contact(e)
        AT_EXIT.peers.crash(e)
      raise

  _exit_at_once_on_signals()
  app.run(guarded, flags_parser=lambda argv: _parse_flags(argv, takes_paths))


_exiting = threading.Lock()
_wakeup_sockets: list = []
_resume = ["with --resume"]  # run's resume words, for the interrupt line


def _interrupted_message(cause: str = "interrupted") -> str:
  return f"{cause}." if AT_EXIT.where is None else AT_EXIT.where(cause, _resume[0])


def _exit_interrupted(message: str | None, status: int = INTERRUPTED, cause: str = "interrupted") -> None:
  """Print the one line (``message``, or where training stopped and why) and exit at once (130 for Ctrl-C, 143 for
  SIGTERM), from whichever thread saw it first; in a multi-process launch the other processes stop too.

  Every record is whole on disk at any moment (atomic writes, as after a SIGKILL), so the
  interpreter's teardown of JAX's and the loaders' threads is skipped.
  """
  with _exiting:
    if AT_EXIT.release is not None:  # a checkpoint save holding stderr as the signal came: this line must reach it
      AT_EXIT.release()
    if AT_EXIT.peers is not None:
      # First: where training stopped is read once the others know. SIGTERM is a preemption: every process exits 143.
      AT_EXIT.peers.post("interrupted", cause, status if cause.startswith("terminated") else 2)
      AT_EXIT.peers.finish(message or _interrupted_message(cause), status)
    message = message or _interrupted_message(cause)
    print(message, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _exit_on(signum: int) -> None:
  cause = "interrupted" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"
  _exit_interrupted(None, 128 + signum, cause)


def _exit_at_once_on_signals() -> None:
  """Exit on Ctrl-C, and on SIGTERM (what SLURM and cloud preemption send), even while the main thread waits on a
  compiled computation.

  Python runs a signal's handler only when the main thread runs Python again, which a chunk of training episodes
  delays by seconds; the signal's wake-up byte reaches this watcher at once.
  """
  if threading.current_thread() is not threading.main_thread():
    return
  receive, send = socket.socketpair()
  _wakeup_sockets[:] = [receive, send]  # kept open for the process's life
  send.setblocking(False)
  signal.set_wakeup_fd(send.fileno(), warn_on_full_buffer=False)
  # Python handlers, so that SIGTERM reaches the wake-up socket, and so that Ctrl-C raises no KeyboardInterrupt in
  # the main thread while the watcher prints its line (one raised inside a finaliser printed "Exception ignored in:"
  # into that line); whichever thread runs first exits, the other waits on the lock.
  for signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(signum, lambda signum, frame: _exit_on(signum))

  def watch():
    while True:
      received = receive.recv(64)
      for signum in (signal.SIGINT, signal.SIGTERM):
        if signum in received:
          _exit_on(signum)

  threading.Thread(target=watch, name="fewshot-signals", daemon=True).start()
