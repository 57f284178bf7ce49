"""The package's shape, as docs/architecture.md states it: which folder may import which, and which import light.

Every module of ``fewshot`` belongs to one layer (a folder, or a group of root modules); a layer imports only the
layers below it (``MAY_IMPORT``), so data flows one way and the import graph has no cycles. The records and the
analysis import without JAX, Flax, orbax or TensorFlow Datasets (they read runs anywhere, in a moment), and so do
the commands until their options have been checked. An import the test cannot read (a module named by a computed
string, an importer under another name) is refused outside ``DYNAMIC_IMPORTS``; each folder's docstring names its
modules.
"""

from __future__ import annotations

import ast
import graphlib
import pathlib
import re
import subprocess
import sys

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "fewshot"
# The commands of the package's root (and what they share); a command in a folder (python -m fewshot.data.get,
# python -m fewshot.dml.train) is one of its folder's modules and keeps to its folder's rule.
COMMANDS = {"fewshot.train", "fewshot.evaluate", "fewshot.analyze", "fewshot.plot", "fewshot.reproduce", "fewshot.kinds",
            "fewshot.lake_scoring"}
ROOT_LAYERS = {"errors": "kernel", "choices": "kernel", "options": "kernel", "usage": "kernel", "runner": "kernel",
               "distances": "research",
               "heads": "research", "landscape": "research", "backbones": "research", "convolutions": "research",
               "numerics": "research", "config": "config", "method_rows": "kernel", "api": "api"}
MAY_IMPORT = {
    "kernel": set(),
    "research": {"kernel"},
    "data": {"kernel"},
    "config": {"kernel", "data"},
    "augment": {"kernel", "research", "data"},
    "records": {"kernel"},
    "analysis": {"kernel", "records"},
    "published": {"kernel", "records", "analysis"},
    "training": {"kernel", "data", "records"},
    "episodic": {"kernel", "research", "config", "data", "augment", "analysis", "training"},
    "dml": {"kernel", "research", "data", "augment", "records", "analysis", "training"},
    "api": {"kernel", "research", "config", "data", "augment", "records", "analysis", "training", "episodic"},
    "commands": {"kernel", "research", "config", "data", "augment", "records", "analysis", "published", "training",
                 "episodic", "dml", "api"},
    "package": {"api"},  # fewshot/__init__.py: fewshot.load and fewshot.build, imported on first use
}
LIGHT = ("jax", "flax", "orbax", "tensorflow_datasets", "tensorflow")


