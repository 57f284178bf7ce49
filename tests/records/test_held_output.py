"""A full disk during a checkpoint save is fewshot's one line, without the hundreds orbax and TensorStore print of it
first (issue 56: 118-339 lines before the right one); any other outcome keeps what they printed.
"""

from __future__ import annotations

import os
import sys

import jax.numpy as jnp
import pytest

from fewshot.errors import OutputError
from fewshot.records import held_output
from fewshot.records.checkpoints import Checkpoints

_FULL = ValueError('RESOURCE_EXHAUSTED: Error writing "x" in OCDBT database: Failed to write 2332 bytes to file 21: '
                   "No space left on device [os_error_code='28']")


def _noisy_save(error: BaseException | None):
  """A ``Checkpoints._save`` that prints as TensorStore's threads do (fd 2 directly) and as absl does (sys.stderr),
  then fails with ``error`` (None: saves nothing and returns).
  """
  def save(self, kind, step, state):
    for k in range(150):
      os.write(2, f"Traceback (most recent call last):\nRuntimeError: Event loop is closed {k}\n".encode())
    print("E1202 17:10:02.220118 future.py:387] _SignalingThread.run() raised an exception", file=sys.stderr)
    if error is not None:
      raise error
  return save


def test_a_full_disk_leaves_only_fewshot_s_line(tmp_path, monkeypatch, capfd):
  monkeypatch.setattr(Checkpoints, "_save", _noisy_save(_FULL))
  with pytest.raises(OutputError, match="no space left on the disk to write .*last/2 .*--resume") as refused:
    Checkpoints(tmp_path / "checkpoints").save("last", 2, {"w": jnp.zeros(3)})
  assert "\n" not in str(refused.value)
  out, err = capfd.readouterr()
  assert (out, err) == ("", "")


@pytest.mark.parametrize("error", [None, ValueError("shapes do not match")])
def test_any_other_outcome_writes_out_what_the_libraries_printed(tmp_path, monkeypatch, capfd, error):
  monkeypatch.setattr(Checkpoints, "_save", _noisy_save(error))
  save = lambda: Checkpoints(tmp_path / "checkpoints").save("best", 4, {"w": jnp.zeros(3)})  # noqa: E731
  if error is None:
    save()
  else:
    with pytest.raises(ValueError, match="shapes do not match"):
      save()
  err = capfd.readouterr().err
  assert err.count("Event loop is closed") == 150 and "E1202" in err


def test_the_hold_restores_stderr_and_a_dropped_hold_writes_nothing(capfd):
  with held_output.stderr_held() as held:
    os.write(2, b"held\n")
    assert held.text() == "held\n"
    held.drop()
  os.write(2, b"after\n")
  assert capfd.readouterr().err == "after\n"


def test_a_release_from_another_thread_writes_out_the_hold_and_the_block_then_ends_quietly(capfd):
  """Ctrl-C or SIGTERM during a save: the exiting thread releases the hold, so its line is not held back (a slow
  tier's SIGTERM test lost its line to the hold before release existed).
  """
  import threading  # noqa: PLC0415

  with held_output.stderr_held():
    os.write(2, b"orbax said\n")
    releasing = threading.Thread(target=held_output.release)
    releasing.start()
    releasing.join()
    print("terminated (SIGTERM): the run stopped at ...", file=sys.stderr)
  assert capfd.readouterr().err == "orbax said\nterminated (SIGTERM): the run stopped at ...\n"
