"""python -m fewshot.plot: PNG figures of runs, and the confidence landscape of softmax vs DR."""

import dataclasses
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from fewshot import landscape, plot
from fewshot.config import Config
from fewshot.errors import ConfigError, OutputError, RunDirError
from fewshot.records.reading import Run
from fewshot.records.rundir import RunDir

from run_fixtures import write_curves_run, write_dml_run

PROTOTYPES = np.array(landscape.PROTOTYPES)


def _assert_png(path, min_bytes=5_000):
  with open(path, "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  with Image.open(path) as image:
    image.verify()
  with Image.open(path) as image:
    pixels = np.asarray(image.convert("L"), dtype=np.float64)
  assert min(pixels.shape) > 200 and pixels.std() > 5  # drawn on, not a blank canvas
  assert path.stat().st_size > min_bytes


def test_figures_of_runs_are_valid_pngs(tmp_path):
  paths = [write_curves_run(tmp_path / "A", "softmax", seed=1), write_curves_run(tmp_path / "B", "dr", seed=2)]
  written, warning = plot.plot(paths, str(tmp_path / "figs"))
  assert warning is None
  assert [p.split("/")[-1] for p in written] == list(plot.FILES)
  for path in written:
    _assert_png(tmp_path / "figs" / path.split("/")[-1])


def test_landscape_only_cli(tmp_path):
  out = tmp_path / "figs"
  result = subprocess.run([sys.executable, "-m", "fewshot.plot", "--landscape_only", f"--out={out}"],
                          capture_output=True, text=True)
  assert result.returncode == 0, result.stderr
  assert result.stdout.split() == [str(out / "confidence_landscape.png")]
  assert [p.name for p in out.iterdir()] == ["confidence_landscape.png"]
  _assert_png(out / "confidence_landscape.png")


def test_bad_input(tmp_path):
  with pytest.raises(ConfigError, match="at least one run directory"):
    plot.plot([], str(tmp_path / "figs"))
  with pytest.raises(RunDirError, match="does not exist"):
    plot.plot([str(tmp_path / "nowhere")], str(tmp_path / "figs"))
  (tmp_path / "file").write_text("x")
  with pytest.raises(OutputError, match="is a file"):
    plot.plot([], str(tmp_path / "file"), landscape_only=True)
  with pytest.raises(ConfigError, match="--landscape_only draws the heads' illustration, not runs; drop the run"):
    plot.plot([str(tmp_path / "nowhere")], str(tmp_path / "figs"), landscape_only=True)


def test_dr_is_certain_at_each_prototype_and_softmax_is_not():
  dr = landscape.max_probability(PROTOTYPES, PROTOTYPES, "dr")
  softmax = landscape.max_probability(PROTOTYPES, PROTOTYPES, "softmax")
  np.testing.assert_allclose(dr, 1.0, atol=1e-6)
  # Softmax at prototype c: 1 / sum_c' exp(-|p_c - p_c'|^2), computed here without fewshot.
  sq = ((PROTOTYPES[:, None] - PROTOTYPES[None]) ** 2).sum(-1)
  np.testing.assert_allclose(softmax, 1.0 / np.exp(-sq).sum(1), rtol=1e-5)
  assert np.all(softmax < 0.99)


def test_landscape_values_lie_between_chance_and_certainty():
  for head in ("softmax", "dr"):
    values = landscape.confidence_landscape(head=head, resolution=41)
    assert values.shape == (41, 41)
    assert np.all(values >= 1 / 3 - 1e-6) and np.all(values <= 1 + 1e-6)


@pytest.mark.parametrize("c", [0.25, 4.0])
def test_dr_landscape_is_scale_invariant_and_softmax_is_not(c):
  def scaled(head, scale):
    return landscape.confidence_landscape(PROTOTYPES * scale, head, extent=landscape.EXTENT * scale, resolution=61)

  np.testing.assert_allclose(scaled("dr", c), scaled("dr", 1.0), atol=1e-4)
  assert np.abs(scaled("softmax", c) - scaled("softmax", 1.0)).max() > 0.1


def test_a_seed_group_is_its_median_with_the_middle_half_band(tmp_path):
  config = Config(dataset="omniglot")
  rows = lambda values: tuple({"episode": 100 * (i + 1), "val_accuracy": v} for i, v in enumerate(values))  # noqa: E731
  runs = [Run(f"s{k}", dataclasses.replace(config, seed=k), rows(v), None)
          for k, v in enumerate([[1.0, 4.0], [2.0, None], [3.0, 8.0], [5.0, 6.0]])]
  other = Run("dr", dataclasses.replace(config, head="dr"), rows([9.0, 9.0]), None)
  grouped = plot.seed_groups(runs + [other], ["a", "b", "c", "d", "e"])
  assert [(label, len(members)) for label, members in grouped] == [("a", 4), ("e", 1)]  # the first run's label
  episodes, median, low, high = plot.median_band(runs, "val_accuracy")
  np.testing.assert_array_equal(episodes, [100, 200])
  np.testing.assert_allclose(median, [np.median([1, 2, 3, 5]), np.median([4, 8, 6])])
  np.testing.assert_allclose(low, [np.percentile([1, 2, 3, 5], 25), np.percentile([4, 8, 6], 25)])
  np.testing.assert_allclose(high, [np.percentile([1, 2, 3, 5], 75), np.percentile([4, 8, 6], 75)])


def test_figures_label_their_axes_show_the_properly_learned_side_and_the_val_interval(tmp_path, monkeypatch):
  """Issue 12: y labels, the shaded properly learned side of 1, one legend below the panels, val_ci95 bands."""
  figures = {}
  monkeypatch.setattr(plot, "_save", lambda fig, path: figures.setdefault(path.name, fig) and str(path))
  paths = [write_curves_run(tmp_path / name, head, seed=k) for k, (name, head) in enumerate([("A", "softmax"), ("B", "dr")])]
  runs = plot.read_runs(paths, Config.from_dict)
  plot.plot_val_accuracy(runs, tmp_path)
  plot.plot_norm_ratio(runs, tmp_path)
  plot.plot_alpha_ratios(runs, tmp_path)
  for name, fig in figures.items():
    assert all(ax.get_ylabel() for ax in fig.axes), name
    assert not any(ax.get_legend() for ax in fig.axes) and len(fig.legends) == 1, name  # one legend, off the panels
    assert fig.get_figwidth() <= 7.0, name  # prints at a paper's two-column width without shrinking
  for ax in figures["alpha_ratios.png"].axes:
    texts = [t.get_text() for t in ax.texts]
    assert any(t.startswith("properly learned (") for t in texts), ax.get_title()
  # One 95% band per single run, as wide as its val_ci95 (1.0 in write_run) each side of the curve.
  bands = figures["val_accuracy.png"].axes[0].collections
  assert len(bands) == 2
  vertices = bands[0].get_paths()[0].vertices
  assert np.isclose(vertices[:, 1].max() - vertices[:, 1].min(), np.ptp(runs[0].values("val_accuracy")) + 2.0,
                    atol=0.01)


def test_a_folder_of_two_arms_is_drawn_as_analyze_reads_it(tmp_path, monkeypatch):
  """Before, ``plot runs/paperq`` was refused although ``analyze runs/paperq`` read it."""
  folder = tmp_path / "paperq"
  for k in range(2):
    write_curves_run(folder / "softmax" / f"S_seed{k}", "softmax", seed=k)
    write_curves_run(folder / "dr" / f"DR_seed{k}", "dr", seed=10 + k)
  (folder / "started").mkdir()
  (folder / "started" / "config.json").write_text('{"dataset": "omniglot", "head": "dr", "seed": 9}')
  drawn = []
  original = plot.plot_val_accuracy
  monkeypatch.setattr(plot, "plot_val_accuracy", lambda runs, *a, **k: drawn.append(runs) or original(runs, *a, **k))
  written, warning = plot.plot([str(folder)], str(tmp_path / "figs"))
  assert [len(members) for _, members in plot._groups(drawn[0])] == [2, 2]  # two arms of two seeds each
  assert warning == f"warning: left out 1 runs: {folder / 'started'} (no metrics row yet)."
  _assert_png(tmp_path / "figs" / "val_accuracy.png")


def test_a_full_disk_leaves_the_old_figure_whole(tmp_path, monkeypatch):
  """Before, a full disk replaced the old figure with a truncated PNG (issue 29, case 8)."""
  import errno  # noqa: PLC0415
  import os  # noqa: PLC0415

  from fewshot.records import files  # noqa: PLC0415

  out = tmp_path / "figs"
  plot.plot([], str(out), landscape_only=True)
  before = (out / "confidence_landscape.png").read_bytes()

  def full(*args):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

  monkeypatch.setattr(files.os, "replace", full)
  with pytest.raises(OutputError, match="No space left on device") as refused:
    plot.plot([], str(out), landscape_only=True, fmt="png")
  assert "\n" not in str(refused.value)
  assert (out / "confidence_landscape.png").read_bytes() == before and sorted(p.name for p in out.iterdir()) == [
      "confidence_landscape.png"]


def test_metric_learning_runs_get_their_figures_with_a_curve_per_fold_model(tmp_path, monkeypatch):
  """Issue 40, item 4: plot refused metric-learning runs. Validation MAP@R and the training loss against epochs:
  a four-fold run's fold models a curve each, a seed group of one-fold runs its median and the middle half's band.
  """
  four = write_dml_run(tmp_path / "runs" / "four", "triplet", folds=4)
  seeds = [write_dml_run(tmp_path / "runs" / f"contrastive_seed{k}", "contrastive", k) for k in range(3)]
  figures = {}
  monkeypatch.setattr(plot, "_save", lambda fig, path: figures.setdefault(path.name, fig) and str(path))
  written, warning = plot.plot([str(tmp_path / "runs")], str(tmp_path / "figs"))
  assert [p.split("/")[-1] for p in written] == ["val_map_at_r.png", "loss.png"] == list(figures)
  assert warning == "warning: the runs come from different protocols (folds 1 vs 4); comparing them anyway."
  folds = [RunDir(four).folds(4)[k].read_metrics() for k in range(4)]
  group = [RunDir(path).read_metrics() for path in seeds]
  for name, key in (("val_map_at_r.png", "val_map_at_r"), ("loss.png", "loss")):
    (ax,) = figures[name].axes
    lines = ax.get_lines()
    assert ax.get_xlabel() == "epochs" and len(lines) == 5
    for line, rows in zip(lines, [None] + folds):  # in the runs' path order: the seed group first
      expected = [row[key] for row in rows] if rows else np.median([[row[key] for row in r] for r in group], axis=0)
      np.testing.assert_allclose(line.get_xdata(), [1, 2, 3])
      np.testing.assert_allclose(line.get_ydata(), expected)
    low, high = np.percentile([[row[key] for row in r] for r in group], [25, 75], axis=0)
    (band,) = ax.collections  # the seed group's alone: a fold model's curve is one run's
    np.testing.assert_allclose(sorted(band.get_paths()[0].vertices[:, 1])[0], low.min())
    np.testing.assert_allclose(sorted(band.get_paths()[0].vertices[:, 1])[-1], high.max())
    labels = [text.get_text().replace("\n", " ") for text in figures[name].legends[0].get_texts()]
    assert labels == ["contrastive, folds=1, 3 seeds (median; band: seeds' 25–75%)"] + [
        f"triplet, folds=4, fold={k}" for k in range(4)]
    assert figures[name]._suptitle.get_text().replace("\n", " ") == (
        "strokes, conv4, 128-d embedding, 1–3 seeds per arm; runs differ in folds")


def test_plot_of_metric_learning_runs_writes_and_names_only_their_figures(tmp_path):
  run = write_dml_run(tmp_path / "run", folds=4)
  done = subprocess.run([sys.executable, "-m", "fewshot.plot", run, f"--out={tmp_path / 'figs'}"], capture_output=True,
                        text=True)
  assert done.returncode == 0 and done.stderr == "", done.stderr
  assert done.stdout.split() == [str(tmp_path / "figs" / "val_map_at_r.png"), str(tmp_path / "figs" / "loss.png")]
  assert sorted(p.name for p in (tmp_path / "figs").iterdir()) == ["loss.png", "val_map_at_r.png"]
  for name in ("loss.png", "val_map_at_r.png"):
    _assert_png(tmp_path / "figs" / name)


def test_runs_without_update_diagnostics_are_left_out_of_the_diagnostic_figures_with_a_word(tmp_path):
  """Issue 56: a MAML run's norm_ratio.png and alpha_ratios.png had blank axes and a legend for absent lines."""
  import pathlib  # noqa: PLC0415

  from fewshot.analysis import stats  # noqa: PLC0415

  from run_fixtures import write_run  # noqa: PLC0415

  none = {m: [None] * 20 for m in ("alpha", "psi_con", "psi_div") + stats.MEASURES}
  maml = write_run(tmp_path / "maml", "softmax", values=none, method="maml")
  proto = write_run(tmp_path / "proto", "dr")
  written, warning = plot.plot([maml], str(tmp_path / "only_maml"))
  assert [pathlib.Path(p).name for p in written] == ["val_accuracy.png"]
  assert "norm_ratio.png is not drawn; alpha_ratios.png is not drawn: no update diagnostics" in warning
  written, warning = plot.plot([maml, proto], str(tmp_path / "both"))
  assert [pathlib.Path(p).name for p in written] == ["val_accuracy.png", "norm_ratio.png", "alpha_ratios.png"]
  assert f"norm_ratio.png leaves out {maml}" in warning
  assert plot.plot([proto], str(tmp_path / "proto_only"))[1] is None
