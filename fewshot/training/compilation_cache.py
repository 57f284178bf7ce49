"""JAX's persistent compilation cache, on by default: a second run of the same programs loads them from disk
instead of compiling them again (compiling is most of a short run's start-up).

The cache lives in ``$XDG_CACHE_HOME/fewshot/jax`` (``~/.cache/fewshot/jax`` when ``XDG_CACHE_HOME`` is unset);
``FEWSHOT_COMPILATION_CACHE=/path`` puts it elsewhere and ``FEWSHOT_COMPILATION_CACHE=off`` turns it off. A cache
configured through JAX itself (``JAX_COMPILATION_CACHE_DIR``) is left as it is. A cached program is the compiled
executable itself, so a run that loads it computes bit for bit what a run that compiled it does.

Every training and evaluation entry point (``fewshot.train``, ``fewshot.dml.train``, ``fewshot.evaluate``,
``fewshot.load`` and ``fewshot.build``) calls :func:`enable` before it compiles anything.
"""

from __future__ import annotations

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
  return path
