"""A process of a multi-process launch that stops: every other process stops too, within seconds, with one line.

JAX's distributed runtime ends a process whose peer is gone by aborting it from C++ (SIGABRT: a check-failure
trace, status 134), at once when process 0, which hosts the coordination service, is lost, and after the
service's heartbeat timeout when another is; a process stopped on purpose (Ctrl-C, an error) leaves the others
waiting on it. So, once :func:`watch` runs (before ``jax.distributed.initialize``):

* the runtime's own log records on stderr are held back (they precede its abort), and its abort is caught: the
  process prints one line naming the lost process and exits 2 (a heartbeat timeout of :data:`HEARTBEAT_SECONDS`);
* a process that stops on purpose posts why in the coordination service's key-value store (:func:`stop`), and a
  watchdog thread in every other process, blocked on that key, stops it with one line at once.

Each process's run directories are whole at any moment (atomic writes), so the same command with ``--resume`` on
every host continues the group from its last checkpoint. Nothing here runs for a single process.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import re
import signal
import sys
import threading
import time

from fewshot import runner
from fewshot.records import held_output

HEARTBEAT_SECONDS = 10  # JAX's default is 100: a lost peer would go unnoticed for a minute or more
JOIN_SECONDS = 300  # how long jax.distributed.initialize waits for every process to start (JAX's default)
STOP_KEY = "fewshot/stop"
RESUME = "run the same command with --resume on every host to continue the group from its last checkpoint"
_WAIT_MS = 1000  # the watchdog's wait on the store, the longest a normal exit waits for it
_LINGER_SECONDS = 0.5  # process 0 hosts the key-value store: it stays this long so the others read why it stopped
_RECORD = re.compile(rb"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ ([\w.\-]+):\d+\] ")
# The runtime's sources whose records say that a peer is gone (or, as it shuts down, that it went).
_RUNTIME_SOURCES = {b"coordination_service.cc", b"coordination_service_agent.cc", b"client.h", b"client.cc",
                    b"preemption_sync_manager.cc", b"preemption_notifier.cc", b"coordination_service_error_util.cc"}
_ABORT_MARK = "JAX distributed service detected fatal errors"
# How a collective's failure reads when its peer is gone (gloo on the CPU, the coordination service's RPCs).
_COMMUNICATION = re.compile(r"Gloo|Connection (reset|refused|closed)|Socket closed|UNAVAILABLE|peer", re.IGNORECASE)

_state: dict = {}  # process, processes, address, stderr (the real stderr's fd), held (the runtime's records)
_exiting = threading.Lock()


def watching() -> bool:
  return bool(_state)


def watch(process: int, processes: int, address: str) -> None:
  """Before ``jax.distributed.initialize``: hold back the runtime's log records and catch its abort."""
  if _state:
    return
  real = os.dup(2)
  _state.update(process=process, processes=processes, address=address, stderr=real, held=[])
  runner.AT_EXIT.peers = sys.modules[__name__]  # the command's exits (an error, Ctrl-C, a crash) now stop every process
  # Python writes the real stderr directly (so a line printed just before os._exit is never lost in a pipe);
  # fd 2, where C++ writes, goes through the filter.
  sys.stderr.flush()
  sys.stderr = open(real, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
  import faulthandler

  if faulthandler.is_enabled():
    faulthandler.enable(file=sys.stderr)
  read, write = os.pipe()
  os.dup2(write, 2)
  os.close(write)
  threading.Thread(target=_filter, args=(read,), name="fewshot-stderr", daemon=True).start()
  _catch_abort()


def start_watchdog() -> None:
  """After ``jax.distributed.initialize``: stop this process as soon as another posts that it stopped."""
  if _state:
    _state["joined"] = True
    watchdog = threading.Thread(target=_watchdog, name="fewshot-peers", daemon=True)
    watchdog.start()
    # Registered after JAX's shutdown, so run before it: a call still waiting on the store as the client shuts
    # down would crash the interpreter.
    atexit.register(_close, watchdog)


def stop(line: str, status: int, kind: str | None = "error") -> None:
  """Print ``line``, post it for the other processes (as ``kind``, see :func:`post`; None posts nothing: every
  process stops on it alike) and exit with ``status`` at once (never returns).
  """
  if kind is not None:
    post(kind, line)
  finish(line, status)


def post(kind: str, line: str = "", status: int = 2) -> None:
  """Tell the other processes that this one stops (``kind``: ``"error"``, its ``line`` naming the fix, or
  ``"interrupted"``, its ``line`` the cause) and the ``status`` they exit with; the first post wins. Waits at most a
  second for the coordination service.
  """
  value = json.dumps({"process": _state["process"], "kind": kind, "line": line, "status": status})

  def send():
    try:
      client().key_value_set(STOP_KEY, value)
    except Exception:  # noqa: BLE001 - another process posted first, or the service is gone: nothing to tell
      pass

  if client() is not None:
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    sender.join(1.0)


def finish(line: str, status: int, linger: bool = True) -> None:
  """Print ``line`` and exit with ``status`` at once (never returns), from whichever thread stops first.

  ``os._exit`` skips JAX's shutdown, whose barrier would wait for processes that wait for this one.
  """
  if not _exiting.acquire(blocking=False):  # another thread is already stopping this process
    time.sleep(5)
    os._exit(status)
  _state["status"] = status
  sys.stdout.flush()
  sys.stderr.flush()
  os.write(_state["stderr"], (line.rstrip("\n") + "\n").encode())
  if linger and _state["process"] == 0 and _state["processes"] > 1:
    time.sleep(_LINGER_SECONDS)
  os._exit(status)


def lost_contact(error: BaseException) -> None:
  """The main thread's error in a multi-process launch: a failed collective is most often a peer gone, which the
  runtime's verdict (its abort, caught) or the peer's post explains within a heartbeat timeout; this waits for
  it, then stops on the error itself. Returns at once for any other error (this process's own).
  """
  _explained_by_another()
  if not _communication_failure(error):
    return
  deadline = time.monotonic() + 2 * HEARTBEAT_SECONDS + 5
  while time.monotonic() < deadline:
    time.sleep(0.1)
  first = " ".join(str(error).split())[:300]
  stop(f"error: this process lost contact with the others ({first}); {RESUME}.", 2)


def crash(error: BaseException) -> None:
  """This process's own unexpected error: its traceback, then every process stops (never returns)."""
  import traceback

  _explained_by_another()
  traceback.print_exception(error, file=sys.stderr)
  stop(f"error: an unexpected {type(error).__name__} stopped process {_state['process']} (see its traceback); "
       "report it with that traceback.", 1)


def _communication_failure(error: BaseException) -> bool:
  """Whether ``error`` or one it was raised from is a runtime error that reads as a peer gone (a checkpoint library
  re-raises the collective's failure under its own type).
  """
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    if type(error).__name__ in ("JaxRuntimeError", "XlaRuntimeError") and _COMMUNICATION.search(str(error)):
      return True
    error = error.__cause__ or error.__context__
  return False


def _explained_by_another() -> None:
  """Stop without this error's traceback where something else explains it (never returns then): another thread of
  this process is already stopping it with its line, or another process posted why it stopped (a peer's SIGTERM or
  error ends the collective this process was in; the post arrives within a second).
  """
  if not _exiting.locked():
    posted = _posted_by_another(_WAIT_MS)
    if posted is not None:
      finish(_peer_stopped(posted), posted.get("status", 2))
  while _exiting.locked():  # the stopping thread prints its line and exits the process
    time.sleep(1)


def _posted_by_another(wait_ms: int) -> dict | None:
  store = client() if _state.get("joined") else None
  if store is None:
    return None
  try:
    posted = json.loads(store.blocking_key_value_get(STOP_KEY, wait_ms))
  except Exception:  # noqa: BLE001 - nothing posted in time, or the service is gone
    return None
  return None if posted["process"] == _state["process"] else posted


# ---- the coordination service ------------------------------------------------------------------------------
def client():
  """The coordination service's client (its key-value store has no public API; JAX's own multihost tools use it)."""
  from jax._src import distributed

  return distributed.global_state.client


def _watchdog() -> None:
  store = client()
  while not _state.get("closing"):
    try:
      value = store.blocking_key_value_get(STOP_KEY, _WAIT_MS)
    except Exception as e:  # noqa: BLE001 - the service is gone (the abort is caught) or this process shuts down
      if "DEADLINE_EXCEEDED" in str(e):
        continue
      return
    posted = json.loads(value)
    if posted["process"] == _state["process"]:
      return
    finish(_peer_stopped(posted), posted.get("status", 2))


def _close(watchdog: threading.Thread) -> None:
  _state["closing"] = True
  watchdog.join(2 * _WAIT_MS / 1000)


def _peer_stopped(posted: dict) -> str:
  k, n = posted["process"], _state["processes"]
  if posted["kind"] == "interrupted":
    cause = posted["line"] if posted["line"].startswith("terminated") else "interrupted (Ctrl-C)"
    return f"error: process {k} of {n} was {cause}, so this one stops too; {RESUME}."
  return f"error: process {k} of {n} stopped, so this one stops too: {posted['line'].removeprefix('error: ')}"


# ---- the runtime's log records and its abort ------------------------------------------------------------------
def _filter(read: int) -> None:
  """Copy fd 2's bytes to the real stderr, holding back the runtime's records (kept for the abort's line)."""
  held, pending = False, b""
  while True:
    chunk = os.read(read, 65536)
    if not chunk:
      return
    *lines, pending = (pending + chunk).split(b"\n")
    for line in lines:
      record = _RECORD.match(line)
      if record is not None:
        held = record.group(1) in _RUNTIME_SOURCES
      elif line.startswith((b"*** Check failure stack trace", b"    @ ")):
        held = True
      if held:
        _state["held"] = [*_state["held"][-200:], line.decode(errors="replace")]
      else:
        os.write(_state["stderr"], line + b"\n")


def _catch_abort() -> None:
  """Install a C handler of SIGABRT that calls :func:`_on_abort` (a Python handler would run too late: ``abort``
  kills the process as soon as the handler returns).
  """
  try:
    libc = ctypes.CDLL(None)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
    handler = ctypes.CFUNCTYPE(None, ctypes.c_int)(_on_abort)
    libc.signal(signal.SIGABRT, ctypes.cast(handler, ctypes.c_void_p))
    _state["handler"] = handler  # kept alive for the process's life
  except (OSError, AttributeError):  # no C library to call: JAX's own abort stands
    pass


def _on_abort(signum: int) -> None:
  del signum
  if not _exiting.acquire(blocking=False):  # this process was already stopping: the abort is the service going
    time.sleep(5)
    os._exit(_state.get("status", 2))
  _exiting.release()
  # A checkpoint save holds fd 2 in memory (records.held_output): the abort's record may be there, not in the pipe.
  saved = held_output.take().decode(errors="replace")
  text = saved + _held_abort_record(saved)
  if _ABORT_MARK not in text:  # a fatal error of another kind: show it as the runtime wrote it, and where
    import faulthandler

    os.write(_state["stderr"], (text + "\n").encode())
    faulthandler.dump_traceback(file=_state["stderr"], all_threads=True)  # the real stderr, not the filtered fd 2
    os._exit(128 + signal.SIGABRT)
  finish(_lost_line(text), 2, linger=False)


def _held_abort_record(saved: str, seconds: float = 5.0) -> str:
  """The runtime's held records once its abort's own record is among them (or in ``saved``, what a checkpoint save
  held), or as they are after ``seconds``: the aborting thread wrote that record to the pipe just before it
  aborted, and on a loaded machine the filter thread may read it a good while later.
  """
  deadline = time.monotonic() + seconds
  while True:
    text = "\n".join(_state["held"])
    if _ABORT_MARK in saved + text or time.monotonic() > deadline:
      return text
    time.sleep(0.02)


def _lost_line(text: str) -> str:
  """The line for a peer the runtime found gone, named from its records where they say which."""
  me, n = _state["process"], _state["processes"]
  if not _state.get("joined"):  # jax.distributed.initialize timed out
    return (f"error: process {me} of {n} could not join the others at {_state['address']} within "
            f"{JOIN_SECONDS} s: a process did not start, or the address is not process 0's; start all {n} with the "
            "same --coordinator_address and --num_processes.")
  named = re.search(r"stopped sending heartbeats\):\s*((?:\d+[\s,]*)+)", text) or re.search(
      r"Task (\d+) heartbeat timeout", text)
  lost = sorted({int(k) for k in re.findall(r"\d+", named.group(1))} - {me}) if named else ([0] if me else [])
  if not lost:
    return f"error: process {me} of {n} lost contact with the others; {RESUME}."
  who = ", ".join(str(k) for k in lost)
  coordinator = f" (the coordinator, {_state['address']})" if lost == [0] else ""
  return (f"error: lost process {who} of {n}{coordinator}: it was killed or crashed, or its host or network went "
          f"down; {RESUME}.")
