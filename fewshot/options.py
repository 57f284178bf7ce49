"""Each option defined once: a field of a configuration dataclass, with its default, help and choices.

The command-line flags are generated from the fields (:func:`define_flags`) and read back
into the dataclass (:func:`from_flags`); the dataclass validates itself, so a bad value
is the same one-line ``ConfigError`` from Python and from the command line. A field's ``heading`` is where the
command's ``--help`` lists it (:mod:`fewshot.usage`).

    @dataclasses.dataclass(frozen=True)
    class Config(RunOptions):
      way: int = option(5, "classes per episode", heading="episodes")
      head: str = option("softmax", "the head", heading="model", choices=("softmax", "dr"))
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import os
import typing

from fewshot import choices
from fewshot.errors import ConfigError

# Where a run reads its data from: not part of the run (a moved dataset is the same run; --resume may name new
# places), and made absolute by every configuration, so a record names them wherever it is read.
LOCATION_FIELDS = ("data_dir", "tfds_dir")
_ABSL_DEFINE = {bool: "DEFINE_bool", int: "DEFINE_integer", float: "DEFINE_float", str: "DEFINE_string"}
KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
# What a run's config.json records beside its options (fewshot.training.runs.Runs.begin): read, never replayed.
RECORDED_EXTRAS = ("input_shape", "computation", "provenance", "data")
# Names a run's config.json used before a word got one meaning: a record of either age reads the same
# (current_names), and the old flag is refused naming the new one (fewshot.runner).
RENAMED = {"protocol": "class_splits", "image_shape": "input_shape"}
# Options a resumed run may raise: a finished run trained further (--resume --episodes 4000 on a 2,000-episode run),
# identical to one trained that long from the start (episodes are drawn by their index, the schedule does not
# depend on the total).
# Every integer option is below this: the device counts steps and seeds its keys in 32-bit integers, and TensorBoard's
# hparams take 64-bit ones (a larger --patience trained, tested and then failed writing them).
INT_BOUND = 2 ** 31
EXTENDABLE_FIELDS = ("episodes", "patience")
# Of those, the ones that count steps: a resume may not end a run before its last checkpoint (``--patience`` is checked
# against the run's rows by fewshot.training.loop.check_continued, where the stopping rule lives).
LENGTH_FIELDS = ("episodes",)
# Values a record's option held before they got names of their own: read under today's (current_names).
RENAMED_VALUES = {"class_splits": {"vinyals": "vinyals_sizes"}}
# The --help heading of each flag the commands define, in definition order (which orders the headings).
FLAG_HEADINGS: dict[str, str] = {}
OTHER_FLAGS = "other flags"  # the heading of a flag defined without one
DATA, RUNS, HOSTS = "data", "runs and seed groups", "several hosts"  # headings the training commands share
NUMERICS = "numerics"
MODEL = "model and head"  # the few-shot configuration's and its methods' (fewshot.method_rows)


def option(default, help: str, *, heading: str | None = None, choices: tuple | None = None,  # noqa: A002
           positive: bool = False):
  """A configuration field: its default, its ``--help`` text and heading, and what values it takes."""
  return dataclasses.field(default=default, metadata={"help": help, "heading": heading, "choices": choices,
                                                      "positive": positive})


def precision_option():
  """The ``--precision`` field both training commands' configurations share (fewshot.numerics, docs/numerics.md)."""
  return option("float32", "the backbone's matrix products and convolutions: float32 (exact on every backend), "
                "tensorfloat32 (TF32 on NVIDIA GPUs, 3 bfloat16 passes on TPUs) or bfloat16 (the backend's fastest: "
                "1 bfloat16 pass on TPUs, TF32 on GPUs); CPUs compute float32 under every name. Heads, losses, "
                "metrics and diagnostics are float32 whatever it says (docs/numerics.md)", choices=choices.PRECISIONS,
                heading=NUMERICS)


def conv_option():
  """The ``--conv`` field both training commands' configurations share (fewshot.convolutions)."""
  return option("auto", "how the built-in backbones compute a convolution, every form to the same values (float "
                "rounding aside): lax (a seed group's vmap makes it one grouped convolution), im2col (patches times "
                "the kernel, one matrix product; batched in a group), map (lax; a group maps it over its runs, dense "
                "forward and backward), im2col_grad (lax, its kernel gradient as im2col's product), im2col_flip "
                "(im2col, its input gradient the flipped kernel's im2col convolution) or auto (the backend's: "
                "im2col_flip on CPUs, lax elsewhere until a GPU measures the forms)", choices=choices.CONV_FORMS,
                heading=NUMERICS)


