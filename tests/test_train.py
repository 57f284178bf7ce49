"""End-to-end training on real Omniglot: learning, reproducibility, resume after SIGKILL."""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from fewshot import api
from fewshot.config import Config
from fewshot.data import default_tfds_dir
from fewshot.episodic import diagnostics
from fewshot.episodic.experiment import load_data
from fewshot.errors import ConfigError
from fewshot.evaluate import evaluate
from fewshot.records.rundir import RunDir
from fewshot.train import train

from omniglot_fixtures import write_character_pngs

SMALL = dict(way=5, shot=1, query=5, test_query=5, eval_every=50, val_episodes=20, test_episodes=50)


@pytest.mark.slow  # 300 episodes of Conv4 on real Omniglot per head
@pytest.mark.parametrize("head", ["softmax", "dr"])
def test_short_omniglot_run_learns(omniglot_dir, tmp_path, head):
  config = Config(dataset="omniglot", data_dir=str(omniglot_dir), head=head, episodes=300, **SMALL)
  results = train(config, tmp_path / "run", progress=False)
  rows = RunDir(tmp_path / "run").read_metrics()
  assert [r["episode"] for r in rows] == [50, 100, 150, 200, 250, 300]
  assert rows[-1]["train_loss"] < 0.7 * rows[0]["train_loss"]
  # Held-out characters, chance is 20%.
  assert results["test_accuracy"] > 60.0
  assert results["best_val_accuracy"] == max(r["val_accuracy"] for r in rows)
  for row in rows:  # the training diagnostics of every checkpoint, all defined
    for name in diagnostics.FIELDS:
      assert row[name] is not None and np.isfinite(row[name]) and row[name] > 0, (row["episode"], name)
  theta = [r["theta"] for r in rows]
  if head == "dr":
    assert len(set(theta)) > 1, "rho is trained by the same optimiser"
  else:
    assert theta == [pytest.approx(np.exp(2.0))] * len(rows), "softmax heads leave rho untouched"

  # The evaluate CLI's function and the Python API reproduce the run's test accuracy.
  again = evaluate(str(tmp_path / "run"))
  assert again["test_accuracy"] == results["test_accuracy"]
  model = api.load(str(tmp_path / "run"))
  assert model.config.head == head
  rng = np.random.default_rng(0)
  images = rng.integers(0, 256, (6, 28, 28, 1), dtype=np.uint8)
  probabilities = np.asarray(model.probabilities(images[:3], [0, 1, 2], images[3:]))
  np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
  assert model.embed(images).shape == (6, 64)


def _train_command(workdir, *extra):
  args = dict(dataset="omniglot", episodes=250, **SMALL)
  flags = [f"--{k}={v}" for k, v in args.items()]
  return [sys.executable, "-m", "fewshot.train", f"--workdir={workdir}", *flags, *extra]


def _comparable(rows):
  return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


