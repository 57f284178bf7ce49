"""JAX's persistent compilation cache, on by default: a second run of the same programs loads them from disk
instead of compiling them again (compiling is most of a short run's start-up).

The cache lives in ``$XDG_CACHE_HOME/fewshot/jax`` (``~/.cache/fewshot/jax`` when ``XDG_CACHE_HOME`` is unset);
``FEWSHOT_COMPILATION_CACHE=/path`` puts it elsewhere and ``FEWSHOT_COMPILATION_CACHE=off`` turns it off. A cache
configured through JAX itself (``JAX_COMPILATION_CACHE_DIR``) is left as it is. A cached program is the compiled
executable itself, so a run that loads it computes bit for bit what a run that compiled it does.

A cached program JAX cannot read (a file cut short or overwritten) is dropped, with one warning line, and compiled
again in its place (:func:`_drop_damaged_entries`); entries are written whole (:func:`_write_entries_whole`), so
processes sharing one folder never read each other's half-written ones.

Every training and evaluation entry point (``fewshot.train``, ``fewshot.dml.train``, ``fewshot.evaluate``,
``fewshot.load`` and ``fewshot.build``) calls :func:`enable` before it compiles anything.
"""

from __future__ import annotations

import contextlib
import os
import sys

ENV = "FEWSHOT_COMPILATION_CACHE"
OFF = ("off", "none", "false", "0")
# JAX writes only programs that took 1 s or more to compile; on a CPU most of a run's programs compile faster than
# that (its evaluation and embedding programs, the data transforms), yet together they take seconds.
MIN_COMPILE_SECONDS = 0.0
_JAX_DEFAULT_MIN_COMPILE_SECONDS = 1.0


def cache_dir(environ: dict | None = None) -> str | None:
  """The folder the cache lives in, or None where ``FEWSHOT_COMPILATION_CACHE`` turns it off."""
  environ = os.environ if environ is None else environ
  value = environ.get(ENV, "").strip()
  if value.lower() in OFF:
    return None
  if value:
    return os.path.abspath(os.path.expanduser(value))
  base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "fewshot", "jax")


def enable() -> str | None:
  """Point JAX's persistent compilation cache at :func:`cache_dir`; the folder in use, or None when off.

  Idempotent; call it before the first compilation. A folder that cannot be created or written is one
  warning line, and the run compiles as if the cache were off.
  """
  import jax

  path = cache_dir()
  if path is None:
    return None
  if jax.config.jax_compilation_cache_dir and ENV not in os.environ:
    _drop_damaged_entries()
    _write_entries_whole()
    return jax.config.jax_compilation_cache_dir  # the user configured JAX's cache directly
  try:
    os.makedirs(path, exist_ok=True)
    if not os.access(path, os.W_OK | os.X_OK):
      raise PermissionError("not writable")
  except OSError as e:
    print(f"warning: compilation cache {path} cannot be used ({e.strerror or e}); compiling without it. Set {ENV} "
          "to another folder, or to off.", file=sys.stderr)
    return None
  jax.config.update("jax_compilation_cache_dir", path)
  if jax.config.jax_persistent_cache_min_compile_time_secs == _JAX_DEFAULT_MIN_COMPILE_SECONDS:  # not set by the user
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
  _drop_damaged_entries()
  _write_entries_whole()
  return path


_dropped_from: set = set()  # the folders this process said it dropped an entry from: one line each


def _drop_damaged_entries() -> None:
  """Have JAX drop a cached program it cannot read, so that the program, compiled again, takes its place.

  JAX warns about an entry it cannot read (a file cut short or overwritten), two lines each, and compiles the
  program; but its cache writes a key only once, so the damaged entry stays and every later run warns and compiles
  again. JAX reads an entry, by its key, in one function, wrapped here: where that read fails, the entry's files are
  deleted and one line says so; JAX then compiles the program and writes it, as on a first run.
  """
  from jax._src import compilation_cache as jax_cache  # JAX's own: the one place a cached program is read

  read = getattr(jax_cache, "get_executable_and_time", None)
  if read is None or getattr(read, "drops_damaged_entries", False):
    return

  def get_executable_and_time(cache_key, *args, **kwargs):
    try:
      return read(cache_key, *args, **kwargs)
    except Exception as e:
      if _asked_to_raise(e, jax_cache) or not _dropped(cache_key):  # not an entry of a local folder: JAX's way
        raise
      return None, None  # as for a program not in the cache: JAX compiles it and writes the entry

  get_executable_and_time.drops_damaged_entries = True
  jax_cache.get_executable_and_time = get_executable_and_time


def _asked_to_raise(e: Exception, jax_cache) -> bool:
  """Whether JAX raises, rather than warns about, this error of a cache read (as its own reader decides)."""
  import jax

  return jax.config.jax_raise_persistent_cache_errors or isinstance(e, getattr(jax_cache, "CacheVerificationError", ()))


def _dropped(cache_key: str) -> bool:
  """Delete the cache's entry of ``cache_key`` (and its last use, ``-atime``), saying so once per folder; False where
  the cache is no local folder holding it.
  """
  import jax

  folder = jax.config.jax_compilation_cache_dir
  entry = os.path.join(folder or "", f"{cache_key}-cache")
  if not folder or not os.path.isfile(entry):
    return False
  for path in (entry, os.path.join(folder, f"{cache_key}-atime")):
    with contextlib.suppress(FileNotFoundError):  # another process sharing the cache dropped it first
      os.remove(path)
  if folder not in _dropped_from:
    _dropped_from.add(folder)
    print(f"warning: dropped a damaged compiled program from the compilation cache {folder}; it is compiled again.",
          file=sys.stderr)
  return True


def _write_entries_whole() -> None:
  """Have JAX write each cache entry to a temporary file and rename it into place.

  Without a size limit, JAX's cache writes an entry in place and without a lock: a second process sharing the folder
  (another host's run, a test worker) that reads it mid-write gets a file cut short, warns, drops it and compiles.
  A rename within one local folder is atomic, so a reader sees the whole entry or none. Entries on a remote file
  system, and caches with a size limit (which JAX writes under its own lock), are left to JAX.
  """
  from jax._src import lru_cache  # JAX's own: the one place an entry is written

  put = lru_cache.LRUCache.put
  if getattr(put, "writes_whole", False):
    return

  def whole_put(self, key: str, value: bytes) -> None:
    if self.eviction_enabled or not key or not lru_cache._is_local_filesystem(str(self.path)):
      return put(self, key, value)
    entry = os.path.join(str(self.path), f"{key}{lru_cache._CACHE_SUFFIX}")
    if os.path.exists(entry):
      return None
    partial = f"{entry}.{os.getpid()}.partial"  # not an entry's name: never read as one
    try:
      with open(partial, "wb") as f:
        f.write(value)
      os.replace(partial, entry)
    finally:
      with contextlib.suppress(FileNotFoundError):
        os.remove(partial)
    return None

  whole_put.writes_whole = True
  lru_cache.LRUCache.put = whole_put
