"""One quote and docstring style across the package, its tests, experiments, benchmarks and projects (the ruff rules in pyproject.toml)."""

import ast
import pathlib
import re
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_ruff_finds_no_style_violations():
  ruff = shutil.which("ruff")
  if ruff is None:
    pytest.skip("ruff is not installed (pip install -e '.[dev]' installs it)")
  folders = ["fewshot", "tests", "experiments", "benchmarks", "projects", "examples"]
  result = subprocess.run([ruff, "check", *folders], cwd=REPO, capture_output=True, text=True)
  assert result.returncode == 0, result.stdout[-3000:]


def test_no_tracked_file_holds_merge_conflict_markers():
  """A docstring or a comment hides a merge's conflict from Python and from every other test (one sat in
  fewshot/analysis/__init__.py's docstring from an old merge until issue 28's session).
  """
  if shutil.which("git") is None or not (REPO / ".git").exists():
    pytest.skip("not a git checkout")
  found = subprocess.run(["git", "grep", "-n", "-E", "^(<{7} |>{7} |={7}$)"], cwd=REPO, capture_output=True,
                         text=True)
  assert found.returncode == 1 and not found.stdout, found.stdout  # git grep: 1 means no line matched


# One docstring markup across the package: reST, where inline code is ``literal`` and a reference :role:`target`;
# a Markdown `span` (single backticks) is reST's "interpreted text" and renders as neither.
_DOCSTRING_SPAN = re.compile(r"``.+?``|:[\w:.-]+:`[^`]+`|`([^`\n]+)`", re.S)


def markdown_spans(docstring: str) -> list[str]:
  """The single-backtick spans of a docstring that are neither ``literals`` nor :role:`targets`."""
  return [f"`{m.group(1)}`" for m in _DOCSTRING_SPAN.finditer(docstring) if m.group(1) is not None]


def test_markdown_spans_are_told_from_rest_markup():
  assert markdown_spans("a ``literal``, :func:`f()` and `code`, :math:`x` then `y`") == ["`code`", "`y`"]


def test_every_docstring_of_the_package_is_rest():
  found = []
  for path in sorted((REPO / "fewshot").rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        spans = markdown_spans(ast.get_docstring(node, clean=False) or "")
        found += [f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 1)} {span}" for span in spans]
  assert not found, f"Markdown backticks in docstrings (write ``code``): {found[:5]}"