def _module_name(path: pathlib.Path) -> str:
  return ".".join(("fewshot", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")


MODULES = sorted(_module_name(path) for path in PACKAGE.rglob("*.py"))


def layer(module: str) -> str:
  """The layer of a module of the package."""
  if module in COMMANDS:
    return "commands"
  parts = module.split(".")
  if len(parts) == 1:
    return "package"
  return ROOT_LAYERS.get(parts[1], parts[1])


def imported(module: str) -> set[str]:
  """The package modules ``module`` imports (at its top or inside functions), resolved to modules."""
  path = PACKAGE.joinpath(*module.split(".")[1:])
  path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
  return imports_in(path.read_text(), module, is_package=path.name == "__init__.py")


def imports_in(source: str, module: str, is_package: bool = False) -> set[str]:
  """The package modules ``source`` (the text of ``module``) imports: absolute and relative ``import`` statements,
  and modules named by a string to ``importlib.import_module`` or ``__import__``.
  """
  package = module if is_package else module.rpartition(".")[0]
  targets = set()
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:  # from .x / from ..x: resolved against the module's own package
        anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
        base = ".".join(anchor + ([base] if base else []))
      if base.startswith("fewshot"):
        targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names)
    elif isinstance(node, ast.Import):
      targets.update(a.name for a in node.names if a.name.startswith("fewshot"))
    elif isinstance(node, ast.Call) and _names_a_module(node.func) and node.args:
      name = node.args[0]
      if isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.startswith("fewshot"):
        targets.add(name.value)
  return targets


def _names_a_module(func: ast.expr) -> bool:
  """Whether a call is ``importlib.import_module(...)``, ``import_module(...)`` or ``__import__(...)``."""
  name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
  return name in ("import_module", "__import__")


IMPORTERS = ("import_module", "__import__")
# The imports the layer test cannot read (a module named by a computed string), each allowed with why it needs one:
# (file, the call as ast.unparse writes it). Any other is refused by
# test_no_module_imports_by_a_name_the_layer_test_cannot_read.
DYNAMIC_IMPORTS = {
    # A dataset's row of fewshot.data.catalog names its reader module by a string (a user's reader may live in any
    # importable module), imported on first use.
    ("fewshot/data/loading.py", "importlib.import_module(catalog.spec_of(dataset).reader)"),
    ("fewshot/data/readers/__init__.py", "importlib.import_module(catalog.SPECS[dataset].reader)"),
    # A loss's row of fewshot.dml.loss_specs names its function as "module:function", imported on first use so that
    # DMLConfig validates without JAX.
    ("fewshot/dml/losses/__init__.py", "importlib.import_module(module)"),
    # The folder's own loaders (fewshot.data.loading, fewshot.data.memory), imported on first use so that naming a
    # dataset loads no TensorFlow Datasets; a module of the same layer, so no layer is crossed.
    ("fewshot/data/__init__.py", "importlib.import_module(f'fewshot.data.{_LAZY[name]}')"),
    # A kind of run's row (fewshot.records.run_kinds.KINDS) names its options' class and what each command does with
    # its runs as "module:name", imported on use by the commands (fewshot.kinds.resolve): the table itself stays in
    # the records, below everything it names.
    ("fewshot/kinds.py", "importlib.import_module(module)"),
    # A method's row (fewshot.method_rows.METHODS) names its steps' module and its learner by strings, so that the
    # configuration reads the rows without JAX; fewshot.episodic.methods imports them on use.
    ("fewshot/episodic/methods.py", "importlib.import_module(METHODS[name].steps)"),
    ("fewshot/episodic/methods.py", "importlib.import_module(module)"),
}


def _importer(node: ast.AST) -> str | None:
  """``import_module`` or ``__import__`` where ``node`` names one (``importlib.import_module``, ``__import__``)."""
  name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
  return name if name in IMPORTERS else None


def dynamic_imports(source: str) -> list[str]:
  """What ``source`` imports where the layer test cannot read the module, as ``ast.unparse`` writes it:
  ``import_module`` of anything but a string literal, ``__import__`` at all, and either held under another name
  (``from importlib import import_module as im``, ``im = importlib.import_module``, ``getattr(importlib, ...)``).
  """
  tree = ast.parse(source)
  called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Call) and _importer(node.func) == "import_module":
      name = node.args[0] if node.args else None
      if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
        found.append(ast.unparse(node))
    elif isinstance(node, ast.Call) and _importer(node.func) == "__import__":
      found.append(ast.unparse(node))
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and any(
        isinstance(a, ast.Constant) and a.value in IMPORTERS for a in node.args):
      found.append(ast.unparse(node))
    elif isinstance(node, (ast.Name, ast.Attribute)) and _importer(node) and id(node) not in called:
      found.append(ast.unparse(node))  # the importer itself, bound to another name or passed on
    elif isinstance(node, ast.ImportFrom) and any(a.name in IMPORTERS and a.asname not in (None, a.name)
                                                  for a in node.names):
      found.append(ast.unparse(node))
  return found


@pytest.mark.parametrize("planted", ["import importlib\nimportlib.import_module(name)",
                                     "import importlib\nimportlib.import_module('fewshot.' + name)",
                                     "import importlib as il\nil.import_module(f'fewshot.{name}')",
                                     "__import__('fewshot.episodic.learning')",
                                     "from importlib import import_module as im\nim('fewshot.episodic')",
                                     "import importlib\nim = importlib.import_module",
                                     "import importlib\ngetattr(importlib, 'import_module')('fewshot.dml')",
                                     "import builtins\nload = builtins.__import__"])
def test_a_computed_or_aliased_import_is_seen(planted):
  assert dynamic_imports(planted), planted


@pytest.mark.parametrize("clean", ["import importlib\nimportlib.import_module('fewshot.dml.train')",
                                   "from importlib import import_module\nimport_module('fewshot.api')",
                                   "import importlib.metadata\nimportlib.metadata.version('fewshot')",
                                   "from importlib import metadata"])
def test_an_import_by_a_literal_name_is_not_flagged(clean):
  assert not dynamic_imports(clean)


