"""Shared fixtures: the real Omniglot data beside the checkout, and a private tfds dir."""

import gc
import os
import pathlib
import signal
import sys
import threading

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
if os.environ.get("FEWSHOT_EMULATE_TF32") == "1":  # the suite as a GPU would multiply (tests/tf32_emulation.py)
  import tf32_emulation

  tf32_emulation.enable()
OMNIGLOT_DIR = pathlib.Path(os.environ.get("FEWSHOT_OMNIGLOT_DIR", REPO.parent / "shared" / "data" / "omniglot"))


@pytest.fixture(scope="session", autouse=True)
def commands_take_ctrl_c():
  """The commands tests interrupt take Ctrl-C as a user's do. A background shell starts its jobs with SIGINT
  ignored, which every process started from them inherits (Python then installs no handler); a handler here
  instead becomes the default disposition in the commands this process starts.
  """
  if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def private_tfds_dir(tmp_path_factory):
  """Prepared datasets go to a temporary dir (inherited by subprocesses), never ~/tensorflow_datasets."""
  path = tmp_path_factory.mktemp("tfds")
  old = os.environ.get("TFDS_DATA_DIR")
  os.environ["TFDS_DATA_DIR"] = str(path)
  yield path
  if old is None:
    os.environ.pop("TFDS_DATA_DIR", None)
  else:
    os.environ["TFDS_DATA_DIR"] = old


@pytest.fixture(scope="session", autouse=True)
def shared_compilation_cache(tmp_path_factory):
  """Tests (and their subprocesses) compile the same episode programs again and again: compile once, into a
  temporary cache (never the user's ~/.cache/fewshot/jax), the package's default cache pointed elsewhere. The
  session's workers (pytest-xdist) share one folder: a program one of them compiled, the other loads (entries are
  written whole, so neither reads the other's half-written ones).
  """
  from fewshot.training import compilation_cache

  root = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    root = root.parent  # the session's folder, above each worker's own
  path = root / "jax_cache"
  path.mkdir(exist_ok=True)
  os.environ[compilation_cache.ENV] = str(path)
  # Subprocesses that compile outside the package's entry points (the experiments' benchmarks) read JAX's own.
  os.environ["JAX_COMPILATION_CACHE_DIR"] = str(path)
  os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
  compilation_cache.enable()
  yield str(path)


@pytest.fixture(scope="session", autouse=True)
def each_prepared_split_read_once():
  """A worker reads each prepared split once and hands every later load a copy: the suite's tests load the same
  few prepared datasets (the strokes, small Omniglot fixtures) some 170 times, each read decoding every record
  (about 1 s for the strokes' 24,000). A prepared folder changed since (a test damaging or rebuilding it) is read
  again: the key holds each file's size and modification time. The first read of each is the package's own path.
  """
  from fewshot.data import tfds_io
  from fewshot.data.split import Split

  read, held = tfds_io.read_split, {}

  def once(builder, split):
    folder = pathlib.Path(builder.data_dir)
    files = tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()))
    key = (str(folder), split, files)
    if key not in held:
      held[key] = read(builder, split)
    kept = held[key]
    return Split(kept.images.copy(), kept.labels.copy(), kept.class_names)

  tfds_io.read_split = once
  yield
  tfds_io.read_split = read


@pytest.fixture(scope="session", autouse=True)
def default_strokes_rendered_once():
  """A worker renders the default strokes once and hands every later preparation of them a copy: their 24,000
  images take ~9 s, and a worker prepares them in more than one folder (its private tfds dir, the data tests' own).
  Any other configuration (the generator's own tests) is rendered each time; a test replacing the generator
  replaces this.
  """
  from fewshot.data import strokes

  render, held = strokes.render_glyphs, []

  def once(*args, **kwargs):
    if args != (strokes.NUM_CLASSES, strokes.PER_CLASS, strokes.SEED) or kwargs:
      return render(*args, **kwargs)
    if not held:
      held.append(render(*args))
    return tuple(a.copy() for a in held[0])

  strokes.render_glyphs = once
  yield
  strokes.render_glyphs = render


@pytest.fixture(scope="module", autouse=True)
def release_compiled_programs():
  """Each test module's compiled programs are released after it. A jitted function keeps a program per static
  argument (a learner per configuration) for the life of the process, and XLA:CPU maps each program's kernels into
  memory maps of their own (about 1,560 for a small seed group and its run alone, trained 3 steps each): a
  long-lived test worker compiling hundreds of configurations reached the kernel's limit of maps per process
  (``vm.max_map_count``, 65,530 by default), where LLVM's next allocation fails and the worker dies of a
  segmentation fault (BUILD_NOTES, "Test suite").
  """
  yield
  if "jax" in sys.modules:
    sys.modules["jax"].clear_caches()
    gc.collect()


@pytest.fixture(scope="session")
def assert_one_line_error():
  """Checks a finished CLI subprocess: exit 2, one ``error:`` line naming the fragments (after the progress lines of
  a run that started), no stdout.
  """
  from cli_output import error_lines

  def check(result, *fragments):
    assert result.returncode == 2, result.stderr
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
      assert fragment in lines[0]
    assert result.stdout == ""

  return check


@pytest.fixture(scope="session")
def omniglot_dir():
  if not any(OMNIGLOT_DIR.glob("images_*.zip")) and not any(OMNIGLOT_DIR.glob("*/*/*/*.png")):
    pytest.skip(f"real Omniglot data not found in {OMNIGLOT_DIR}; set FEWSHOT_OMNIGLOT_DIR")
  return OMNIGLOT_DIR


@pytest.fixture
def on_the_cpu(monkeypatch):
  """The test's devices are the CPU's, also where an accelerator is JAX's default backend: for tests of the CPU's own
  paths (the host-memory check), which would take the device's branch on a GPU.
  """
  import jax

  if jax.default_backend() == "cpu":
    yield
    return
  devices, local_devices = jax.devices, jax.local_devices
  monkeypatch.setattr(jax, "devices", lambda backend=None: devices(backend or "cpu"))
  monkeypatch.setattr(jax, "local_devices", lambda process_index=None, backend=None, host_id=None:
                      local_devices(process_index, backend or "cpu"))
  monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
  with jax.default_device(devices("cpu")[0]):
    yield
