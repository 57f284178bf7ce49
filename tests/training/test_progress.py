"""What a run reports while it trains and records for a collaborator: lines in a log, TensorBoard, provenance, data.

Off a terminal (a log file, nohup, SLURM) a run prints its devices and data, one flushed line per checkpoint and a
line when it tests; on a terminal the progress bar stays. Every metrics.jsonl field is a TensorBoard scalar, and
config.json records the software, hardware and data split it ran on.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import io
import os
import pathlib
import re
import struct
import subprocess
import sys

import jax
import numpy as np
import pytest

from fewshot import data
from fewshot.records.rundir import RunDir
from fewshot.training import progress, provenance

import tiny_run
from environment import checkout_env

FLAGS = tiny_run.flags(episodes=6, test_episodes=2)
CHECKPOINT_LINE = re.compile(r"^(.+): episode (\d+)/6, loss \d+\.\d{3}, val \d+\.\d\d%, best \d+\.\d\d%, "
                             r"elapsed \d+:\d\d:\d\d, ETA (\d+:\d\d:\d\d|\?)$")


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
  """A run trained through the command line with stderr in a pipe, as under nohup; its lines, read as they came."""
  workdir = tmp_path_factory.mktemp("logged") / "run"
  process = subprocess.Popen([sys.executable, "-m", "fewshot.train", f"--workdir={workdir}", *FLAGS],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  lines, running_at_first_checkpoint = [], None
  for line in process.stderr:
    lines.append(line.rstrip("\n"))
    if running_at_first_checkpoint is None and CHECKPOINT_LINE.match(lines[-1]):
      running_at_first_checkpoint = process.poll() is None and not (workdir / "results.json").exists()
  stdout = process.stdout.read()
  assert process.wait() == 0, "\n".join(lines[-20:])
  return workdir, lines, stdout, running_at_first_checkpoint


def test_off_a_terminal_a_run_prints_its_devices_data_a_line_per_checkpoint_and_its_test(logged_run):
  workdir, lines, stdout, running_at_first_checkpoint = logged_run
  assert lines[0] == f"ProtoNet_S: training {workdir} on {provenance.devices()}, backbone in float32"
  splits = data.load_splits("strokes")
  counts = ", ".join(f"{name} {s.num_classes} classes / {len(s.labels)} images" for name, s in splits.items())
  assert lines[1] == (f"data: strokes, {sum(s.num_classes for s in splits.values())} classes and "
                      f"{sum(len(s.labels) for s in splits.values())} images in use: {counts}")
  checkpoints = [CHECKPOINT_LINE.match(line) for line in lines[2:5]]
  assert all(checkpoints) and [m[2] for m in checkpoints] == ["2", "4", "6"]
  rows = RunDir(workdir).read_metrics()
  for match, row in zip(checkpoints, rows):
    assert f"loss {row['train_loss']:.3f}, val {row['val_accuracy']:.2f}%" in match[0]
  assert lines[5:] == ["ProtoNet_S: testing the best checkpoint on 2 test episodes"]
  assert running_at_first_checkpoint  # each line reached the log while the run was still training
  assert "\r" not in "".join(lines) and "\x1b" not in "".join(lines) and "test accuracy" in stdout


def test_on_a_terminal_the_bar_stays_and_no_lines_are_printed(monkeypatch):
  class Terminal(io.StringIO):
    def isatty(self):
      return True

  terminal = Terminal()
  monkeypatch.setattr(sys, "stderr", terminal)
  shown = progress.Progress(total=4, done=0, desc="run", unit="ep", step_key="episode", shown=True)
  shown.update(2, {"loss": "0.5"})
  shown.close()
  assert not shown.lines and "\r" in terminal.getvalue() and "episode 2/4" not in terminal.getvalue()
  hidden = progress.Progress(total=4, done=0, desc="run", unit="ep", step_key="episode", shown=False)
  hidden.update(2, {"loss": "0.5"})
  assert not hidden.lines


def _events(folder: pathlib.Path) -> list:
  """Every event of a folder's event files, read by the TFRecord framing TensorBoard reads (length, its masked
  CRC-32C, the record, its masked CRC-32C; the CRCs are not recomputed here).
  """
  from tensorboardX.proto import event_pb2  # noqa: PLC0415

  events = []
  for path in sorted(folder.glob("events.out.tfevents.*")):
    raw, at = path.read_bytes(), 0
    while at < len(raw):
      (length,) = struct.unpack("<Q", raw[at:at + 8])
      events.append(event_pb2.Event.FromString(raw[at + 12:at + 12 + length]))
      at += 12 + length + 4
  return events


def test_every_metrics_field_is_a_tensorboard_scalar_at_its_episode_grouped_and_the_test_at_the_best(logged_run):
  from fewshot.records.events import tag  # noqa: PLC0415

  workdir = logged_run[0]
  scalars = {(v.tag, e.step): v.simple_value for e in _events(workdir / "tensorboard") for v in e.summary.value
             if v.HasField("simple_value")}
  rows = RunDir(workdir).read_metrics()
  expected = {(tag(name), row["episode"]): value for row in rows for name, value in row.items()
              if name != "episode" and value is not None}
  results = RunDir(workdir).read_results()
  expected.update({(f"test/{name[5:]}", results["best_episode"]): results[name]
                   for name in ("test_accuracy", "test_ci95", "test_episodes", "test_query")})
  assert set(scalars) >= set(expected) and len(rows) == 3
  assert {t.split("/")[0] for t, _ in expected} == {"train", "val", "time", "diagnostics", "test"}
  assert ("diagnostics/norm_ratio", 2) in expected and ("train/loss", 2) in expected
  for key, value in expected.items():
    assert scalars[key] == pytest.approx(value, rel=1e-6), key  # stored as float32
  hparams = [v for e in _events(workdir / "tensorboard") for v in e.summary.value if v.tag == "_hparams_/session_start_info"]
  assert hparams, "the run's options are in the HPARAMS tab"


def _installed() -> bool:
  """Whether Python finds fewshot's package metadata (an installation; a bare checkout on PYTHONPATH has none)."""
  try:
    importlib.metadata.version("fewshot")
  except importlib.metadata.PackageNotFoundError:
    return False
  return True


