"""Every command's ``--help`` lists its own flags under headings, without absl's or JAX; a run starts from a file of
flags (``--flagfile``) or from a recorded run's configuration (``--config``, its flags overriding it).
"""

import dataclasses
import json
import pathlib
import re
import subprocess
import sys

import pytest

from fewshot import usage
from fewshot.config import Config
from fewshot.dml.config import DMLConfig
from fewshot.errors import ConfigError

from environment import checkout_env

HEAVY = {"jax", "flax", "orbax", "tensorflow", "tensorflow_datasets"}
RUNS, HOSTS = "runs and seed groups", "several hosts"
RUN_FLAGS = {"placement": "data", "workdir": RUNS, "resume": RUNS, "seeds": RUNS, "config": RUNS,
             "coordinator_address": HOSTS, "num_processes": HOSTS, "process_id": HOSTS}
# Each command's headings in order, and the headings of the flags it defines beside its configuration's fields.
HEADINGS = {
    "fewshot.train": ["data", "model and head", "episodes and training", "evaluation", RUNS, "numerics", HOSTS],
    "fewshot.dml.train": ["data", "model and loss", "batches and training", RUNS, "numerics", HOSTS],
    "fewshot.evaluate": ["the run", "test episodes", "data", "Lake's one-shot runs"],
    "fewshot.analyze": ["comparison", "output"],
    "fewshot.plot": ["figures"],
}
OWN_FLAGS = {
    "fewshot.train": RUN_FLAGS,
    "fewshot.dml.train": {**RUN_FLAGS, "data_parallel": "batches and training"},
    "fewshot.evaluate": {"workdir": "the run", "checkpoint": "the run", "test_by": "test episodes",
                         "test_episodes": "test episodes", "test_way": "test episodes", "shot": "test episodes",
                         "test_query": "test episodes", "seed": "test episodes",
                         "cached_episodes": "test episodes", "test_shifts": "test episodes", "record": "test episodes",
                         "data_dir": "data", "tfds_dir": "data", "lake_runs": "Lake's one-shot runs",
                         "lake_design": "Lake's one-shot runs"},
    "fewshot.analyze": {"pairs": "comparison", "list": "comparison", "exclude": "comparison", "measurement": "comparison", "format": "output",
                        "out": "output"},
    "fewshot.plot": {"out": "figures", "format": "figures", "exclude": "figures", "landscape_only": "figures"},
}
CONFIGS = {"fewshot.train": Config, "fewshot.dml.train": DMLConfig}
# Where a few options belong, said here rather than read back from the fields.
SOME_FIELDS = {"fewshot.train": {"dataset": "data", "head": "model and head", "way": "episodes and training",
                                 "test_episodes": "evaluation", "seed": RUNS},
               "fewshot.dml.train": {"dataset": "data", "loss": "model and loss", "classes": "batches and training",
                                     "seed": RUNS}}
TINY = ["--way=2", "--query=1", "--test_query=1", "--episodes=2", "--eval_every=2", "--val_episodes=1",
        "--test_episodes=1"]


def _run(*args, cwd=None, python=()):
  return subprocess.run([sys.executable, *python, *args], capture_output=True, text=True, cwd=cwd, env=checkout_env())


def _defined(command: str) -> dict[str, list[str]]:
  """The flags ``command`` defines, and absl's (with its help flags), by who defines them."""
  code = (f"import importlib, json; from absl import app, flags; importlib.import_module({command!r}).define_flags()\n"
          "app.define_help_flags(); by = flags.FLAGS.flags_by_module_dict()\n"
          "print(json.dumps({'ours': [f.name for m, fs in by.items() if not m.startswith('absl') for f in fs],\n"
          "                  'absl': [f.name for m, fs in by.items() if m.startswith('absl') for f in fs]}))")
  result = _run("-c", code)
  assert result.returncode == 0, result.stderr
  return json.loads(result.stdout)


def _entries(text: str) -> dict[str, dict[str, tuple[str | None, str]]]:
  """A help text's flags: heading -> flag -> (its default as shown, its help)."""
  entries, heading, flag = {}, None, None
  for line in text.splitlines():
    if re.fullmatch(r"\S.*:", line):
      heading, flag = line[:-1], None
    elif match := re.fullmatch(r"  --(?:\[no\])?(\w+)(?: \(default: (.*)\))?", line):
      flag = match.group(1)
      entries.setdefault(heading, {})[flag] = (match.group(2), "")
    elif flag is not None and line.startswith("      "):
      default, help_text = entries[heading][flag]
      entries[heading][flag] = (default, f"{help_text} {line.strip()}".strip())
  return entries


