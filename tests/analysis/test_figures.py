"""Figures for a paper (issue "A researcher's first week", item 12): exact column widths with long labels, subscripts
as mathtext, bands named in the legend, PDF and SVG with text as text, a caption saying what the runs are.
"""

import dataclasses
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from PIL import Image

from fewshot import plot
from fewshot.analysis import figures
from fewshot.analysis.measures import SYMBOLS
from fewshot.config import Config
from fewshot.records.reading import Run
from fewshot.records.rundir import RunDir

from run_fixtures import write_curves_run as write_run

LONG = dict(learning_rate=0.0005, lr_halve_every=2000, distort=True)  # options that make a label over 60 characters


def write_runs(tmp_path, specs):
  """Run directories of ``(name, head, seed, options)``, each with random rows (test_plot.write_run)."""
  paths = []
  for k, (name, head, seed, options) in enumerate(specs):
    path = write_run(tmp_path / name, head, seed=k)
    config = RunDir(path).read_config()
    config.update(options, seed=seed)
    RunDir(path).write_config(config)
    paths.append(path)
  return paths


def drawn(monkeypatch, runs, tmp_path) -> dict:
  """The figures of runs as matplotlib Figures, by file name, undrawn to any file."""
  figs = {}
  monkeypatch.setattr(plot, "_save", lambda fig, path: figs.setdefault(path.name, fig) and str(path))
  plot.plot_val_accuracy(runs, tmp_path)
  plot.plot_norm_ratio(runs, tmp_path)
  plot.plot_alpha_ratios(runs, tmp_path)
  return figs


def texts(fig) -> list[str]:
  """Every text of a figure: titles, labels, tick labels, annotations, legend entries, the caption."""
  return [t.get_text() for t in fig.findobj(lambda artist: hasattr(artist, "get_text")) if t.get_text()]


def test_a_60_character_label_keeps_the_column_and_page_widths(tmp_path):
  paths = write_runs(tmp_path, [("A", "dr", 0, {}), ("B", "dr", 0, LONG), ("C", "softmax", 0, LONG)])
  runs = plot.read_runs(paths, Config.from_dict)
  assert max(len(label) for label in figures.curve_labels(runs)) >= 60
  written, _ = plot.plot(paths, str(tmp_path / "figs"))
  widths = {path.split("/")[-1]: Image.open(path).size[0] for path in written}
  column, page = round(plot.COLUMN * plot.DPI), round(plot.PAGE * plot.DPI)
  assert widths == {"val_accuracy.png": column, "norm_ratio.png": column, "alpha_ratios.png": page}
  landscape, _ = plot.plot([], str(tmp_path / "figs"), landscape_only=True)
  assert Image.open(landscape[0]).size[0] == page


def test_subscripts_are_mathtext_and_no_literal_underscore_is_left_where_one_was_meant(tmp_path, monkeypatch):
  paths = write_runs(tmp_path, [("A", "softmax", 0, {}), ("B", "dr", 0, {})])
  figs = drawn(monkeypatch, plot.read_runs(paths, Config.from_dict), tmp_path)
  assert [ax.get_ylabel() for ax in figs["alpha_ratios.png"].axes] == [SYMBOLS[m] for m in plot.ALPHA_RATIOS]
  assert figs["norm_ratio.png"].axes[0].get_ylabel() == SYMBOLS["norm_ratio"]
  for name, fig in figs.items():
    legend = {t.get_text() for legend in fig.legends for t in legend.get_texts()}
    for text in texts(fig):
      assert "ψ" not in text and "α̂" not in text, (name, text)  # symbols are written in mathtext
      if "_" in text and text not in legend:  # legend entries name models (ProtoNet_DR), no subscript meant there
        assert text.count("$") >= 2, (name, text)
  assert all(symbol.startswith("$") and symbol.endswith("$") for symbol in SYMBOLS.values())
  assert r"\psi_\mathrm{con}" in SYMBOLS["psi_con"] and r"\hat{\alpha}" in SYMBOLS["alpha"]


def test_each_curve_names_its_band_in_the_legend(tmp_path, monkeypatch):
  group = [("dr_s0", "dr", 0, {}), ("dr_s1", "dr", 1, {}), ("dr_s2", "dr", 2, {})]
  paths = write_runs(tmp_path, [("softmax", "softmax", 0, {}), *group])
  figs = drawn(monkeypatch, plot.read_runs(paths, Config.from_dict), tmp_path)
  legend = [t.get_text().replace("\n", " ") for t in figs["val_accuracy.png"].legends[0].get_texts()]
  assert legend == ["ProtoNet_S (band: 95% interval)", "ProtoNet_DR, 3 seeds (median; band: seeds' 25–75%)"]
  # The diagnostics have no interval of their own: a single run is a bare line, a seed group keeps its band.
  ratios = [t.get_text().replace("\n", " ") for t in figs["alpha_ratios.png"].legends[0].get_texts()]
  assert ratios == ["ProtoNet_S", "ProtoNet_DR, 3 seeds (median; band: seeds' 25–75%)"]
  # Each entry draws the band under its line, so the legend key shows what the band looks like.
  handles = figs["val_accuracy.png"].legends[0].legend_handles
  assert len(handles) == 2


