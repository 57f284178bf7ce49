"""docs/quickstart.ipynb runs end to end in a Jupyter kernel and prints what its text says it does.

The notebook is committed without outputs (small, diff-able); executing it needs nbclient, nbformat and ipykernel (the
``dev`` extra), and the test is skipped, saying which is missing, where they are not installed.
"""

import json
import os
import pathlib
import re
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "docs" / "quickstart.ipynb"
HEADS = {"ProtoNet_S", "ProtoNet_DR", "1-NN_S", "1-NN_DR"}
HEAD_LINE = re.compile(r"^(\S+)\s+accuracy\s+([\d.]+)%\s+mean confidence\s+([\d.]+)$", re.M)


def _outputs(cell) -> str:
  return "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream")


def test_the_notebook_is_committed_without_outputs_and_linked_from_the_readme():
  notebook = json.loads(NOTEBOOK.read_text())
  code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
  assert code and all(not cell["outputs"] and cell["execution_count"] is None for cell in code)
  assert "docs/quickstart.ipynb" in (REPO / "README.md").read_text()


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
  """The notebook as run by a fresh kernel in an empty working directory, with this checkout importable."""
  try:
    import nbclient
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
  except ImportError as e:
    pytest.skip(f"executing the notebook needs nbclient, nbformat and ipykernel (pip install -e '.[dev]'): {e}")
  try:
    spec = KernelSpecManager().get_kernel_spec("python3")
  except NoSuchKernel:
    pytest.skip("no python3 Jupyter kernel: pip install ipykernel (the dev extra) into this environment")
  # jupyter_client starts a bare "python" as this interpreter; a path elsewhere lacks this environment's packages.
  launcher = spec.argv[0] if spec.argv else ""
  if launcher not in ("python", "python3", f"python3.{sys.version_info[1]}") and launcher != sys.executable:
    pytest.skip(f"the python3 Jupyter kernel runs {launcher or 'nothing'}, not this interpreter ({sys.executable}); "
                "pip install ipykernel here, or remove that kernelspec")
  notebook = nbformat.read(NOTEBOOK, as_version=4)
  # The kernel inherits the environment: the private TFDS and compilation cache folders, and this checkout first.
  path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
  old = os.environ.get("PYTHONPATH")
  os.environ["PYTHONPATH"] = path
  try:
    cwd = tmp_path_factory.mktemp("notebook")
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}}).execute()
  finally:
    os.environ.pop("PYTHONPATH") if old is None else os.environ.__setitem__("PYTHONPATH", old)
  return notebook


@pytest.mark.slow  # a kernel that trains a run: over twenty seconds
def test_the_notebook_runs_without_errors(executed):
  code = [cell for cell in executed.cells if cell.cell_type == "code"]
  assert all(cell.execution_count for cell in code)
  assert not [out for cell in code for out in cell.outputs if out.output_type == "error"]


@pytest.mark.slow  # a kernel that trains a run: over twenty seconds
def test_the_notebook_trains_compares_the_four_heads_and_plots(executed):
  printed = "\n".join(_outputs(cell) for cell in executed.cells if cell.cell_type == "code")
  assert re.search(r"ProtoNet_DR strokes 5-way 1-shot: test accuracy [\d.]+%", printed)
  assert "metrics.jsonl" in printed and "checkpoints" in printed
  heads = {name: (float(accuracy), float(confidence)) for name, accuracy, confidence in HEAD_LINE.findall(printed)}
  assert set(heads) == HEADS
  for name, (accuracy, confidence) in heads.items():
    assert 0 <= accuracy <= 100 and 1 / 5 <= confidence <= 1, name
  # What the notebook's text claims: softmax and DR rank classes alike, so they agree on accuracy.
  assert heads["ProtoNet_S"][0] == heads["ProtoNet_DR"][0] and heads["1-NN_S"][0] == heads["1-NN_DR"][0]
  images = [out for cell in executed.cells if cell.cell_type == "code" for out in cell.outputs
            if "image/png" in out.get("data", {})]
  assert len(images) == 1  # the run's curves
  assert re.search(r"checkpoints: 4 \| best validation accuracy: [\d.]+%", printed)