def _imported(stderr: str) -> set[str]:
  """The top-level packages a ``python -X importtime`` run imported."""
  return {line.rsplit("|", 1)[1].strip().split(".")[0] for line in stderr.splitlines()
          if line.startswith("import time:")}


@pytest.mark.parametrize("command", sorted(HEADINGS))
def test_help_lists_every_flag_of_the_command_under_its_heading_and_nothing_of_absl(command):
  result = _run("-m", command, "--help", python=("-X", "importtime"))
  assert result.returncode == 0, result.stderr[-2000:]
  assert not _imported(result.stderr) & HEAVY, "--help loaded JAX or its kin"
  text = result.stdout
  assert text.startswith("usage:") and f"python -m {command}" in text.split("\n\n")[0]
  assert len(text.split("\n\n")[1]) > 40, "a paragraph saying what the command does"
  assert "--flagfile=FILE" in text and "--helpfull" in text
  entries = _entries(text)
  assert list(entries) == HEADINGS[command]
  shown = {flag: heading for heading, flags in entries.items() for flag in flags}
  defined = _defined(command)
  assert sorted(shown) == sorted(defined["ours"])
  assert not set(shown) & set(defined["absl"])
  assert "--logtostderr" not in text and "only_check_args" not in text
  expected = dict(OWN_FLAGS[command])
  config_type = CONFIGS.get(command)
  for field in dataclasses.fields(config_type) if config_type else ():
    expected[field.name] = field.metadata["heading"]
    default, help_text = entries[expected[field.name]][field.name]
    assert default == (None if field.default is None else json.dumps(field.default).strip('"')), field.name
    assert field.metadata["help"].split()[0] in help_text
    for choice in field.metadata["choices"] or ():
      assert choice in help_text, (field.name, choice)
  assert shown == expected
  assert SOME_FIELDS.get(command, {}).items() <= shown.items()


def test_h_and_helpshort_are_help_and_helpfull_stays_absls():
  help_text = _run("-m", "fewshot.train", "--help").stdout
  for flag in ("-h", "--helpshort"):
    result = _run("-m", "fewshot.train", flag, "--way=0")  # help first, whatever else the line holds
    assert (result.returncode, result.stdout) == (0, help_text)
  full = _run("-m", "fewshot.train", "--helpfull").stdout
  assert "logtostderr" in full and "--dataset" in full


def test_what_absl_would_pass_over_in_silence_is_one_line_naming_the_fix(tmp_path, assert_one_line_error):
  """Before, each of these trained a run with the option ignored (ProtoNet_S for ``head=dr``), or gave a traceback."""
  files = {"dashless": "# the head\nhead=dr\n", "spaced": "--episodes 40\n"}
  for name, text in files.items():
    (tmp_path / name).write_text(text)
  (tmp_path / "latin1").write_bytes(b"--way=3 # \xe9\n")
  cases = {
      "positional": (["head=dr"], "unexpected argument 'head=dr'; flags start with two dashes: --head=dr."),
      "word": (["--way=3", "again"], "unexpected argument 'again'; python -m "),  # then the command's name
      "dashless": ([f"--flagfile={tmp_path / 'dashless'}"],
                   f"in {tmp_path / 'dashless'}, line 2: 'head=dr' is not a flag; write one --flag=value a line "
                   "(--head=dr)."),
      "spaced": (["--flagfile", str(tmp_path / "spaced")], "line 1: '--episodes 40' is not a flag"),
      "latin1": ([f"--flagfile={tmp_path / 'latin1'}"], f"--flagfile {tmp_path / 'latin1'} is not UTF-8 text"),
      "empty flagfile": (["--flagfile="], "--flagfile names no file; pass --flagfile=FILE, or leave it out."),
      "empty config": (["--config="], "--config names no file"),
  }
  for name, (flags, message) in cases.items():
    with pytest.raises(ConfigError) as refused:
      usage.check_command_line(["python -m fewshot.train", *flags], takes_paths=False)
    assert message in str(refused.value) and "\n" not in str(refused.value), name
  usage.check_command_line(["analyze", "runs/A", "--", "runs/B"], takes_paths=True)  # paths, for analyze and plot
  usage.check_command_line(["train", "--way", "3", "--noaugment"], takes_paths=False)  # a flag's value is no argument
  # Through the commands: exit 2, one line, nothing written.
  running = {command: subprocess.Popen([sys.executable, "-m", command, *flags, f"--workdir={tmp_path / 'runs'}"],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=checkout_env())
             for command, flags in (("fewshot.train", ["head=dr"]),
                                    ("fewshot.dml.train", [f"--flagfile={tmp_path / 'dashless'}"]))}
  for command, process in running.items():
    stdout, stderr = process.communicate(timeout=120)
    assert_one_line_error(subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr),
                          "head=dr")
  assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("line, fragment", [("--wayy=2", "Unknown command line flag 'wayy'"),
                                            ("--way=five", "flag --way=five"),
                                            ("--way=0", "--way must be a positive integer")])
