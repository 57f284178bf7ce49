"""The package's shape, as docs/architecture.md states it: which folder may import which, and which import light.

Every module of ``fewshot`` belongs to one layer (a folder, or a group of root modules); a layer imports only the
layers below it (``MAY_IMPORT``), so data flows one way and the import graph has no cycles. The records and the
analysis import without JAX, Flax, orbax or TensorFlow Datasets (they read runs anywhere, in a moment), and so do
the commands until their options have been checked.
"""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "fewshot"
COMMANDS = {"fewshot.cli", "fewshot.train", "fewshot.evaluate", "fewshot.analyze", "fewshot.plot", "fewshot.dml.train",
            "fewshot.reproduce", "fewshot.data.get"}
ROOT_LAYERS = {"errors": "kernel", "choices": "kernel", "options": "kernel", "usage": "kernel", "distances": "research",
               "heads": "research", "backbones": "research", "convolutions": "research", "numerics": "research",
               "config": "config", "api": "api"}
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
    "episodic": {"kernel", "research", "config", "data", "augment", "records", "analysis", "training"},
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


def test_the_package_root_holds_only_commands_and_the_research_api():
  root = {p.stem for p in PACKAGE.glob("*.py")}
  assert root == {"__init__", "analyze", "api", "backbones", "choices", "cli", "config", "convolutions", "distances",
                  "errors", "evaluate", "heads", "numerics", "options", "plot", "reproduce", "train", "usage"}


def test_every_folder_says_what_it_holds_and_what_it_may_import():
  for init in PACKAGE.rglob("__init__.py"):
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    assert len(doc.splitlines()) >= 2, f"{init} needs a docstring saying what the folder holds"
    assert "import" in doc.lower(), f"{init}'s docstring should say what the folder may import"


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
