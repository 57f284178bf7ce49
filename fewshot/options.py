"""Each option defined once: a field of a configuration dataclass, with its default, help and choices.

The command-line flags are generated from the fields (:func:`define_flags`) and read back
into the dataclass (:func:`from_flags`); the dataclass validates itself, so a bad value
is the same one-line ``ConfigError`` from Python and from the command line. A field's ``group`` is its heading in
the command's ``--help`` (:func:`help_text`); a run's recorded config.json can stand in for the defaults
(``--config``, :func:`recorded_options`).

    @dataclasses.dataclass(frozen=True)
    class Config(RunOptions):
      way: int = option(5, "classes per episode", group="episodes")
      head: str = option("softmax", "the head", group="model", choices=("softmax", "dr"))
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import math
import os
import pathlib
import re
import sys
import textwrap
import typing

from fewshot.errors import ConfigError

# Where a run reads its data from: not part of the run (a moved dataset is the same run; --resume may name new
# places), and made absolute by every configuration, so a record names them wherever it is read.
LOCATION_FIELDS = ("data_dir", "tfds_dir")
_ABSL_DEFINE = {bool: "DEFINE_bool", int: "DEFINE_integer", float: "DEFINE_float", str: "DEFINE_string"}
_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
# What a run's config.json records beside its options (fewshot.training.runs.Runs.begin): read, never replayed.
RECORDED_EXTRAS = ("image_shape", "provenance", "data")
# The --help heading of each flag the commands define, in definition order (which orders the headings).
FLAG_GROUPS: dict[str, str] = {}
OTHER_FLAGS = "other flags"  # the heading of a flag defined without one
DATA, RUNS, HOSTS = "data", "runs and seed groups", "several hosts"  # headings the training commands share


def option(default, help: str, *, group: str | None = None, choices: tuple | None = None,  # noqa: A002
           positive: bool = False):
  """A configuration field: its default, its ``--help`` text and heading (``group``), and what values it takes."""
  return dataclasses.field(default=default, metadata={"help": help, "group": group, "choices": choices,
                                                      "positive": positive})


class RunOptions:
  """What every run configuration shares: validation of its fields' choices and signs, and its records."""

  def check_fields(self) -> None:
    """One-line ``ConfigError`` for a value outside a field's choices, a non-finite float, or a non-positive value
    of a positive field.
    """
    for f in dataclasses.fields(self):
      value, meta = getattr(self, f.name), f.metadata
      if isinstance(value, float) and not math.isfinite(value):  # nan slips past `<= 0`, and trains to NaN
        raise ConfigError(f"--{f.name} must be a finite number, got {value}.")
      if meta.get("choices") is not None and value not in meta["choices"]:
        raise ConfigError(f"unknown --{f.name} {value!r}; choose one of {', '.join(map(str, meta['choices']))}.")
      if meta.get("positive") and value is not None and value <= 0:
        kind = "a positive integer" if isinstance(value, int) else "positive"
        raise ConfigError(f"--{f.name} must be {kind}, got {value}.")

  def resolve_locations(self) -> None:
    """Make the :data:`LOCATION_FIELDS` the configuration has absolute (``~`` expanded)."""
    for name in LOCATION_FIELDS:
      if getattr(self, name, None) is not None:
        object.__setattr__(self, name, os.path.abspath(os.path.expanduser(getattr(self, name))))

  def set_default(self, name: str, value) -> None:
    """Resolve a field left at None (frozen dataclasses resolve their defaults in ``__post_init__``)."""
    if getattr(self, name) is None:
      object.__setattr__(self, name, value)

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, values: dict):
    """The configuration saved as ``values``; fields it lacks (runs from before they existed) take their defaults.

    A value of another type than its field's (an edited record: ``"way": "five"``) is a one-line ``ConfigError``
    naming the field, where the dataclass would fail deep inside its checks.
    """
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    known = {k: v for k, v in values.items() if k in fields}
    for name, value in known.items():
      expected = _mistyped(hints[name], value, fields[name].metadata.get("positive", False))
      if expected is not None:
        raise ConfigError(f"--{name} is {value!r}, not {expected}.")
    return cls(**known)

  def differences(self, other) -> list[str]:
    """Names of the options in which two configurations differ."""
    return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) != getattr(other, f.name)]


_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
_POSITIVE_KINDS = {int: "a positive integer", float: "a positive number"}


