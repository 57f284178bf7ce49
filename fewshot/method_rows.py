"""The episodic methods, one row each: the options a method owns (a dataclass of its own, which
:class:`fewshot.config.Config` derives from through :func:`option_sets`), its model's name, its facts, and (as
``"module:name"`` strings imported on use by :mod:`fewshot.episodic.methods`) its steps and its learner.

The rows hold only light values, so the configuration reads them without importing JAX: :class:`fewshot.config.
Config` refuses an option of another method in one line and lets the run's own method check and complete its
options; no command tests a method by name. A new method is its module of steps plus a row here.

    >>> METHODS["anil"].model_name({"first_order": True, "meta_head": "dr"})
    'FOANIL_DR'
    >>> [(m.embeds_once, m.distance_head) for m in (METHODS["protonet"], METHODS["baseline_pp"], METHODS["maml"])]
    [(True, True), (True, False), (False, False)]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from fewshot import choices
from fewshot.errors import ConfigError
from fewshot.options import MODEL, option

# protonet's options: its heads, and the diagnostics and test views of its one embedding. They are Config's own
# fields, as they were before there were other methods, so that config.json and the listings keep their order.
HEAD_OPTIONS = ("head", "classifier", "distance", "test_shifts", "psi_classifier", "centring")
INNER_DEFAULTS = {"inner_steps": 1, "test_inner_steps": 3, "inner_lr": 0.4, "meta_batch": 1, "meta_head": "linear"}


@dataclasses.dataclass(frozen=True)
class InnerLoopOptions:
  """maml's and anil's options: the inner loop and its head (None: unset; their check sets the defaults)."""

  inner_steps: int | None = option(None, "maml/anil: gradient steps on the support set in each training episode "
                                   "(default 1, Finn et al.'s Omniglot)", positive=True, heading=MODEL)
  test_inner_steps: int | None = option(None, "maml/anil: the steps in validation and test episodes (default 3)",
                                        positive=True, heading=MODEL)
  inner_lr: float | None = option(None, "maml/anil: the inner steps' rate (default 0.4, Finn et al.'s Omniglot)",
                                  positive=True, heading=MODEL)
  first_order: bool = option(False, "maml/anil: the meta-gradient without the inner steps' second derivatives "
                             "(FOMAML)", heading=MODEL)
  meta_head: str | None = option(None, "maml/anil: the head adapted in the inner loop: linear (Finn et al.'s, the "
                                 "default), softmax (logits -||z - w_c||^2 to class representatives w_c, adapted like "
                                 "its weights) or dr (logits -theta log ||z - w_c||, theta = exp(rho) meta-learned, "
                                 "never adapted)", choices=choices.META_HEADS, heading=MODEL)
  meta_batch: int | None = option(None, "maml/anil: episodes per meta-update, drawn together so that no class "
                                  "repeats within one (default 1; Finn et al.'s Omniglot: 32 at 5-way, 16 at 20-way); "
                                  "--episodes counts meta-updates", positive=True, heading=MODEL)


@dataclasses.dataclass(frozen=True)
class BaselinePPOptions:
  """baseline_pp's options: its training classifier's size and its test-time fitting."""

  base_classes: int | None = option(None, "baseline_pp: the training classifier's outputs, at least the train "
                                    "split's classes (e.g. 64 on mini_imagenet; Chen et al.'s code gives more)",
                                    positive=True, heading=MODEL)
  finetune_steps: int | None = option(None, "baseline_pp: SGD steps fitting each test episode's classifier on its "
                                      "support set (default 100, Chen et al.'s epochs)", positive=True, heading=MODEL)


@dataclasses.dataclass(frozen=True)
class Method:
  """One episodic method.

  Attributes:
    summary: what it is, for ``--method``'s help.
    steps: ``"module"`` of its steps (the functions :mod:`fewshot.episodic.methods` lists).
    learner: ``"module:name"`` of ``(config, head, backbone) -> learner``.
    option_set: the dataclass of its own options (shared by siblings such as maml and anil), or None; ``Config``
      takes their fields as flags (:func:`option_sets`), and given to another method they are refused.
    model_name: its model's name in logs, tables and run names, from a mapping of options (a ``Config``'s or a
      published entry's; missing ones take their defaults).
    check: ``(config) -> None``: its own checks (one-line ``ConfigError``) and the defaults of its options.
    embeds_once: its test embeds each image once with the trained backbone, frozen (so ``fewshot.load(...).embed``
      gives what testing sees); False for a method that adapts its network to each episode.
    distance_head: its test classifies those embeddings under a distance head, so ``logits``, ``--test_by class``
      and ``cached``, Lake's runs and ``--test_shifts`` apply; False where it fits a classifier to each episode.
    diagnoses: whether its metrics rows carry the update diagnostics.
    instead: said after the refusal of another method's option (e.g. where its own stands instead).
    shared_options: ``Config``'s own fields that only this method uses (protonet's heads), refused to the others.
  """

  summary: str
  steps: str
  learner: str
  option_set: type | None
  model_name: Callable[[Mapping], str]
  check: Callable[[object], None]
  embeds_once: bool
  distance_head: bool
  diagnoses: bool
  instead: str = ""
  shared_options: tuple[str, ...] = ()

  @property
  def options(self) -> tuple[str, ...]:
    """The names of every option it owns: its option set's and its :attr:`shared_options`."""
    own = tuple(f.name for f in dataclasses.fields(self.option_set)) if self.option_set else ()
    return self.shared_options + own