def test_a_bad_flag_in_a_flag_file_is_one_line_naming_the_file(tmp_path, assert_one_line_error, line, fragment):
  flagfile = tmp_path / "run.flags"
  flagfile.write_text(f"# a comment\n--dataset=strokes\n{line}\n")
  result = _run("-m", "fewshot.train", f"--flagfile={flagfile}", f"--workdir={tmp_path / 'run'}")
  assert_one_line_error(result, f"error: in {flagfile}: ", fragment)
  assert not (tmp_path / "run").exists()


def _write_config(path: pathlib.Path, config) -> pathlib.Path:
  path.mkdir(parents=True)
  (path / "config.json").write_text(json.dumps({**config.to_dict(), "input_shape": [28, 28, 1], "provenance": {},
                                                "data": {}}))
  return path / "config.json"


def test_config_of_another_command_or_no_config_is_one_line_naming_the_file(tmp_path, assert_one_line_error):
  dml = _write_config(tmp_path / "dml", DMLConfig())
  fewshot_run = _write_config(tmp_path / "fewshot", Config())
  for command, path in (("fewshot.train", dml), ("fewshot.dml.train", fewshot_run)):
    assert_one_line_error(_run("-m", command, f"--config={path}"), str(path), "not a", "run's configuration")
  (tmp_path / "broken.json").write_text("{")
  for path in (tmp_path / "broken.json", tmp_path / "missing.json"):
    assert_one_line_error(_run("-m", "fewshot.train", f"--config={path}"), str(path))
  assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.json", "dml", "fewshot"]  # no run started


def test_seeds_replace_a_replayed_seed_but_not_a_given_one(tmp_path, assert_one_line_error):
  path = _write_config(tmp_path / "run", Config(seed=3))
  (tmp_path / "file").write_text("")  # a --workdir that cannot be made: the error after the flags passed
  result = _run("-m", "fewshot.train", f"--config={path}", "--seeds=0-1", f"--workdir={tmp_path / 'file'}")
  assert_one_line_error(result, "is a file")
  result = _run("-m", "fewshot.train", f"--config={path}", "--seed=3", "--seeds=0-1")
  assert_one_line_error(result, "--seeds trains a group and --seed a single run")


@pytest.mark.slow  # 11 s: two training processes
def test_a_run_from_a_flag_file_replayed_with_one_option_changed(tmp_path):
  """The flag file's options train (a flag after it overriding it); ``--config`` replays the run's config.json with
  ``--episodes`` changed, into where that configuration's run goes by default.
  """
  flagfile = tmp_path / "tiny.flags"
  flagfile.write_text("\n".join(["--way=3", *TINY]) + "\n")
  first = _run("-m", "fewshot.train", f"--flagfile={flagfile}", "--way=2", "--workdir=first", cwd=tmp_path)
  assert first.returncode == 0, first.stderr[-2000:]
  recorded = Config.from_dict(json.loads((tmp_path / "first" / "config.json").read_text()))
  assert recorded == Config(way=2, query=1, test_query=1, episodes=2, eval_every=2, val_episodes=1, test_episodes=1)
  replay = _run("-m", "fewshot.train", "--config=first/config.json", "--episodes", "4", cwd=tmp_path)
  assert replay.returncode == 0, replay.stderr[-2000:]
  replayed = Config.from_dict(json.loads((tmp_path / "runs" / recorded.run_name / "config.json").read_text()))
  assert recorded.differences(replayed) == ["episodes"] and replayed.episodes == 4