def test_no_module_imports_by_a_name_the_layer_test_cannot_read():
  found = {(path.relative_to(PACKAGE.parent).as_posix(), call) for path in sorted(PACKAGE.rglob("*.py"))
           for call in dynamic_imports(path.read_text())}
  unexplained = sorted(found - DYNAMIC_IMPORTS)
  assert not unexplained, (f"{unexplained} import a module the layer test cannot see; name it by a string literal "
                           "(importlib.import_module('fewshot.x')), or add the call to DYNAMIC_IMPORTS saying why.")
  stale = sorted(DYNAMIC_IMPORTS - found)
  assert not stale, f"DYNAMIC_IMPORTS lists {stale}, which the package no longer holds; remove them."


def test_every_module_has_a_layer_and_every_layer_a_rule():
  assert {layer(m) for m in MODULES} == set(MAY_IMPORT)


@pytest.mark.parametrize("planted", ["from ..episodic import learning", "from .. import episodic",
                                     "import importlib\nimportlib.import_module('fewshot.dml.trainer')",
                                     "__import__('fewshot.episodic.learning')"])
def test_a_relative_or_string_import_upward_is_seen(planted):
  upward = {t for t in imports_in(planted, "fewshot.training.planted") if layer(t) not in MAY_IMPORT["training"]}
  assert upward and layer(next(iter(upward))) in ("episodic", "dml")


def _layers_named(text: str) -> set[str]:
  text = re.sub(r"\(.*?\)", "", text)
  return set() if "nothing" in text else {word.strip(" `.") for word in text.split(",")}


def test_the_architecture_page_states_the_rule_the_test_enforces():
  rows = {}
  for line in (PACKAGE.parent / "docs" / "architecture.md").read_text().splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 3 and cells[0] in MAY_IMPORT:
      rows[cells[0]] = (set(re.findall(r"`([\w.]+)`", cells[1])), _layers_named(cells[2]))
  assert {name: may for name, (_, may) in rows.items()} == MAY_IMPORT
  for name in set(ROOT_LAYERS.values()):
    assert rows[name][0] == {m for m, own in ROOT_LAYERS.items() if own == name}, name


def test_each_layers_folder_says_what_it_may_import_as_the_rule_does():
  for init in sorted(PACKAGE.glob("*/__init__.py")):
    own = layer(_module_name(init))
    found = re.search(r"^May import: (.+?)\.$", ast.get_docstring(ast.parse(init.read_text())) or "", re.MULTILINE)
    assert found, f"{init}'s docstring needs a line 'May import: <layers>.' ({sorted(MAY_IMPORT[own])})"
    assert _layers_named(found[1]) == MAY_IMPORT[own], (init, found[1], sorted(MAY_IMPORT[own]))


@pytest.mark.parametrize("module", MODULES)
def test_a_module_imports_only_the_layers_below_its_own(module):
  own = layer(module)
  upward = sorted(t for t in imported(module) if layer(t) != own and layer(t) not in MAY_IMPORT[own])
  assert not upward, f"{module} ({own}) imports {upward}; {own} may import {sorted(MAY_IMPORT[own])}"


def test_the_import_graph_has_no_cycles():
  graph = {m: {t for t in imported(m) if t in MODULES and t != m} for m in MODULES}
  done, active = set(), []

  def visit(module):
    if module in active:
      pytest.fail(f"import cycle: {' -> '.join(active[active.index(module):] + [module])}")
    if module in done:
      return
    active.append(module)
    for target in sorted(graph[module]):
      visit(target)
    active.pop()
    done.add(module)

  for module in MODULES:
    visit(module)


def folder(module: str) -> str:
  """Where a module lives, as a drawing of the package groups it: its folder (sub-folders within it), or for a module
  of the package's root, its root layer.
  """
  parts = module.split(".")
  return layer(module) if len(parts) <= 2 else parts[1]


def folder_imports() -> dict[tuple[str, str], str]:
  """Each (folder, folder it imports), with one import that makes the arrow."""
  arrows = {}
  for module in MODULES:
    for target in sorted(imported(module)):
      if target in MODULES and folder(module) != folder(target):
        arrows.setdefault((folder(module), folder(target)), f"{module} -> {target}")
  return arrows


def test_every_command_of_the_commands_layer_is_at_the_package_root():
  """A command in a folder is judged by its folder's rule: it may not import its way back up."""
  assert all(len(m.split(".")) == 2 for m in COMMANDS)
  assert folder("fewshot.data.get") == layer("fewshot.data.get") == "data"
  assert folder("fewshot.dml.train") == layer("fewshot.dml.train") == "dml"