def _protonet_name(o: Mapping) -> str:
  return choices.model_name(o.get("classifier", "proto"), o.get("head", "softmax"),
                            o.get("distance", choices.DISTANCES[0]))


def _meta_name(method: str) -> Callable[[Mapping], str]:
  return lambda o: choices.method_model_name(method, o.get("first_order") or False, o.get("meta_head") or "linear")


def _no_check(config) -> None:
  del config


def _check_inner_loop(config) -> None:
  """maml's and anil's checks: one output per --way class, and the inner loop's defaults (Finn et al.'s Omniglot)."""
  if config.test_way != config.way:
    raise ConfigError(f"--method {config.method}'s head has one output per --way class ({config.way}); --test_way "
                      f"{config.test_way} must equal it.")
  if config.within_alphabet and (config.meta_batch or 1) > 1:
    raise ConfigError("--within_alphabet draws an episode's classes from one alphabet; --meta_batch draws several "
                      "episodes' classes together: pass one of them.")
  for name, default in INNER_DEFAULTS.items():
    config.set_default(name, default)


def _check_baseline(config) -> None:
  """Baseline++'s check: its training classifier's size is given (the train split's classes are read later)."""
  if config.base_classes is None:
    raise ConfigError("--method baseline_pp trains a classifier over every training class: pass --base_classes N, "
                      "N at least the train split's classes (e.g. 64 on mini_imagenet; a smaller N is refused with "
                      "the count once the data is read).")
  config.set_default("finetune_steps", 100)


_META = dict(steps="fewshot.episodic.maml", option_set=InnerLoopOptions,
             check=_check_inner_loop, embeds_once=False, distance_head=False, diagnoses=False,
             instead=" (its adapted head is --meta_head: linear, softmax or dr; it records no diagnostics)")
METHODS: dict[str, Method] = {
    "protonet": Method("a distance head on one embedding: --head, --classifier, --distance",
                       "fewshot.episodic.learning", "fewshot.episodic.learners:protonet_learner", None,
                       _protonet_name, _no_check, embeds_once=True, distance_head=True, diagnoses=True,
                       shared_options=HEAD_OPTIONS),
    "maml": Method("Finn et al. 2017: every parameter adapted to each episode's support set, a linear head",
                   learner="fewshot.episodic.learners:maml_learner", model_name=_meta_name("maml"), **_META),
    "anil": Method("Raghu et al. 2020: the head alone adapted", learner="fewshot.episodic.learners:anil_learner",
                   model_name=_meta_name("anil"), **_META),
    "baseline_pp": Method("Chen et al. 2019: a cosine classifier over every training class, fitted anew on each "
                          "test episode's support set", "fewshot.episodic.baseline_pp",
                          "fewshot.episodic.baseline_pp:learner", BaselinePPOptions,
                          lambda o: "Baseline++", _check_baseline, embeds_once=True, distance_head=False,
                          diagnoses=False,
                          instead=" (it trains a cosine classifier; it records no diagnostics)"),
}


def option_sets() -> type:
  """One frozen dataclass with every method's own options (each set once, in the rows' order), which ``Config``
  derives from: a new method's options become flags, ``config.json`` fields and ``--help`` lines by its row alone.
  """
  sets = tuple(dict.fromkeys(m.option_set for m in METHODS.values() if m.option_set is not None))
  # A dataclass lists its bases' fields from the last base on: the sets go in reversed to keep the rows' order.
  merged = type("MethodOptions", sets[::-1], {"__doc__": "Every method's own options (fewshot.method_rows)."})
  return dataclasses.dataclass(frozen=True)(merged)


def owners(option: str) -> list[str]:
  """The methods whose row owns ``option`` (empty: every method's)."""
  return [name for name, method in METHODS.items() if option in method.options]


def check_options(config, given: Callable[[str], bool]) -> None:
  """One-line ``ConfigError`` for an option ``given`` that another method owns (nothing is silently ignored), then
  the run's method's own :attr:`Method.check`.
  """
  own = METHODS[config.method]
  for name in (name for method in METHODS.values() for name in method.options):
    users = owners(name)
    if config.method not in users and given(name):
      value = getattr(config, name)
      said = f"--{name}" if isinstance(value, bool) or value is None else f"--{name} {value}"
      raise ConfigError(f"{said} is an option of --method {' or '.join(users)}; --method {config.method} does not "
                        f"use it{own.instead}: drop it, or pass that method.")
  own.check(config)


def require(method: str, fact: str, needs: str, fix: str) -> None:
  """One-line ``ConfigError`` where ``method``'s row lacks ``fact`` (``"embeds_once"`` or ``"distance_head"``):
  ``needs`` says what asked for it, then the method's own test (its summary), then ``fix``.

      >>> require("protonet", "distance_head", "logits needs a distance head", "use .embed")  # protonet has one
  """
  row = METHODS[method]
  if not getattr(row, fact):
    raise ConfigError(f"{needs}; a --method {method} run tests otherwise ({row.summary}): {fix}.")