def _mistyped(annotation, value, positive: bool) -> str | None:
  """What a field of this annotation takes, where ``value`` is not of it (a bool is no number); else None."""
  base, optional = _flag_type(annotation), type(None) in typing.get_args(annotation)
  if base not in _KINDS or (value is None and optional):
    return None
  number = isinstance(value, (int, float)) and not isinstance(value, bool)
  if (base is float and number) or (isinstance(value, base) and (base is bool or not isinstance(value, bool))):
    return None
  kind = _POSITIVE_KINDS.get(base, _KINDS[base]) if positive else _KINDS[base]
  return kind.replace(" or ", ", ") + " or null" if optional else kind


def _flag_type(annotation) -> type:
  """``int``, ``int | None`` and the like to the flag's type."""
  args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
  return args[0]


def define_flags(config_type, flag_values=None) -> None:
  """Define one absl flag per field of ``config_type``: same name, default, help (and its choices)."""
  from absl import flags  # the command-line entry points only

  flag_values = flags.FLAGS if flag_values is None else flag_values
  hints = typing.get_type_hints(config_type)
  for f in dataclasses.fields(config_type):
    help_text = f.metadata.get("help", "")
    if f.metadata.get("choices") is not None and "one of" not in help_text:
      help_text += f" (one of {', '.join(map(str, f.metadata['choices']))})"
    define = getattr(flags, _ABSL_DEFINE[_flag_type(hints[f.name])])
    define(f.name, f.default, help_text, flag_values=flag_values)
    if f.metadata.get("group"):
      FLAG_GROUPS[f.name] = f.metadata["group"]


@contextlib.contextmanager
def flag_group(heading: str, flag_values=None):
  """``--help`` lists the flags defined inside the block under ``heading``."""
  from absl import flags

  flag_values = flags.FLAGS if flag_values is None else flag_values
  before = set(flag_values)
  yield
  FLAG_GROUPS.update((name, heading) for name in flag_values if name not in before)


def from_flags(config_type, flag_values=None, recorded: dict | None = None):
  """The configuration the parsed flags describe (validated by the dataclass); the ``recorded`` options (a
  replayed config.json's, :func:`recorded_options`) stand in for the defaults of the flags not given.
  """
  from absl import flags

  flag_values = flags.FLAGS if flag_values is None else flag_values
  recorded = recorded or {}
  values = {}
  for f in dataclasses.fields(config_type):
    flag = flag_values[f.name]
    values[f.name] = recorded[f.name] if f.name in recorded and not flag.present else flag.value
  return config_type(**values)


def recorded_options(config_type, path: str, command: str) -> dict:
  """The options a run's ``config.json`` (or its run directory's) records, checked to be ``config_type``'s."""
  file = pathlib.Path(path).expanduser()
  file = file / "config.json" if file.is_dir() else file
  fix = f"pass --config the config.json of a {command} run (runs/<name>/config.json)"
  try:
    values = json.loads(file.read_text(encoding="utf-8"))
  except OSError as e:
    raise ConfigError(f"--config {file}: cannot read it ({e.strerror}); {fix}.") from None
  except ValueError as e:  # not JSON, or not text
    raise ConfigError(f"--config {file} is not JSON ({e}); {fix}.") from None
  fields = {f.name for f in dataclasses.fields(config_type)}
  if not isinstance(values, dict) or not fields & set(values):
    raise ConfigError(f"--config {file} records no option of {command}; {fix}.")
  foreign = sorted(set(values) - fields - set(RECORDED_EXTRAS))
  if foreign:
    named = ", ".join(f"--{name}" for name in foreign[:3]) + (", ..." if len(foreign) > 3 else "")
    raise ConfigError(f"--config {file} is not a {command} run's configuration ({command} has no {named}); replay "
                      f"it with the command that trained it, or {fix}.")
  hints = typing.get_type_hints(config_type)
  for name in fields & set(values):
    if not _is_a(values[name], hints[name]):
      raise ConfigError(f"--config {file} records {name} {values[name]!r}, not {_KINDS[_flag_type(hints[name])]}; "
                        f"correct it, or pass --{name} to override it.")
  return {name: value for name, value in values.items() if name in fields}


def _is_a(value, annotation) -> bool:
  """Whether a JSON value fits a field's type (``int | None`` and the like; an int is a float, a bool no number)."""
  if value is None:
    return type(None) in typing.get_args(annotation)
  kind = _flag_type(annotation)
  if isinstance(value, bool) or kind is bool:
    return isinstance(value, bool) and kind is bool
  return isinstance(value, (int, float) if kind is float else kind)


# ---- --help and flag files -----------------------------------------------------------------------------------
HELP_FLAGS = ("-h", "-?", "--help", "-help", "--helpshort", "-helpshort")  # --helpfull stays absl's: every flag
WIDTH = 100
FLAGFILE_HELP = ("Flags from a file: --flagfile=FILE reads FILE's lines as flags, one --flag=value a line (a line "
                 "starting with # is a comment); a flag after it on the command line overrides the file's. "
                 "--helpfull lists absl's own flags too.")