def test_no_folder_imports_a_folder_above_it_and_no_folders_import_in_a_circle():
  arrows = folder_imports()
  upward = sorted(f"{a} -> {b} ({why})" for (a, b), why in arrows.items() if b not in MAY_IMPORT[a])
  assert not upward, f"arrows that run back up: {upward}"
  graph = {}
  for a, b in arrows:
    graph.setdefault(a, set()).add(b)
  try:
    tuple(graphlib.TopologicalSorter(graph).static_order())
  except graphlib.CycleError as e:
    circle = e.args[1]
    pytest.fail(f"folders import in a circle: {' -> '.join(circle)} "
                f"({'; '.join(arrows[(a, b)] for a, b in zip(circle[1:], circle) if (a, b) in arrows)})")


def test_each_folder_imports_every_layer_its_may_import_line_names():
  """A folder's stated imports are what it imports: a layer its line names and it does not import is a stale word
  (the kernel aside, which every layer may stand on).
  """
  used = {}
  for a, b in folder_imports():
    used.setdefault(a, set()).add(b)
  for init in sorted(PACKAGE.glob("*/__init__.py")):
    own = layer(_module_name(init))
    stale = sorted(MAY_IMPORT[own] - used.get(own, set()) - {"kernel"})
    assert not stale, f"{init}'s 'May import:' line names {stale}, which {own} does not import; drop them."


def test_the_package_root_holds_only_commands_and_the_research_api():
  root = {p.stem for p in PACKAGE.glob("*.py")}
  assert root == {"__init__", "analyze", "api", "backbones", "choices", "config", "convolutions", "distances",
                  "errors", "evaluate", "heads", "kinds", "lake_scoring", "landscape", "method_rows", "numerics", "options", "plot", "reproduce",
                  "runner", "train", "usage"}


def test_every_folder_says_what_it_holds_and_what_it_may_import():
  for init in PACKAGE.rglob("__init__.py"):
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    assert len(doc.splitlines()) >= 2, f"{init} needs a docstring saying what the folder holds"
    assert "import" in doc.lower(), f"{init}'s docstring should say what the folder may import"


def _members(folder: pathlib.Path) -> set[str]:
  """The modules and sub-folders of a package folder (a private ``_name.py`` aside)."""
  files = {p for p in folder.glob("*.py") if p.name != "__init__.py" and not p.name.startswith("_")}
  return {_module_name(p) for p in files | set(folder.glob("*/__init__.py"))}


@pytest.mark.parametrize("init", sorted(PACKAGE.rglob("__init__.py")), ids=lambda p: _module_name(p))
def test_every_folders_docstring_names_each_of_its_modules(init):
  doc = ast.get_docstring(ast.parse(init.read_text())) or ""
  named = set(re.findall(r":mod:`~?(fewshot[\w.]*)`", doc))
  missing = sorted(_members(init.parent) - named)
  assert not missing, (f"{init}'s docstring does not name {', '.join(missing)}; name each module and sub-folder as "
                       f":mod:`~{missing[0]}` with what it holds.")


LIGHT_MODULES = [m for m in MODULES if layer(m) in ("kernel", "records", "analysis", "config", "published")] + [
    "fewshot.analyze", "fewshot.plot", "fewshot.train", "fewshot.evaluate", "fewshot.reproduce", "fewshot.dml.train",
    "fewshot.dml.config", "fewshot.dml.loss_specs", "fewshot.data.get"]


def test_records_analysis_and_the_commands_import_without_jax_flax_orbax_or_tfds():
  code = ("import importlib, sys\n"
          f"for name in {LIGHT_MODULES!r}:\n"
          "  importlib.import_module(name)\n"
          f"  heavy = sorted(m for m in {LIGHT!r} if m in sys.modules)\n"
          "  assert not heavy, (name, heavy)\n"
          "print('ok')")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
  assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def _kind_tests(source: str, names=None) -> list[str]:
  """The comparisons in ``source`` that test a kind of run (or another row's name, ``names``) by its name
  (``kind == "dml"``, ``in ("fewshot", ...)``).
  """
  from fewshot.records.run_kinds import KINDS

  KINDS = KINDS if names is None else names  # noqa: N806 - the names the comparisons are looked for
  found = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Compare):
      values = [node.left, *node.comparators]
      named = [v for v in values if isinstance(v, ast.Constant) and v.value in KINDS]
      named += [e for v in values if isinstance(v, (ast.Tuple, ast.List, ast.Set)) for e in v.elts
                if isinstance(e, ast.Constant) and e.value in KINDS]
      if named:
        found.append(ast.unparse(node))
  return found


