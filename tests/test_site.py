"""The documentation site: it builds offline with warnings as errors, every internal link and anchor of the built
pages resolves, the API reference's docstring examples run as doctests, and (slow tier) the site built as
docs/conf.py builds it, the notebook executed, which headless Chromium renders (the index and an API page).
"""

from __future__ import annotations

import doctest
import html.parser
import importlib
import pathlib
import re
import shutil
import subprocess
import sys
import urllib.parse

import pytest

from environment import REPO, checkout_env

DOCS = REPO / "docs"
# The modules the API reference documents (docs/api/*.md): their docstrings' examples are the doctests.
API_MODULES = sorted(set(re.findall(r"^\.\. automodule:: ([\w.]+)", "\n".join(
    page.read_text() for page in (DOCS / "api").glob("*.md")), re.M)))


def _build(out: pathlib.Path, execute: bool) -> pathlib.Path:
  options = [] if execute else ["-D", "nb_execution_mode=off"]
  done = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", *options,
                         str(DOCS), str(out)], capture_output=True, text=True, env=checkout_env(), timeout=900)
  assert done.returncode == 0, done.stderr[-5000:]
  return out


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> pathlib.Path:
  """The site as the default tier checks it: the notebook not executed (half the build's time), which the slow tier
  does, in the built site (:func:`executed_site`) and in a kernel (tests/test_notebook.py).
  """
  return _build(tmp_path_factory.mktemp("site"), execute=False)


@pytest.fixture(scope="module")
def executed_site(tmp_path_factory) -> pathlib.Path:
  """The site as ``docs/conf.py`` builds it, the notebook executed."""
  return _build(tmp_path_factory.mktemp("executed_site"), execute=True)


class _Links(html.parser.HTMLParser):
  def __init__(self):
    super().__init__()
    self.hrefs, self.ids = [], set()

  def handle_starttag(self, tag, attrs):
    attrs = dict(attrs)
    if attrs.get("id"):
      self.ids.add(attrs["id"])
    if tag in ("a", "link") and attrs.get("href"):
      self.hrefs.append(attrs["href"])
    if tag in ("img", "script") and attrs.get("src"):
      self.hrefs.append(attrs["src"])


def _parsed(page: pathlib.Path) -> _Links:
  links = _Links()
  links.feed(page.read_text(encoding="utf-8"))
  return links


def test_the_site_builds_with_warnings_as_errors_and_every_internal_link_resolves(site):
  pages = sorted(site.rglob("*.html"))
  names = {p.relative_to(site).as_posix() for p in pages}
  for page in ["index.html", "quickstart.html", "training.html", "reproductions.html", "api/heads.html"]:
    assert page in names, sorted(names)
  ids = {p: _parsed(p).ids for p in pages}
  broken = []
  for page in pages:
    for href in _parsed(page).hrefs:
      parts = urllib.parse.urlsplit(href)
      if parts.scheme or parts.netloc:  # another site (a paper): not this build's to check, but never a script
        assert not href.endswith(".js"), f"{page.relative_to(site)} loads {href}: the site must work offline"
        continue
      target = (page.parent / urllib.parse.unquote(parts.path)).resolve() if parts.path else page
      if not target.exists():
        broken.append(f"{page.relative_to(site)} -> {href}")
      elif parts.fragment and target.suffix == ".html" and parts.fragment not in ids.get(target, set()):
        broken.append(f"{page.relative_to(site)} -> {href} (no such anchor)")
  assert not broken, broken
  # The API reference documents the functions themselves, not only the modules' docstrings.
  assert 'id="fewshot.heads.dr_logits"' in (site / "api" / "heads.html").read_text()


@pytest.mark.parametrize("name", API_MODULES)
def test_the_api_reference_s_docstring_examples_run(name):
  module = importlib.import_module(name)
  tests = doctest.DocTestFinder(exclude_empty=True).find(module, name)
  runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
  for test in tests:
    runner.run(test)
  assert runner.failures == 0, f"{runner.failures} of {runner.tries} examples of {name} failed (output above)"


def test_the_math_modules_have_examples():
  counted = {name: sum(len(t.examples) for t in doctest.DocTestFinder().find(importlib.import_module(name), name))
             for name in ("fewshot.heads", "fewshot.distances", "fewshot.analysis.stats", "fewshot.analysis.verdicts")}
  assert all(counted.values()), counted


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium (.ci/run installs Debian's package)")
def test_headless_chromium_renders_the_index_and_an_api_page(executed_site, tmp_path):
  site = executed_site
  for page, title, code in (("index.html", "fewshot", None), ("api/heads.html", "Heads and distances", "dr_logits")):
    url = (site / page).as_uri()
    dom = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                          "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    assert f"<title>{title}" in dom, dom[:500]
    assert 'class="sidebar-tree"' in dom  # the navigation
    assert code is None or (code in dom and "<mjx-container" in dom)  # its formulas typeset, offline
    shot = tmp_path / (page.replace("/", "_") + ".png")
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1280,900", url], capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000  # a page drawn, not a blank one
  assert 'class="highlight' in (site / "training.html").read_text()  # a code block
  assert "<img" in (site / "quickstart.html").read_text()  # the notebook ran at build time: its figure is shown