def test_config_json_records_the_software_hardware_and_data_split(logged_run):
  saved = RunDir(logged_run[0]).read_config()
  recorded = saved["provenance"]
  assert (recorded["jax"], recorded["backend"], recorded["device_count"], recorded["process_count"]) == (
      jax.__version__, jax.default_backend(), jax.device_count(), jax.process_count())
  assert recorded["device_kind"] == jax.devices()[0].device_kind and recorded["fewshot"] == "0.1.0"
  cpuinfo = pathlib.Path("/proc/cpuinfo")
  if cpuinfo.exists():  # the CPU's own name, read independently of the code under test
    named = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("model name")]
    assert recorded["cpu"] == named[0]
  assert recorded["installed"] is _installed() and (saved["precision"], saved["conv"]) == ("float32", "auto")
  assert recorded["command"].split()[1:3] == ["-m", "fewshot.train"]
  assert f"--workdir={logged_run[0]}" in recorded["command"]
  started = datetime.datetime.fromisoformat(recorded["started"])
  assert started.tzinfo is not None and abs(datetime.datetime.now(datetime.timezone.utc) - started).days == 0
  checkout = pathlib.Path(__file__).resolve().parents[2]
  if (checkout / ".git").exists():  # from a checkout: the commit it ran at
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert recorded["git_commit"].split("+")[0] == head.strip()
  splits = data.load_splits("strokes")
  assert saved["data"] == {**{name: {"classes": s.num_classes, "images": len(s.labels)} for name, s in splits.items()},
                           "total": {"classes": sum(s.num_classes for s in splits.values()),
                                     "images": sum(len(s.labels) for s in splits.values())}}


def test_a_resumed_run_purges_the_events_past_its_last_checkpoint_even_from_the_start(tmp_path):
  from fewshot.records.events import EventWriter  # noqa: PLC0415

  first = EventWriter(tmp_path, "episode")
  for episode in (2, 4, 6):  # 6 was written, then the run was killed before its checkpoint
    first.write({"episode": episode, "train_loss": float(episode)})
  first.close()
  resumed = EventWriter(tmp_path, "episode", resumed_step=4)  # in the same second: a file of its own all the same
  resumed.write({"episode": 6, "train_loss": 60.0})
  resumed.close()
  again = EventWriter(tmp_path, "episode")  # stopped inside its first checkpoint: resumed from the start
  again.write({"episode": 2, "train_loss": 20.0})
  again.close()
  assert len(list((tmp_path / "tensorboard").iterdir())) == 3
  events = _events(tmp_path / "tensorboard")
  starts = [e for e in events if e.HasField("session_log")]
  assert [s.step for s in starts] == [1, 5, 1] and {s.session_log.status for s in starts} == {starts[0].session_log.START}
  assert np.isclose([v.simple_value for e in events for v in e.summary.value if e.step == 6], [6.0, 60.0]).all()