@pytest.mark.slow  # killed and resumed
def test_resume_after_sigkill_matches_uninterrupted_run(omniglot_dir, tmp_path):
  data_flag = f"--data_dir={omniglot_dir}"
  straight = subprocess.run(_train_command(tmp_path / "straight", data_flag), capture_output=True, text=True)
  assert straight.returncode == 0, straight.stderr[-2000:]

  workdir = tmp_path / "killed"
  process = subprocess.Popen(_train_command(workdir, data_flag), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  metrics = workdir / "metrics.jsonl"
  deadline = time.time() + 300
  while time.time() < deadline and process.poll() is None:
    if metrics.exists() and len(metrics.read_text().splitlines()) >= 2:
      break
    time.sleep(0.05)
  assert process.poll() is None, "the run finished before it could be killed; give it more episodes"
  os.kill(process.pid, signal.SIGKILL)
  process.wait()
  assert not (workdir / "results.json").exists()
  # Whatever the moment of the kill, every file left behind is whole.
  rows = [json.loads(line) for line in metrics.read_text().splitlines()]
  assert 2 <= len(rows) < 5

  refused = subprocess.run(_train_command(workdir, data_flag), capture_output=True, text=True)
  assert refused.returncode == 2 and "--resume" in refused.stderr

  resumed = subprocess.run(_train_command(workdir, data_flag, "--resume"), capture_output=True, text=True)
  assert resumed.returncode == 0, resumed.stderr[-2000:]
  assert _comparable(RunDir(workdir).read_metrics()) == _comparable(RunDir(tmp_path / "straight").read_metrics())
  assert RunDir(workdir).read_results()["test_accuracy"] == RunDir(tmp_path / "straight").read_results()["test_accuracy"]


@pytest.mark.slow
def test_evaluate_cli_reads_data_from_its_tfds_dir(tmp_path):
  """--tfds_dir overrides the run's: the data is read from there, and gives the run's accuracy."""
  tiny = dict(way=2, shot=1, query=2, test_query=2, episodes=2, eval_every=2, val_episodes=1, test_episodes=4)
  results = train(Config(dataset="strokes", **tiny), tmp_path / "run", progress=False)
  # The prepared data moved; the default location is empty, so reading from anywhere else would prepare there.
  moved, unused = tmp_path / "tfds_moved", tmp_path / "tfds_default"
  shutil.copytree(pathlib.Path(default_tfds_dir()) / "fewshot_strokes", moved / "fewshot_strokes")
  evaluated = subprocess.run([sys.executable, "-m", "fewshot.evaluate", f"--workdir={tmp_path / 'run'}",
                              f"--tfds_dir={moved}"], capture_output=True, text=True,
                             env={**os.environ, "TFDS_DATA_DIR": str(unused)})
  assert evaluated.returncode == 0, evaluated.stderr[-2000:]
  assert not unused.exists(), "the data was not read from --tfds_dir"
  assert f"test accuracy {results['test_accuracy']:.2f}%" in evaluated.stdout, evaluated.stdout


def test_omniglot_background_evaluation_with_rotations_keeps_each_character_in_one_split(tmp_path):
  for i, alphabet in enumerate(["Latin", "Greek", "Angelic", "Tengwar"]):
    for c in range(4):
      write_character_pngs(tmp_path / "src", alphabet, f"character{c + 1:02d}", 3, seed=10 * i + c)
  config = Config(dataset="omniglot", data_dir=str(tmp_path / "src"), tfds_dir=str(tmp_path / "tfds"),
                  class_splits="background_evaluation", rotations=True)
  loaded = load_data(config)
  characters = {name: {c.rsplit("/", 1)[0] for c in split.class_names} for name, split in loaded.items()}
  assert {c.split("/")[0] for c in characters["test"]} == {"Angelic", "Tengwar"}
  # val: every fourth background character, held out before the rotations were made.
  assert len(characters["train"]) == 6 and len(characters["val"]) == 2
  assert not characters["train"] & characters["val"] and not (characters["train"] | characters["val"]) & characters["test"]
  for split in loaded.values():
    assert split.num_classes == 4 * len({c.rsplit("/", 1)[0] for c in split.class_names})
  assert Config(dataset="omniglot").class_splits == "default"
  for bad, fragment in ((dict(dataset="omniglot", class_splits="fewshot"), "default, vinyals_published, vinyals_sizes"),
                        (dict(dataset="cub", rotations=True), "--rotations"),
                        (dict(dataset="strokes", rotations=True), "--rotations applies to")):
    with pytest.raises(ConfigError, match=fragment):
      Config(**bad)


def test_lr_halve_every_halves_adam_s_steps_on_schedule():
  import jax.numpy as jnp  # noqa: PLC0415

  from fewshot.training.train_state import adam  # noqa: PLC0415

  # Under a constant gradient Adam steps lr_t * g / (|g| + eps): each step's size is that step's rate.
  params, grads = {"w": jnp.zeros(3)}, {"w": jnp.array([0.5, -2.0, 4.0])}
  optimizer = adam(1e-3, halve_every=2)
  state, sizes = optimizer.init(params), []
  for _ in range(5):
    updates, state = optimizer.update(grads, state, params)
    sizes.append(np.abs(np.asarray(updates["w"])))
  np.testing.assert_allclose(np.stack(sizes), np.repeat(1e-3 * 0.5 ** (np.arange(5) // 2), 3).reshape(5, 3),
                             rtol=1e-4)  # float32 bias corrections
  # Without it, the paper's constant rate, and the optimiser state (checkpoints) of runs from before the option.
  assert Config().lr_halve_every is None and Config.from_dict({"way": 5}).lr_halve_every is None
  constant = adam(1e-3)
  assert [np.abs(np.asarray(constant.update(grads, constant.init(params), params)[0]["w"])).max()] == \
      pytest.approx([1e-3], rel=1e-5)
  with pytest.raises(ConfigError, match="lr_halve_every must be a positive integer"):
    Config(lr_halve_every=0)


@pytest.mark.slow  # two short strokes runs
def test_centring_both_trains_the_same_run_and_adds_the_reference_codes_diagnostics(tmp_path):
  """The diagnostics never touch training: a run under --centring both is the --centring points run, bit for bit,
  with the reference code's centred diagnostics beside the paper's (so one run measures both conventions).
  """
  tiny = dict(way=3, shot=1, query=2, test_query=2, episodes=6, eval_every=2, val_episodes=2, test_episodes=3)
  points = train(Config(**tiny), tmp_path / "points", progress=False)
  both = train(Config(**tiny, centring="both"), tmp_path / "both", progress=False)
  assert {**both, "workdir": None} == {**points, "workdir": None}
  rows = {name: RunDir(tmp_path / name).read_metrics() for name in ("points", "both")}
  extra = [f"{name}_features" for name in diagnostics.CENTRED]
  for p, b in zip(rows["points"], rows["both"]):
    assert {k: v for k, v in b.items() if k not in extra and k != "seconds"} == {
        k: v for k, v in p.items() if k != "seconds"}
    assert all(np.isfinite(b[name]) for name in extra) and b["alpha_features"] != b["alpha"]


def test_resize_nearest_trains_validates_and_tests_on_binary_images_and_is_recorded(tmp_path):
  for i, alphabet in enumerate(["Latin", "Greek"]):
    for c in range(5):  # 10 characters: 6 / 2 / 2 in the default split
      write_character_pngs(tmp_path / "src", alphabet, f"character{c + 1:02d}", 3, seed=10 * i + c)
  options = dict(dataset="omniglot", data_dir=str(tmp_path / "src"), tfds_dir=str(tmp_path / "tfds"), way=2, shot=1,
                 query=1, test_query=1, episodes=2, eval_every=2, val_episodes=1, test_episodes=1)
  config = Config(**options, resize="nearest")
  assert all(set(np.unique(split.images)) <= {0, 255} for split in load_data(config).values())
  results = train(config, tmp_path / "run", progress=False)
  saved = RunDir(tmp_path / "run").read_config()
  assert saved["resize"] == "nearest" and results["best_val_accuracy"] is not None and "test_accuracy" in results
  assert Config(**options).resize == "box"  # the default, and what a config.json without the field reads as
