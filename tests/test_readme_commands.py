"""Every command of the README's and the guide pages' bash blocks (``environment.GUIDE``) runs as written (issue 42: `python benchmarks/bench_episodes.py`, as
the README wrote it, stopped with ModuleNotFoundError).

The commands run in README order through bash in one working folder, as a user's terminal would (so `runs/A`, globs
and the runs an earlier command trained are what the next one reads). ``DIR`` is the folder of the command's dataset;
where a command would train for minutes, flags of a few steps are appended after the written ones (the last value of
a flag wins, so every written flag is still parsed and checked); `runs/A` and `runs/B` are two runs trained before.
A command that cannot run here is in :data:`ELSEWHERE` with the reason and the test that runs its path; a command
that is neither run nor listed there fails the inventory test (default tier).
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import subprocess

import pytest

from dataset_fixtures import write_cars196, write_cub
from environment import checkout_env, guide_text

# A few steps of each long program, appended to what the README wrote.
BUDGET = {
    "fewshot.train": "--episodes=4 --eval_every=2 --val_episodes=2 --test_episodes=2",
    "fewshot.dml.train": "--epochs=1 --steps_per_epoch=2 --classes=2 --per_class=2",
    "benchmarks.bench_episodes": "--sizes=28 --episodes=2 --repeats=1 --no-loop",
    "benchmarks.bench_shapes": "--rows=5w1s16q-28 --old= --no-torch --repeats=1 --episodes=1",
    "benchmarks.bench_runs": "--sizes=28 --groups=1,2 --episodes=1 --repeats=1",
    "benchmarks.bench_diagnostics": "--episodes=2 --repeats=1",
    "benchmarks.bench_streaming": "--size=28 --episodes=2 --repeats=1 --gather_sizes=28 --gather_episodes=2",
    "benchmarks.bench_retrieval": "--n=300",
    "experiments.dml_omniglot": "--steps=2",
    "experiments.reproduce_dr": "--smoke",
    "experiments.reality_check": "--smoke",
}
# Commands not run here, by how they start: why, and where their path is run.
ELSEWHERE = {
    "pip install": "installs packages from the network; .ci/run runs the README's install",
    "python -m pytest": "the suite itself; .ci/run runs both tiers",
    "FEWSHOT_EMULATE_TF32=1 python -m pytest": "the suite under TF32 emulation (tests/test_tf32_emulation.py)",
    "python -m fewshot.reproduce snell2017_omniglot": "hours on the complete Omniglot; tests/published run its plan",
    "python -m fewshot.reproduce --page": "rewrites this checkout's docs/reproductions.md; tests/published rebuild it "
                                          "byte for byte",
    "python -m fewshot.train --dataset omniglot --data_dir DIR --seeds 0-15 --workdir runs/grid --coordinator_address":
        "four hosts; tests/training/test_peers.py launches a two-process group",
    "python -m fewshot.analyze runs/A runs/B [": "a synopsis ([...] marks the options); the lines after it run",
    "python examples/": "minutes each; tests/test_examples.py runs both",
    "python -m sphinx": "the documentation site, its notebook executed (a minute); tests/test_site.py builds it",
    "python -m benchmarks.device_check": "about 3 minutes; tests/test_device_check.py runs it with --smoke",
}
# What a command needs that this machine may lack, by the module it runs.
NEEDS = {"benchmarks.bench_retrieval": "pytorch_metric_learning"}
TORCH_NEEDED = "--torch"


def commands(text: str) -> list[str]:
  """The README's bash commands in order: continuation lines joined, comments and comment lines dropped."""
  found = []
  for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
    for line in block.replace("\\\n", " ").splitlines():
      command = " ".join(line.split("#")[0].split()) if not line.lstrip().startswith("#") else ""
      found += [command] if command else []
  return found


def not_run(command: str) -> str | None:
  return next((why for start, why in ELSEWHERE.items() if command.startswith(start)), None)


def program(command: str) -> str | None:
  match = re.search(r"python -m ([\w.]+)|python (experiments|benchmarks|examples)/(\w+)\.py", command)
  return None if match is None else match.group(1) or f"{match.group(2)}.{match.group(3)}"


def test_every_readme_command_is_run_here_or_says_where_it_is():
  listed = commands(guide_text())
  assert len(listed) >= 30
  for command in listed:
    assert not_run(command) or program(command) or command.startswith("python -c"), command
    assert "DIR" not in command or not_run(command) or "--dataset" in command or "--out DIR" in command, command
  # Every exception still names a command the README has (a stale one hides nothing).
  assert all(any(c.startswith(start) for c in listed) for start in ELSEWHERE), ELSEWHERE


@pytest.fixture(scope="module")
def terminal(tmp_path_factory, omniglot_dir):
  """The working folder and the dataset folders DIR stands for."""
  root = tmp_path_factory.mktemp("readme_terminal")
  folders = {"omniglot": str(omniglot_dir),
             "cars196": str(write_cars196(root / "data" / "cars", classes=16, per_class=6, size=(20, 24)).data_dir),
             "cub": str(write_cub(root / "data" / "cub", classes=8, per_class=8, size=(40, 48)).data_dir)}
  (root / "work").mkdir()
  return root / "work", folders


def _as_run(command: str, folders: dict[str, str], cwd: pathlib.Path) -> str | None:
  """The command as this test runs it, or None where this machine lacks what it needs."""
  name = program(command)
  if NEEDS.get(name) and importlib.util.find_spec(NEEDS[name]) is None:
    return None
  if TORCH_NEEDED in command.split() and importlib.util.find_spec("torch") is None:
    return None
  dataset = re.search(r"--dataset (\w+)", command)
  if "DIR" in command:
    command = re.sub(r"\bDIR\b", folders[dataset.group(1)] if dataset else str(cwd / "out"), command)
  if "runs/A" in command and not (cwd / "runs" / "A").exists():
    _link_two_runs(cwd)
  return f"{command} {BUDGET.get(name, '')}".strip()


def _link_two_runs(cwd: pathlib.Path) -> None:
  """runs/A and runs/B: a softmax and a DR run the README's commands trained before."""
  trained = sorted((cwd / "runs" / "paperq").iterdir())
  softmax = next(p for p in trained if "ProtoNet_S_" in p.name)
  dr = next(p for p in trained if "ProtoNet_DR_" in p.name)
  (cwd / "runs" / "A").symlink_to(softmax)
  (cwd / "runs" / "B").symlink_to(dr)


@pytest.mark.slow  # about 30 commands, each a process of its own: minutes
def test_the_readme_commands_run_as_written(terminal):
  cwd, folders = terminal
  ran, lacked = [], []
  for command in commands(guide_text()):
    if not_run(command):
      continue
    line = _as_run(command, folders, cwd)
    if line is None:
      lacked.append(command)
      continue
    done = subprocess.run(["bash", "-c", line], cwd=cwd, capture_output=True, text=True, env=checkout_env(),
                          timeout=900)
    assert done.returncode == 0, f"{line}\n{done.stderr[-3000:]}"
    ran.append(command)
  assert len(ran) >= 20, (ran, lacked)