def test_an_event_file_opened_at_the_end_of_a_second_is_named_by_the_next_and_sorts_after_earlier_ones(tmp_path,
                                                                                                       monkeypatch):
  """tensorboardX reads the clock again for the name's second: at x.995 s it could read x + 1 while the suffix kept
  x's nanoseconds, sorting before a file opened a moment earlier in x + 1.
  """
  from fewshot.records import events  # noqa: PLC0415

  second = 1_800_000_000
  clock = iter([second * 10**9 + 995_000_000, (second + 1) * 10**9 + 200])
  slept = []
  monkeypatch.setattr(events.time, "time_ns", lambda: next(clock))
  monkeypatch.setattr(events.time, "sleep", slept.append)
  monkeypatch.setattr(events.time, "time", lambda: second + 1.0000002)
  events.EventWriter(tmp_path / "late", "episode").close()
  (name,) = [p.name for p in (tmp_path / "late" / "tensorboard").iterdir()]
  assert slept and abs(slept[0] - 0.005) < 1e-9
  assert f".tfevents.{second + 1}." in name and name.endswith(f".000000200.{os.getpid()}")
  monkeypatch.setattr(events.time, "time_ns", lambda: (second + 1) * 10**9 + 100)  # a file opened just before it
  events.EventWriter(tmp_path / "late", "episode").close()
  assert sorted(p.name for p in (tmp_path / "late" / "tensorboard").iterdir())[1] == name


def test_a_rows_events_are_on_disk_when_it_is_written_so_an_immediate_exit_keeps_them(tmp_path):
  """SIGTERM exits at once (os._exit): events still queued for a writer thread were lost behind a saved checkpoint."""
  row = {"episode": 20, **{f"val_metric{k}": float(k) for k in range(13)}}
  code = ("import os, pathlib, sys; from fewshot.records.events import EventWriter\n"
          f"w = EventWriter(pathlib.Path(sys.argv[1]), 'episode'); w.write({row!r}); os._exit(143)")
  done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=checkout_env(), capture_output=True, text=True)
  assert done.returncode == 143, done.stderr
  written = {v.tag: v.simple_value for e in _events(tmp_path / "tensorboard") for v in e.summary.value}
  assert written == {f"val/metric{k}": float(k) for k in range(13)}


def test_a_checkout_without_package_metadata_records_its_pyproject_version(monkeypatch):
  def not_installed(name):
    raise importlib.metadata.PackageNotFoundError(name)

  monkeypatch.setattr(importlib.metadata, "version", not_installed)
  pyproject = (pathlib.Path(provenance.__file__).resolve().parents[2] / "pyproject.toml").read_text()
  assert provenance.version() == (re.search(r'^version = "(.+)"', pyproject, re.MULTILINE)[1], False)
  recorded = provenance.provenance()
  assert recorded["fewshot"] != "unknown" and recorded["installed"] is False
  monkeypatch.setattr(provenance, "CHECKOUT", pathlib.Path("/nonexistent"))
  assert provenance.version() == ("unknown", False)


@pytest.mark.slow  # a run trained in a fresh interpreter: ~20 s
def test_a_checkout_on_pythonpath_alone_trains_and_records_that_it_is_not_installed(tmp_path):
  """As on a cluster: the checkout on PYTHONPATH, its dependencies installed, fewshot itself not (no metadata)."""
  site = next(pathlib.Path(p) for p in sys.path if p.endswith("site-packages") and (pathlib.Path(p) / "jax").exists())
  packages = tmp_path / "site-packages"
  packages.mkdir()
  for entry in site.iterdir():  # every installed package but fewshot's metadata and its editable-install hook
    if "fewshot" not in entry.name and not entry.name.startswith("__editable__"):
      (packages / entry.name).symlink_to(entry)
  checkout = tmp_path / "checkout"  # the package alone: an installed checkout also holds fewshot.egg-info
  checkout.mkdir()
  (checkout / "fewshot").symlink_to(pathlib.Path(provenance.__file__).resolve().parents[1])
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), str(packages)])}
  workdir = tmp_path / "run"
  done = subprocess.run([sys.executable, "-S", "-m", "fewshot.train", f"--workdir={workdir}", *FLAGS], env=env,
                        capture_output=True, text=True, cwd=tmp_path)
  assert done.returncode == 0, done.stderr[-3000:]
  recorded = RunDir(workdir).read_config()["provenance"]
  assert recorded["installed"] is False and recorded["fewshot"] == "0.1.0"
  assert "test accuracy" in done.stdout


def test_the_first_lines_name_the_files_the_data_was_read_from(tmp_path):
  (tmp_path / "images_background_small1.zip").write_bytes(b"")
  (tmp_path / "images_background_small2").mkdir()
  (tmp_path / ".DS_Store").write_bytes(b"")
  (tmp_path / "LICENSE").write_text("not data")
  assert provenance.data_files(str(tmp_path)) == ["images_background_small1.zip", "images_background_small2/"]
  record = {"train": {"classes": 2, "images": 40}, "test": {"classes": 1, "images": 20},
            "total": {"classes": 3, "images": 60}, "files": provenance.data_files(str(tmp_path))}
  assert provenance.describe_data("omniglot", record) == (
      "data: omniglot (read from images_background_small1.zip, images_background_small2/), 3 classes and 60 images "
      "in use: train 2 classes / 40 images, test 1 classes / 20 images")
  assert provenance.data_files(None) == [] and provenance.data_files(str(tmp_path / "gone")) == []