def current_names(record: dict) -> dict:
  """A config.json's object under today's names (:data:`RENAMED`, :data:`RENAMED_VALUES`); a name given both ways
  keeps the new one's value.

  >>> current_names({"protocol": "vinyals", "way": 5})
  {'class_splits': 'vinyals_sizes', 'way': 5}
  """
  named = {RENAMED.get(name, name): value for name, value in record.items() if RENAMED.get(name) not in record}
  for name, renamed in RENAMED_VALUES.items():
    if isinstance(named.get(name), str) and named[name] in renamed:
      named[name] = renamed[named[name]]
  return named


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
      unset = value is None and f.default is None  # "the method's default", resolved by the configuration
      if meta.get("choices") is not None and not unset and value not in meta["choices"]:
        raise ConfigError(f"unknown --{f.name} {value!r}; choose one of {', '.join(map(str, meta['choices']))}.")
      if meta.get("positive") and value is not None and value <= 0:
        kind = "a positive integer" if isinstance(value, int) else "positive"
        raise ConfigError(f"--{f.name} must be {kind}, got {value}.")
      if isinstance(value, int) and not isinstance(value, bool) and not -INT_BOUND < value < INT_BOUND:
        raise ConfigError(f"--{f.name} must be below {INT_BOUND:,} (counts, seeds and lengths are 32-bit integers on "
                          f"the device), got {value:,}.")

  def resolve_locations(self) -> None:
    """Make the :data:`LOCATION_FIELDS` the configuration has absolute (``~`` expanded)."""
    for name in LOCATION_FIELDS:
      if getattr(self, name, None) is not None:
        object.__setattr__(self, name, os.path.abspath(os.path.expanduser(getattr(self, name))))

  def set_default(self, name: str, value) -> None:
    """Resolve a field left at None (frozen dataclasses resolve their defaults in ``__post_init__``)."""
    if getattr(self, name) is None:
      object.__setattr__(self, name, value)

  def with_seed(self, seed: int):
    """The same configuration under another ``seed``, its other options not validated again (they were): a seed group
    of 100,000 seeds has its configurations in a moment.
    """
    other = copy.copy(self)
    object.__setattr__(other, "seed", int(seed))
    return other

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
    known = {k: v for k, v in current_names(values).items() if k in fields}
    for name, value in known.items():
      expected = _mistyped(hints[name], value, fields[name].metadata.get("positive", False))
      if expected is not None:
        raise ConfigError(f"--{name} is {value!r}, not {expected}.")
    return cls(**known)

  def differences(self, other) -> list[str]:
    """Names of the options in which two configurations differ."""
    return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) != getattr(other, f.name)]


_POSITIVE_KINDS = {int: "a positive integer", float: "a positive number"}


def _mistyped(annotation, value, positive: bool) -> str | None:
  """What a field of this annotation takes, where ``value`` is not of it (a bool is no number); else None."""
  base, optional = flag_type(annotation), type(None) in typing.get_args(annotation)
  if base not in KINDS or (value is None and optional):
    return None
  number = isinstance(value, (int, float)) and not isinstance(value, bool)
  if (base is float and number) or (isinstance(value, base) and (base is bool or not isinstance(value, bool))):
    return None
  kind = _POSITIVE_KINDS.get(base, KINDS[base]) if positive else KINDS[base]
  return kind.replace(" or ", ", ") + " or null" if optional else kind


def flag_type(annotation) -> type:
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
    define = getattr(flags, _ABSL_DEFINE[flag_type(hints[f.name])])
    define(f.name, f.default, help_text, flag_values=flag_values)
    if f.metadata.get("heading"):
      FLAG_HEADINGS[f.name] = f.metadata["heading"]


def define_overrides(config_type, names: dict[str, str | None], flag_values=None) -> None:
  """Flags that replace a recorded run's options (``fewshot.evaluate``): each field in ``names`` as a flag of its
  type, default None ("the run's"), with the field's help, or the help ``names`` gives where the meaning narrows.
  """
  from absl import flags

  flag_values = flags.FLAGS if flag_values is None else flag_values
  hints = typing.get_type_hints(config_type)
  fields = {f.name: f for f in dataclasses.fields(config_type)}
  for name, help_text in names.items():
    define = getattr(flags, _ABSL_DEFINE[flag_type(hints[name])])
    define(name, None, f"{help_text or fields[name].metadata['help']} (default: the run's)", flag_values=flag_values)


@contextlib.contextmanager
def flag_heading(heading: str, flag_values=None):
  """``--help`` lists the flags defined inside the block under ``heading``."""
  from absl import flags

  flag_values = flags.FLAGS if flag_values is None else flag_values
  before = set(flag_values)
  yield
  FLAG_HEADINGS.update((name, heading) for name in flag_values if name not in before)


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