def command_name() -> str:
  """The running command's module (``fewshot.train``), or its script's name."""
  spec = getattr(sys.modules.get("__main__"), "__spec__", None)
  return spec.name if spec is not None else os.path.basename(sys.argv[0])


def asks_for_help(argv: list[str]) -> bool:
  """Whether the command line (its flags: those before a ``--``) asks for ``--help``."""
  args = list(argv[1:])
  given = args[:args.index("--")] if "--" in args else args
  return any(arg in HELP_FLAGS for arg in given)


def help_text(command: str, doc: str | None, flag_values=None) -> str:
  """A command's ``--help``: usage, what it does (its docstring), and its own flags under their headings."""
  from absl import flags

  flag_values = flags.FLAGS if flag_values is None else flag_values
  ours = [flag for module, defined in flag_values.flags_by_module_dict().items()
          if module.split(".")[0] != "absl" for flag in defined]  # absl's own (--logtostderr, ...) left to --helpfull
  names = {flag.name for flag in ours}
  headings: dict[str, list] = {}
  for name, heading in FLAG_GROUPS.items():
    if name in names:
      headings.setdefault(heading, []).append(flag_values[name])
  other = [flag for flag in ours if flag.name not in FLAG_GROUPS]
  if other:
    headings[OTHER_FLAGS] = other
  usage, description = _usage_and_description(command, doc, "config" in names)
  sections = [usage, description] + [f"{heading}:\n" + "\n".join(map(_flag_help, group))
                                     for heading, group in headings.items()]
  return "\n\n".join(sections + [textwrap.fill(FLAGFILE_HELP, WIDTH)])


def _usage_and_description(command: str, doc: str | None, replays: bool) -> tuple[str, str]:
  """The usage block of the docstring (indented ``python -m`` lines after its summary) or the generic one, and its
  summary with the paragraph of prose after it.
  """
  paragraphs = [p for p in re.split(r"\n\s*\n", inspect.cleandoc(doc or command)) if p.strip()]
  block = paragraphs[1] if len(paragraphs) > 1 and paragraphs[1].startswith(" ") else None
  if block is not None and block.lstrip().startswith("python -m"):
    usage = "usage:\n" + textwrap.indent(textwrap.dedent(block), "  ")
  else:
    usage = f"usage: python -m {command} [--flag=value ...]" + (" [--config=runs/NAME/config.json]" * replays)
    usage += " [--flagfile=FILE]"
  prose = paragraphs[:1] + [p for p in paragraphs[1:2] if block is None]
  text = re.sub(r":\w+:`~?([^`]+)`", r"\1", " ".join(prose)).replace("``", "")
  return usage, textwrap.fill(" ".join(text.split()), WIDTH, break_on_hyphens=False)


def _flag_help(flag) -> str:
  """One flag's name, default, help and choices."""
  from absl import flags

  name = f"--[no]{flag.name}" if isinstance(flag, flags.BooleanFlag) else f"--{flag.name}"
  default = "" if flag.default is None else f" (default: {_shown(flag.default)})"
  text = flag.help
  choices = getattr(flag.parser, "enum_values", None)  # DEFINE_enum: absl writes them "<a|b>: " before the help
  if choices:
    text = text.removeprefix(f"<{'|'.join(choices)}>: ")
    text += "" if "one of" in text else f" (one of {', '.join(choices)})"
  indent = " " * 6
  return f"  {name}{default}\n" + textwrap.fill(text, WIDTH, initial_indent=indent, subsequent_indent=indent,
                                                break_on_hyphens=False)


def _shown(value) -> str:
  return str(value).lower() if isinstance(value, bool) else str(value)


def flagfile_prefix(argv: list[str], message: str, flag_values=None) -> str:
  """``"in FILE: "`` where the flag an error message names first was set by ``--flagfile=FILE``, not on the
  command line itself; else ``""``.
  """
  from absl import flags

  flag_values = flags.FLAGS if flag_values is None else flag_values
  named = re.search(r"(?:--|flag ')(\w+)", message)
  if named is None:
    return ""
  sets = re.compile(rf"--?(no)?{re.escape(named.group(1))}(=|$)").match
  args = list(argv[1:])
  files = [a.split("=", 1)[1] for a in args if re.match(r"--?flagfile=", a)]
  files += [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("--flagfile", "-flagfile")]
  if any(sets(a) for a in args):
    return ""
  for path in files:
    try:
      if any(sets(a) for a in flag_values.read_flags_from_files([f"--flagfile={path}"], force_gnu=False)):
        return f"in {path}: "
    except flags.Error:
      continue
  return ""
