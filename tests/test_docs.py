"""Every repository path, link and module the docs name exists, and no file cites a document the repository lacks.

The docs are README.md, BUILD_NOTES.md and docs/*.md. They name:

* paths: a token starting with ``fewshot/``, ``tests/``, ``experiments/``, ``benchmarks/``, ``projects/``,
  ``examples/`` or ``docs/`` that ends in an
  extension or a ``/`` (``fewshot/training/sources.py``, ``fewshot/data/readers/``), or a root file (README.md,
  BUILD_NOTES.md, pyproject.toml); ``path::name`` also names a function or class of that file;
* links: a markdown link's target, resolved from the linking file, and its ``#anchor`` among the target's headings
  (as GitHub makes them);
* modules: a dotted ``fewshot.x.y``, resolved by import to a module or an attribute of one.

The code's docstrings and comments cite pages of docs/ (``docs/protocol.md#data``): those pages and headings exist.
"""

from __future__ import annotations

import functools
import importlib
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ["README.md", "BUILD_NOTES.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]
PATH = re.compile(r"(?<![\w/.~$-])((?:fewshot|tests|experiments|benchmarks|projects|examples|docs)/[\w./-]*?(?:(?:\.[a-z0-9]+)+|/)"
                  r"|README\.md|BUILD_NOTES\.md|pyproject\.toml)(?![\w/-])(?:::(\w+))?")
LINK = re.compile(r"\]\(([^)\s]+)\)")
MODULE = re.compile(r"(?<![\w/.-])fewshot(?:\.[A-Za-z_]\w*)+")
# A document the repository does not hold, cited as a file or by section; spelled in two parts so that this file
# does not cite it.
ABSENT = re.compile(r"\b" + "SP" + r"EC(?:\.md|\s*§)")


def _text(doc: str) -> str:
  return (ROOT / doc).read_text(encoding="utf-8")


def _without_code_blocks(text: str) -> str:
  return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


@functools.lru_cache(maxsize=None)
def anchors(path: pathlib.Path) -> frozenset[str]:
  """The anchors GitHub gives a markdown file's headings: lower case, punctuation dropped, spaces as hyphens."""
  seen: dict[str, int] = {}
  for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", _without_code_blocks(path.read_text(encoding="utf-8")), re.M):
    slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
    seen[slug] = seen.get(slug, -1) + 1
    if seen[slug]:
      seen[f"{slug}-{seen[slug]}"] = 0
  return frozenset(seen)


def resolves(name: str) -> bool:
  """Whether ``fewshot.a.b.c`` is a module, or an attribute (a dataclass field included) of the longest module."""
  parts = name.split(".")
  for end in range(len(parts), 0, -1):
    try:
      obj = importlib.import_module(".".join(parts[:end]))
    except ModuleNotFoundError:
      continue
    for part in parts[end:]:
      if hasattr(obj, part):
        obj = getattr(obj, part)
      elif part in getattr(obj, "__dataclass_fields__", {}):
        return part == parts[-1]
      else:
        return False
    return True
  return False


def test_the_patterns_find_what_the_readme_and_the_guide_name():
  text = _text("README.md")
  assert {("docs/protocol.md", ""), ("BUILD_NOTES.md", "")} <= set(PATH.findall(text))
  assert {"docs/architecture.md", "docs/training.md#real-data-and-re-testing-a-run"} <= set(LINK.findall(text))
  guide = _text("docs/python_api.md") + _text("docs/training.md") + _text("docs/dml.md")
  assert ("examples/custom_head.py", "") in set(PATH.findall(guide))
  assert {"../examples/custom_head.py", "protocol.md#data"} <= set(LINK.findall(guide))
  assert {"fewshot.episodic", "fewshot.dml.losses.Loss"} <= set(MODULE.findall(guide))
  assert PATH.findall("`fewshot/data/readers/`, x.tar.gz `tests/x.py::test_y`. `experiments/e.CONSTANT`") == [
      ("fewshot/data/readers/", ""), ("tests/x.py", "test_y")]


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_a_doc_names_exists(doc):
  named = sorted(set(PATH.findall(_text(doc))))
  missing = [path for path, _ in named if not (ROOT / path).exists()]
  missing += [f"{path}::{name}" for path, name in named
              if name and (ROOT / path).is_file() and not re.search(rf"^\s*(?:def|class) {name}\b",
                                                                     (ROOT / path).read_text(encoding="utf-8"), re.M)]
  checked = ", ".join(path + (f"::{name}" if name else "") for path, name in named)
  assert not missing, f"{doc} names {missing}, absent from the repository (checked: {checked})"


@pytest.mark.parametrize("doc", DOCS)
def test_every_link_of_a_doc_leads_to_a_file_and_heading(doc):
  source = ROOT / doc
  broken, checked = [], []
  for target in sorted(set(LINK.findall(_text(doc)))):
    if re.match(r"[a-z]+:", target):  # https:, mailto:
      continue
    checked.append(target)
    path, _, anchor = target.partition("#")
    resolved = (source.parent / path).resolve() if path else source
    if not resolved.exists() or ROOT not in (resolved, *resolved.parents):
      broken.append(f"{target} (no such file)")
    elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
      broken.append(f"{target} (no heading #{anchor} in {resolved.relative_to(ROOT)})")
  assert not broken, f"{doc} links to {broken} (checked: {', '.join(checked)})"


@pytest.mark.parametrize("doc", DOCS)
def test_every_module_a_doc_names_imports(doc):
  named = sorted(set(MODULE.findall(_text(doc))))
  missing = [name for name in named if not resolves(name)]
  assert not missing, f"{doc} names {missing}, which do not import (checked: {', '.join(named)})"


def test_every_docs_page_the_code_cites_exists():
  cited = {(f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}", m[1], m[2])
           for folder in ("fewshot", "tests", "experiments", "benchmarks", "projects", "examples") for path in (ROOT / folder).rglob("*.py")
           for text in [path.read_text(encoding="utf-8")]
           for m in re.finditer(r"(?<![\w/.-])(docs/[\w-]+\.md)(?:#([\w-]+))?", text)}
  assert cited, "no module cites docs/: is the pattern still right?"
  broken = [f"{where}: {page}" + (f"#{anchor}" if anchor else "") for where, page, anchor in sorted(cited)
            if not (ROOT / page).is_file() or (anchor and anchor not in anchors(ROOT / page))]
  assert not broken, f"the code cites {broken}, absent from docs/ (checked {len(cited)} citations)"


def _repository_files() -> list[pathlib.Path]:
  """The files of the repository: tracked or not ignored (no caches, runs or virtual environments)."""
  try:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
  except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file but .git's and caches
    return [p for p in ROOT.rglob("*") if p.is_file() and not {".git", "__pycache__", ".venv"} & set(p.parts)]
  return [ROOT / name for name in listed if name and (ROOT / name).is_file()]


def test_no_file_cites_a_document_the_repository_lacks():
  files = _repository_files()
  assert any(p.name == "README.md" for p in files), f"the listing of {ROOT} missed README.md"
  citing = [f"{p.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}" for p in files
            for text in [p.read_text(encoding="utf-8", errors="replace")] for m in ABSENT.finditer(text)]
  assert not citing, (f"{citing} cite a specification document the repository does not hold; cite the paper "
                      f"(arXiv id, section) or a page of docs/ instead (checked {len(files)} files)")
