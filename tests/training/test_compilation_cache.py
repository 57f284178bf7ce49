"""The persistent compilation cache: where it lives, that a second process loads what the first compiled, and off."""

import os
import pathlib
import subprocess
import sys

from fewshot.training import compilation_cache

# Compiles one small program and prints how many compilations the persistent cache answered.
PROGRAM = """
import jax, jax.numpy as jnp
from fewshot.training import compilation_cache
hits = []
jax.monitoring.register_event_listener(lambda event, **_: hits.append(event == "/jax/compilation_cache/cache_hits"))
print(compilation_cache.enable())
jax.jit(lambda x: jnp.tanh(x @ x.T).sum())(jnp.ones((8, 8))).block_until_ready()
print(sum(hits))
"""


def _run(environ: dict) -> list[str]:
  env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}  # the suite's own cache: not this one
  env.update(environ)
  done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env)
  assert done.returncode == 0, done.stderr[-2000:]
  return done.stdout.split()


def test_the_cache_folder_is_the_user_s_cache_unless_overridden_or_off(tmp_path):
  home = str(pathlib.Path("~").expanduser())
  assert compilation_cache.cache_dir({}) == os.path.join(home, ".cache", "fewshot", "jax")
  assert compilation_cache.cache_dir({"XDG_CACHE_HOME": "/xdg"}) == "/xdg/fewshot/jax"
  assert compilation_cache.cache_dir({"FEWSHOT_COMPILATION_CACHE": str(tmp_path)}) == str(tmp_path)
  for off in ("off", "OFF", "none", "0"):
    assert compilation_cache.cache_dir({"FEWSHOT_COMPILATION_CACHE": off}) is None


def test_a_second_process_loads_what_the_first_compiled(tmp_path):
  cache = tmp_path / "cache"
  first = _run({"FEWSHOT_COMPILATION_CACHE": str(cache)})
  written = sorted(p.name for p in cache.iterdir())
  assert first == [str(cache), "0"] and written  # compiled, and written where configured
  second = _run({"FEWSHOT_COMPILATION_CACHE": str(cache)})
  assert second[0] == str(cache) and int(second[1]) >= 1  # loaded from the cache
  assert sorted(p.name for p in cache.iterdir()) == written  # nothing compiled again


def test_off_leaves_jax_without_a_cache(tmp_path):
  # The XDG folder is where the default cache would go: off must write nothing there either.
  assert _run({"FEWSHOT_COMPILATION_CACHE": "off", "XDG_CACHE_HOME": str(tmp_path)}) == ["None", "0"]
  assert not any(tmp_path.iterdir())


def test_an_entry_is_written_whole_under_its_name_never_partly(tmp_path, monkeypatch):
  """A process sharing the folder looks the entry up by its name: until the rename, that name does not exist."""
  from jax._src import lru_cache

  compilation_cache.enable()
  cache = lru_cache.LRUCache(str(tmp_path), max_size=-1)
  value = os.urandom(1 << 20)
  seen = []
  replace = os.replace

  def watched_replace(source, target):
    seen.append((os.path.exists(target), pathlib.Path(source).read_bytes() == value))
    replace(source, target)

  monkeypatch.setattr(os, "replace", watched_replace)
  cache.put("key", value)
  cache.put("key", b"other")  # a key is written once
  assert seen == [(False, True)]
  assert cache.get("key") == value and sorted(p.name for p in tmp_path.iterdir()) == ["key-cache"]
