"""The Python blocks of the README and the guide's pages (``environment.GUIDE``) run as written (after a tiny run stands in for the main command's), so it cannot rot."""

import pathlib
import re

import pytest

from fewshot.config import Config
from fewshot.train import train

from environment import GUIDE, guide_text

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
# The run the README's main command trains; here 2 episodes of it, which is all the blocks need.
MAIN_RUN = "runs/strokes_conv4_ProtoNet_DR_5w1s_seed0"
TINY = dict(head="dr", episodes=2, eval_every=2, val_episodes=1, test_episodes=2)


def python_blocks(text: str) -> list[str]:
  return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_the_guide_has_python_blocks_and_no_paths_a_user_lacks():
  assert len(python_blocks(guide_text())) >= 3
  for page in GUIDE:
    text = page.read_text()
    assert "../shared" not in text  # every path the docs name, and no absent document: tests/test_docs.py
    for link in re.findall(r"\]\(([\w./]+\.(?:md|ipynb))", text):
      assert (page.parent / link).is_file(), (page.name, link)


@pytest.fixture(scope="module")
def readme_dir(tmp_path_factory):
  """A working directory holding the main command's run, as a user's would after it."""
  path = tmp_path_factory.mktemp("readme")
  config = Config(**TINY)
  assert config.run_name == MAIN_RUN.split("/")[-1]  # the README's command and this config name the same run
  train(config, path / MAIN_RUN, progress=False)
  return path


@pytest.mark.parametrize("index", range(len(python_blocks(guide_text()))))
def test_readme_python_block_runs(readme_dir, monkeypatch, index):
  block = python_blocks(guide_text())[index]
  monkeypatch.chdir(readme_dir)
  exec(compile(block, f"the guide's python block {index + 1}", "exec"), {"__name__": "__readme__"})  # noqa: S102
