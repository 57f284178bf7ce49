"""The environment a test's subprocess runs in: this one's, with the checkout first on ``PYTHONPATH``.

Replacing ``PYTHONPATH`` would drop what the machine put there (packages carried to a GPU machine, say), so the
checkout is put in front of it.
"""

from __future__ import annotations

import os
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]


def checkout_env(**extra: str) -> dict[str, str]:
  """``os.environ`` read now (the session fixtures set the tfds and cache folders), the checkout first on
  ``PYTHONPATH``, and ``extra``.
  """
  path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
  return {**os.environ, "PYTHONPATH": path, **extra}


def _guide_pages() -> list[str]:
  """The Markdown pages of the site's Guide, in its order (docs/index.md's toctree captioned Guide)."""
  text = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
  toctree = text[text.index(":caption: Guide"):].split("```")[0]
  return [line.strip() for line in toctree.splitlines()[1:]
          if line.strip() and (REPO / "docs" / f"{line.strip()}.md").is_file()]


# The README and the guide's pages of the documentation site, in the site's order: their bash commands and Python
# blocks run as written, one after another (a page's command may read the runs an earlier page's trained).
GUIDE = [REPO / "README.md", *(REPO / "docs" / f"{page}.md" for page in _guide_pages())]


def guide_text() -> str:
  return "\n".join(page.read_text(encoding="utf-8") for page in GUIDE)
