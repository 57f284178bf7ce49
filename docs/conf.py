"""The documentation site: Sphinx with MyST (Markdown pages, the notebook executed at build time) and autodoc (the
API reference from the docstrings). Build it offline with ``python -m sphinx -W -b html docs site``.
"""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's package, installed or not

project = "fewshot"
author = "the fewshot authors"
copyright = "2026, the fewshot authors"  # noqa: A001 - Sphinx's own name for it

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax",
              "sphinx-mathjax-offline"]  # MathJax served from the site itself: the formulas render offline
napoleon_google_docstring = True  # the docstrings' Args:, Returns:, Attributes: sections
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # a dataclass's Attributes: as fields of its entry (autodoc lists the fields themselves too)
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb", ".rst": "restructuredtext"}
root_doc = "index"
# The records the result pages are built from, and the build itself, are data, not pages.
exclude_patterns = ["_build", "reproductions/**", "reproductions_in_progress/**", "results/omniglot/**",
                    "results/strokes/**", "results/**/seed*", "conf.py"]

html_theme = "furo"
html_title = "fewshot"

myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3  # links to a page's sections (page.md#a-heading) resolve as GitHub's do

# The notebook trains a tiny run on the generated strokes: executed at every build, so its outputs are today's.
nb_execution_mode = "force"
nb_execution_timeout = 600
nb_execution_raise_on_error = True

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