@pytest.mark.parametrize("planted", ['if kind == "dml":\n  pass', 'x = run_kind(c) != "fewshot"',
                                     'if kind in ("fewshot", "dml"):\n  pass'])
def test_a_kind_tested_by_name_is_seen(planted):
  assert _kind_tests(planted)


# The same words naming something else: the class split "dml" a dataset's row offers (Musgrave et al.'s halves).
NOT_KIND_TESTS = {"fewshot/dml/config.py": ["'dml' in spec.class_splits"]}


def test_no_module_chooses_behaviour_by_testing_a_kind_of_run_by_name():
  """Each kind's behaviour is its row's (fewshot.records.run_kinds.KINDS), never an ``if kind == ...``."""
  found = {path.relative_to(PACKAGE.parent).as_posix(): tests for path in sorted(PACKAGE.rglob("*.py"))
           if (tests := _kind_tests(path.read_text()))}
  assert found.pop("fewshot/dml/config.py", None) == NOT_KIND_TESTS["fewshot/dml/config.py"]
  assert not found, f"{found} choose by a kind's name; give the kind's row a field and read it instead."


def test_no_module_chooses_behaviour_by_testing_a_method_by_name():
  """Each method's behaviour is its row's (fewshot.method_rows.METHODS), never an ``if method != "protonet"``."""
  from fewshot.method_rows import METHODS

  assert _kind_tests('x = config.method != "protonet"', METHODS)  # the check sees a planted test
  found = {path.relative_to(PACKAGE.parent).as_posix(): tests for path in sorted(PACKAGE.rglob("*.py"))
           if (tests := _kind_tests(path.read_text(), METHODS))}
  assert not found, f"{found} choose by a method's name; give the method's row a field and read it instead."


def test_every_methods_row_names_what_exists():
  from fewshot.episodic import methods

  for name in methods.METHODS:
    assert callable(methods.learner(name)) and callable(methods.get(name).train_chunk), name


def test_every_kinds_row_names_what_exists():
  import dataclasses

  from fewshot import kinds
  from fewshot.records.run_kinds import KINDS

  for name, row in KINDS.items():
    for field in dataclasses.fields(row):
      value = getattr(row, field.name)
      if isinstance(value, str) and ":" in value:
        assert callable(kinds.resolve(name, field.name)), (name, field.name, value)


def test_the_configuration_names_no_methods_own_option():
  """A method's own options live in its row's option set (fewshot.method_rows), so a new method edits no Config."""
  from fewshot.method_rows import METHODS

  source = (PACKAGE / "config.py").read_text()
  own = {name for row in METHODS.values() if row.option_set for name in row.options}
  assert own, "no method has an option set of its own: the check below would pass vacuously"
  found = sorted(name for name in own if re.search(rf"\b{name}\b", source))
  assert not found, f"fewshot/config.py names {found}: give them to their method's option set instead."


def test_a_new_rows_option_set_becomes_flags_and_is_refused_to_the_other_methods(monkeypatch):
  import dataclasses

  from fewshot import method_rows
  from fewshot.errors import ConfigError
  from fewshot.options import option

  @dataclasses.dataclass(frozen=True)
  class Planted:
    planted_steps: int | None = option(None, "a planted method's option", positive=True)

  row = dataclasses.replace(method_rows.METHODS["baseline_pp"], option_set=Planted, check=lambda config: None)
  monkeypatch.setitem(method_rows.METHODS, "planted", row)
  merged = [f.name for f in dataclasses.fields(method_rows.option_sets())]
  assert merged[-1] == "planted_steps" and merged[:-1] == [
      name for r in dict.fromkeys(r.option_set for r in method_rows.METHODS.values() if r.option_set)
      if r is not Planted for name in (f.name for f in dataclasses.fields(r))]

  @dataclasses.dataclass(frozen=True)
  class Configured(method_rows.option_sets()):
    method: str = "protonet"

    def set_default(self, name, value):
      if getattr(self, name) is None:
        object.__setattr__(self, name, value)

  given = Configured(planted_steps=3)
  with pytest.raises(ConfigError, match=r"^--planted_steps 3 is an option of --method planted; --method protonet"):
    method_rows.check_options(given, lambda name: getattr(given, name) not in (None, False))
  method_rows.check_options(Configured(method="planted", planted_steps=3), lambda name: False)  # its own: taken
