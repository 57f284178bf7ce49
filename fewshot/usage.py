"""The command line around the flags: ``--help`` by heading, ``--flagfile`` errors that name the file, ``--config``.

absl's ``--help`` lists only the flags of the ``__main__`` module, and ours are generated elsewhere
(:mod:`fewshot.options`), so each command's ``--help`` is written here from its flags and their headings; absl's
own flags stay in ``--helpfull``. A run's recorded ``config.json`` can stand in for the defaults of a training
command (``--config``, :func:`recorded_options`). Nothing here imports JAX.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import pathlib
import re
import sys
import textwrap
import typing

from fewshot.errors import ConfigError
from fewshot.options import FLAG_HEADINGS, KINDS, OTHER_FLAGS, RECORDED_EXTRAS, RENAMED, current_names, flag_type


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
  values = current_names(values) if isinstance(values, dict) else values
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
      raise ConfigError(f"--config {file} records {name} {values[name]!r}, not {KINDS[flag_type(hints[name])]}; "
                        f"correct it, or pass --{name} to override it.")
  return {name: value for name, value in values.items() if name in fields}


def _is_a(value, annotation) -> bool:
  """Whether a JSON value fits a field's type (``int | None`` and the like; an int is a float, a bool no number)."""
  if value is None:
    return type(None) in typing.get_args(annotation)
  kind = flag_type(annotation)
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
  for name, heading in FLAG_HEADINGS.items():
    if name in names:
      headings.setdefault(heading, []).append(flag_values[name])
  other = [flag for flag in ours if flag.name not in FLAG_HEADINGS]
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


def renamed_flag(message: str, flag_values=None) -> str | None:
  """What to say instead of absl's "Unknown command line flag 'protocol'" where the flag was renamed
  (:data:`fewshot.options.RENAMED`, whose new name is a flag of the command); None for any other message.
  """
  from absl import flags

  flag_values = flags.FLAGS if flag_values is None else flag_values
  named = re.search(r"Unknown command line flag '(?:no)?(\w+)'", message)
  if named is None or RENAMED.get(named.group(1)) not in flag_values:  # image_shape was a record's, never a flag
    return None
  old, new = named.group(1), RENAMED[named.group(1)]
  return f"--{old} was renamed --{new}: pass --{new} (runs recorded with {old} read as {new})"


# ---- what absl would pass over in silence ------------------------------------------------------------------------
_FLAG_LINE = re.compile(r"--?\w+(=.*)?")
_FILE_FLAGS = ("flagfile", "config")


def check_command_line(argv: list[str], takes_paths: bool) -> None:
  """One-line ``ConfigError`` for what absl would ignore or misread without a word: an empty ``--flagfile=`` or
  ``--config=``, a flag file that is not UTF-8 or has a line that is not ``--flag=value`` (or a comment), and, for a
  command that takes no paths, an argument that is not a flag (``head=dr``).
  """
  args = list(argv[1:])
  for k, arg in enumerate(args):
    name, has_value, value = arg.lstrip("-").partition("=")
    if arg.startswith("-") and name in _FILE_FLAGS:
      value = value if has_value else (args[k + 1] if k + 1 < len(args) else "")
      if not value:
        raise ConfigError(f"--{name} names no file; pass --{name}=FILE, or leave it out.")
      if name == "flagfile":
        _check_flagfile(value, depth=0)
  for arg in args:
    name, has_value, value = arg.lstrip("-").partition("=")
    if arg.startswith("-") and has_value and not value and name in _PATH_FLAGS:
      raise ConfigError(f"--{name}= names no path; pass --{name}=PATH, or leave it out for its default.")
  if takes_paths:
    return
  # `--flag value`: the value is no path; a boolean flag takes no value apart (`--nodistort episodes=40`).
  flag_values = [k + 1 for k, a in enumerate(args) if re.fullmatch(r"--?\w+", a) and not _boolean(a.lstrip("-"))]
  stray = [a for k, a in enumerate(args) if not a.startswith("-") and k not in flag_values]
  if stray:
    name, _, value = stray[0].partition("=")
    fix = f"flags start with two dashes: --{name}={value}" if value and re.fullmatch(r"\w+", name) else \
        f"python -m {command_name()} takes flags only (see --help)"
    raise ConfigError(f"unexpected argument {stray[0]!r}; {fix}.")


# Flags that name a file or folder: given empty (``--workdir=``), absl would quietly take its default instead.
_PATH_FLAGS = ("workdir", "out", "data_dir", "tfds_dir", "split_lists", "records", "keep", "page_file", "runs")


def _boolean(name: str) -> bool:
  """Whether ``--name`` is a boolean flag of the command (``--noname`` too), which takes no value apart."""
  from absl import flags

  for candidate in (name, name[2:] if name.startswith("no") else None):
    if candidate and candidate in flags.FLAGS and flags.FLAGS[candidate].boolean:
      return True
  return False


def _check_flagfile(path: str, depth: int) -> None:
  try:
    text = pathlib.Path(path).read_bytes().decode("utf-8")
  except UnicodeDecodeError as e:
    raise ConfigError(f"--flagfile {path} is not UTF-8 text (byte {e.start}); save it as UTF-8.") from None
  except OSError as e:
    raise ConfigError(f"--flagfile {path} cannot be read ({e.strerror or type(e).__name__}).") from None
  for number, line in enumerate(text.splitlines(), 1):
    line = line.strip()
    if not line or line.startswith(("#", "//")):
      continue
    if not _FLAG_LINE.fullmatch(line):
      name, _, value = line.lstrip("-").replace(" ", "=", 1).partition("=")
      raise ConfigError(f"in {path}, line {number}: {line!r} is not a flag; write one --flag=value a line "
                        f"(--{name}={value}).")
    if line.lstrip("-").startswith("flagfile=") and depth < 8:
      _check_flagfile(line.split("=", 1)[1], depth + 1)