def test_labels_name_the_options_that_differ_not_the_directories(tmp_path):
  config = Config(dataset="strokes", head="dr")
  run = lambda path, **changes: Run(path, dataclasses.replace(config, **changes), (), None)  # noqa: E731
  runs = [run("runs/x0"), run("runs/x1", seed=1), run("runs/y", learning_rate=0.01), run("runs/z", head="softmax")]
  assert figures.curve_labels(runs) == ["ProtoNet_DR, learning_rate=0.001", "ProtoNet_DR, learning_rate=0.001",
                                      "ProtoNet_DR, learning_rate=0.01", "ProtoNet_S, learning_rate=0.001"]
  assert figures.curve_labels(runs[:2]) == ["ProtoNet_DR", "ProtoNet_DR"]  # seeds alone: one curve, one label
  assert figures.wrap("a" * 30, 12).splitlines() == ["a" * 12, "a" * 12, "a" * 6]


def test_the_caption_says_what_the_runs_are_or_what_they_differ_in():
  config = Config(dataset="omniglot", backbone="conv4", way=5, shot=1)
  run = lambda **changes: Run("r", dataclasses.replace(config, **changes), (), None)  # noqa: E731
  arms = [("DR", [run(head="dr", seed=s) for s in range(5)]), ("S", [run(seed=s) for s in range(5)])]
  assert figures.caption(arms) == "omniglot, 5-way 1-shot, conv4, 5 seeds per arm"
  assert figures.caption([("S", [run()])]) == "omniglot, 5-way 1-shot, conv4, 1 seed per arm"
  strokes = Run("s", Config(dataset="strokes", shot=5, head="dr"), (), None)
  mixed = [("a", [run(), run(seed=1)]), ("b", [strokes])]
  assert figures.caption(mixed) == "5-way, conv4, 1–2 seeds per arm; runs differ in dataset, shot"
  assert figures.caption([("a", [run()]), ("b", [run(way=20)])]) == ("omniglot, 1-shot, conv4, 1 seed per arm; runs "
                                                                      "differ in way")
  assert figures.caption([("a", [run(way=20, test_way=5)])]) == ("omniglot, 20-way 1-shot (validated 5-way), conv4, "
                                                                 "1 seed per arm")


@pytest.mark.slow  # trains a seed group
def test_a_real_seed_group_figure_says_dataset_way_shot_backbone_and_seeds(tmp_path, monkeypatch):
  from fewshot.train import train_group

  tiny = dict(way=2, shot=1, query=2, test_query=2, episodes=4, eval_every=2, val_episodes=1, test_episodes=4)
  paths = [str(tmp_path / f"seed{s}") for s in (0, 1)]
  train_group(Config(dataset="strokes", head="dr", **tiny), (0, 1), paths, progress=False)
  figs = drawn(monkeypatch, plot.read_runs(paths, Config.from_dict), tmp_path)
  for name, fig in figs.items():
    assert fig.get_suptitle() == "strokes, 2-way 1-shot, conv4, 2 seeds per arm", name


@pytest.mark.parametrize("fmt", ["pdf", "svg"])
def test_vector_formats_are_written_with_their_text_as_text(tmp_path, fmt):
  paths = write_runs(tmp_path, [("A", "softmax", 0, {}), ("B", "dr", 0, {})])
  written, _ = plot.plot(paths, str(tmp_path / "figs"), fmt=fmt)
  assert [p.split("/")[-1] for p in written] == [f"{name}.{fmt}" for name in plot.FIGURES]
  for path in written:
    content = open(path, "rb").read()
    if fmt == "pdf":
      assert content.startswith(b"%PDF") and b"/FontFile2" in content  # TrueType embedded: text, not outlines
    else:
      root = ET.fromstring(content)
      words = " ".join("".join(e.itertext()) for e in root.iter("{http://www.w3.org/2000/svg}text"))
      assert "episodes" in words or "probability" in words, path


def test_format_flag_and_a_format_the_command_does_not_write(tmp_path):
  out = tmp_path / "figs"
  result = subprocess.run([sys.executable, "-m", "fewshot.plot", "--landscape_only", "--format=svg", f"--out={out}"],
                          capture_output=True, text=True)
  assert result.returncode == 0, result.stderr
  assert result.stdout.split() == [str(out / "confidence_landscape.svg")]
  ET.parse(out / "confidence_landscape.svg")
  with pytest.raises(plot.ConfigError, match="--format eps is not one of png, pdf, svg"):
    plot.plot([], str(out), landscape_only=True, fmt="eps")


def test_curves_are_coloured_by_model_whatever_the_order_of_the_runs():
  from fewshot.analysis.figures import MODEL_COLOURS, curve_styles

  config = Config(dataset="omniglot")
  runs = {name: Run(name, dataclasses.replace(config, **options), (), None) for name, options in (
      ("S", {}), ("DR", {"head": "dr"}), ("DR_lr", {"head": "dr", "learning_rate": 0.01}), ("nn", {"classifier": "nn"}))}
  forward = dict(zip(runs, curve_styles([(name, [run]) for name, run in runs.items()])))
  backward = dict(zip(reversed(runs), curve_styles([(name, [run]) for name, run in reversed(runs.items())])))
  assert forward == backward
  assert forward["S"]["color"] == MODEL_COLOURS["ProtoNet_S"] and forward["nn"]["color"] == MODEL_COLOURS["1-NN_S"]
  assert forward["DR"]["color"] == forward["DR_lr"]["color"] == MODEL_COLOURS["ProtoNet_DR"]
  assert {forward["DR"]["linestyle"], forward["DR_lr"]["linestyle"]} == {"-", "--"}  # told apart by the line
