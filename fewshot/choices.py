"""The names a run's options choose among, with no implementation behind them.

Configurations validate against these names and analysis labels runs with them, so both
load without JAX or Flax; each implementation (``heads``, ``backbones``, ``diagnostics``,
``sources``) takes its names from here.
"""

from __future__ import annotations

# The head MAML and ANIL adapt: Finn et al.'s linear classifier, or a distance head on learned class representatives.
META_HEADS = ("linear", "softmax", "dr")
HEADS = ("softmax", "dr")  # logits -d^2, or the distance ratio -theta log d
CLASSIFIERS = ("proto", "nn")  # distance to the class mean, or to the nearest support point
BACKBONES = ("conv4", "resnet12", "resnet18")
# Of the diagnostics: the paper's, the reference code's, or both (the paper's fields and the code's as <name>_features).
CENTRINGS = ("points", "features", "both")
PSI_CLASSIFIERS = ("model", "proto")  # class distance of the diagnostics' psi: the model's (paper), or prototypes
PLACEMENTS = ("auto", "device", "host")  # where a split's images live while training
# Class distances of the proto and nn heads (fewshot.heads.DISTANCE_FORMS, docs/heads.md); the first is the paper's.
DISTANCES = ("squared_euclidean", "euclidean", "cosine", "angular")
# The backbone's matrix-product precision (fewshot.numerics, docs/numerics.md), in the names of JAX's own
# jax_default_matmul_precision; the first is the default on every backend. Heads, losses, metrics and diagnostics are
# float32 whatever this says.
PRECISIONS = ("float32", "tensorfloat32", "bfloat16")
# How the backbone's convolutions are computed (fewshot.convolutions): auto (the backend's form), or one by name; the
# forms give the same values and gradients to float rounding, and differ in speed where a seed group vmaps them.
CONV_FORMS = ("auto", "lax", "im2col", "map", "im2col_grad", "im2col_flip")

# The paper's names for the four head x classifier combinations, used in logs and tables.
MODEL_NAMES = {
    ("proto", "softmax"): "ProtoNet_S",
    ("proto", "dr"): "ProtoNet_DR",
    ("nn", "softmax"): "1-NN_S",
    ("nn", "dr"): "1-NN_DR",
}

# A head, backbone or DML loss passed as a value from Python is recorded in config.json as "custom:<its name>".
CUSTOM_PREFIX = "custom:"
_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.+")


class OrCustom(tuple):
  """Names to choose among that also admit ``custom:<name>``: a saved run of a head or backbone passed from Python
  (the command line cannot pass one, and ``fewshot.train`` refuses it there before anything runs).
  """

  def __contains__(self, value) -> bool:
    return tuple.__contains__(self, value) or is_custom(value)


def is_custom(value) -> bool:
  return isinstance(value, str) and value.startswith(CUSTOM_PREFIX) and len(value) > len(CUSTOM_PREFIX)


def custom(kind: str, name) -> str:
  """``custom:<name>`` for a value's name; one-line ``ConfigError`` unless it can name a run directory."""
  from fewshot.errors import ConfigError

  if not isinstance(name, str) or not name or not set(name) <= _NAME_CHARACTERS:
    raise ConfigError(f"a {kind} passed from Python needs a name of letters, digits and _-.+ (it names the run), "
                      f"got {name!r}.")
  return CUSTOM_PREFIX + name


def require_values(recorded, passed: dict, fix: str) -> None:
  """One-line ``ConfigError`` where an option is recorded as ``custom:<name>`` (a head, backbone or loss passed as a
  value from Python) and no value is passed for it: a configuration names such a value, it cannot rebuild it.

  ``recorded`` is a configuration (or its saved dict), ``passed`` the values by option name; ``fix`` says where to
  pass the value (``{kind}`` in it names the option).
  """
  from fewshot.errors import ConfigError

  for kind, value in passed.items():
    name = recorded.get(kind) if isinstance(recorded, dict) else getattr(recorded, kind)
    if value is None and is_custom(name):
      raise ConfigError(f"--{kind} {name} names a {kind} passed as a value from Python, which a configuration cannot "
                        f"rebuild; {fix.format(kind=kind)}")


def check_batch(loss: str, needs, classes: int, per_class: int) -> None:
  """One-line ``ConfigError`` for a ``classes x per_class`` batch that cannot give ``loss`` what it ``needs``
  (``"positives"``: a pair of images of one class; ``"negatives"``: images of another class): such a batch would
  train with a loss of exactly 0, or with half of it.
  """
  from fewshot.errors import ConfigError

  missing = [f"--per_class {per_class} gives no positive pair (use 2 or more)" for need in needs
             if need == "positives" and per_class < 2]
  missing += [f"--classes {classes} gives no negatives (use 2 or more)" for need in needs
              if need == "negatives" and classes < 2]
  if missing:
    raise ConfigError(f"the {loss} loss compares positive pairs with negatives in every batch, and "
                      f"{'; '.join(missing)}.")


def display_name(value: str) -> str:
  """A recorded name as logs, tables and run names show it: ``custom:<name>`` as ``<name>``."""
  return value[len(CUSTOM_PREFIX):] if is_custom(value) else value


def model_name(classifier: str, head: str, distance: str = DISTANCES[0]) -> str:
  """The name of a run's model in logs, tables and run names: the paper's (``ProtoNet_DR``), with the distance
  appended where it is not the paper's (``ProtoNet_DR_cosine``); a custom head's own name.
  """
  if is_custom(head):
    return display_name(head)
  return MODEL_NAMES[(classifier, head)] + ("" if distance == DISTANCES[0] else f"_{distance}")

def method_model_name(method: str, first_order: bool, meta_head: str = "linear") -> str:
  """The model name of a meta-learned run: ``MAML``, ``ANIL``, ``FOMAML`` / ``FOANIL`` for the first-order ones, and
  ``MAML_S`` / ``MAML_DR`` where the adapted head is a distance head (``--meta_head softmax`` / ``dr``).
  """
  suffix = {"linear": "", "softmax": "_S", "dr": "_DR"}[meta_head]
  return ("FO" if first_order else "") + method.upper() + suffix


# The metric-learning losses' names and facts are their rows, fewshot.dml.loss_specs.SPECS; the miners' names:
MINERS = ("batch_hard", "semi_hard")
