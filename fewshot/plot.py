"""Figures of runs and of the two heads, as PNG, PDF or SVG files (the DR paper's Figures 1-5).

    python -m fewshot.plot runs/A runs/B [...] [--out figs/] [--format png|pdf|svg]
    python -m fewshot.plot runs/paperq          # a folder: every run below it, as analyze reads it
    python -m fewshot.plot --landscape_only [--out figs/]

Writes into ``--out``, and prints the path of, each figure (``.pdf`` or ``.svg`` in place of ``.png`` with
``--format``; their text stays text). Of few-shot runs:

* ``val_accuracy.png``: validation accuracy against episodes, every run on one axis (Figs 2-3);
* ``norm_ratio.png``: the norm ratio against episodes (Fig 4);
* ``alpha_ratios.png``: con-alpha, div-alpha and con-div against episodes, a panel each (Fig 5).

Of metric-learning runs (``python -m fewshot.dml.train``, :mod:`fewshot.analysis.retrieval_figures`), a curve per
fold model where a run trained several: ``val_map_at_r.png``, validation MAP@R against epochs, every run on one axis,
and ``loss.png``, the training loss. Runs of both kinds are refused in one line. With ``--landscape_only`` instead,
``confidence_landscape.png``: the largest class probability around three 2-D prototypes under softmax and under the
distance ratio (Fig 1), an illustration of the two heads that needs no runs (so it is never written beside a run's
figures, as if it were one of them).

The alpha-ratio panels draw a line at 1 and shade the side where a checkpoint counts as properly learned (con-alpha
and con-div below 1, div-alpha above; :data:`fewshot.analysis.measures.PROPERLY_LEARNED`). Undefined (null)
diagnostics are left out of the curves. A single run's validation curve carries its 95% interval (``val_ci95``) as a
band; runs of one configuration under several seeds (a seed group) are drawn as their median line with a band from
the 25th to the 75th percentile of the seeds at each checkpoint; each curve's legend entry names its band. A figure
of runs says what they are above its panels (dataset, way/shot, backbone, seeds per arm;
:func:`fewshot.analysis.figures.caption`), and its curves are labelled by the model name (a metric-learning run's
loss) plus the options in which the runs differ. Figures are sized for print: exactly 3.5 in (one column) or 7 in
(two columns) wide, the legend below the panels (long labels wrapped to fit), 8 pt text, symbols in mathtext.

Matplotlib and JAX are imported when a figure is drawn, after the runs and ``--out`` are checked.
"""

from __future__ import annotations

import io
import pathlib
import sys

import numpy as np
from absl import flags, logging

from fewshot import kinds, options, runner
from fewshot.analysis import retrieval_figures
from fewshot.analysis.figures import caption, curve_labels, curve_styles, legend_label, median_band, seed_groups, wrap
from fewshot.analysis.measures import BY_NAME, LABELS, PROPERLY_LEARNED, SYMBOLS
from fewshot.errors import ConfigError, OutputError
from fewshot.landscape import EXTENT, PROTOTYPES, confidence_landscape
from fewshot.records.files import check_writable, make_dirs, write_bytes_atomic
from fewshot.records.reading import expand, one_kind, protocol_warning, read_runs  # noqa: F401  (plot.read_runs)

# Three prototypes of Fig 1, placed unevenly so that the class boundaries are not symmetric.
ALPHA_RATIOS = ("con_alpha", "div_alpha", "con_div")
FIGURES = ("val_accuracy", "norm_ratio", "alpha_ratios")  # of few-shot runs; the landscape is --landscape_only's
FORMATS = ("png", "pdf", "svg")
FILES = tuple(f"{name}.png" for name in FIGURES)
DPI = 200
COLUMN, PAGE = 3.5, 7.0  # figure widths in inches: one column, two columns of a paper
# Vector files keep their text as text (TrueType in PDF, <text> in SVG), so a journal can set it and readers search it.
STYLE = {"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7, "xtick.labelsize": 7,
         "ytick.labelsize": 7, "figure.titlesize": 8, "lines.linewidth": 1.0, "pdf.fonttype": 42, "ps.fonttype": 42,
         "svg.fonttype": "none"}
PROPER_SHADE = "#2ca02c"
CHAR_WIDTH = 0.6  # a character of DejaVu Sans, in ems at most (on average less): how long a caption line may be


def _pyplot():
  """matplotlib's pyplot, writing files only (no display on training machines)."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  plt.rcParams.update(STYLE)
  return plt


def define_flags() -> None:
  """Define the command-line flags (only when run as a program, so importing this module defines none)."""
  with options.flag_heading("figures"):
    flags.DEFINE_string("out", "figs", "folder for the figures (created if missing)")
    flags.DEFINE_enum("format", "png", FORMATS, "file format: png (at 200 dpi), or pdf or svg (vector, text as text)")
    flags.DEFINE_multi_string("exclude", [], "leave out the runs this path or shell pattern names (repeatable)")
    flags.DEFINE_bool("landscape_only", False, "draw only the confidence landscape (no run directories needed)")


FLAGS = flags.FLAGS


# ----------------------------------------------------------------------------- figures
def _save(fig, path: pathlib.Path) -> str:
  """Write ``fig`` in the format its suffix names, exactly as wide as drawn (3.5 or 7 in: ``DPI`` x that in pixels).

  ``bbox_inches="tight"`` would crop or widen the page to the ink; only the height is taken from the ink here, so
  the legend and caption below or above the panels are kept and the column width is not.
  """
  from matplotlib.transforms import Bbox

  plt = _pyplot()
  fig.draw_without_rendering()  # lays the figure out, so its ink can be measured
  ink = fig.get_tightbbox(fig.canvas.get_renderer())
  page = Bbox.from_extents(0.0, ink.y0 - 0.02, fig.get_figwidth(), ink.y1 + 0.02)
  drawn = io.BytesIO()  # drawn whole first, then written in one rename: a full disk leaves the old figure
  try:
    fig.savefig(drawn, dpi=DPI, bbox_inches=page, format=path.suffix[1:])
  finally:
    plt.close(fig)
  write_bytes_atomic(path, drawn.getvalue())
  return str(path)


def _legend_below(fig, entries: list[tuple]) -> None:
  """One legend for the figure, under its panels, so it covers no curve however many runs there are; as many
  columns as fit the figure's width, and long labels wrapped onto more lines rather than widening the figure.
  """
  if not entries:
    return
  handles, labels = zip(*entries)
  renderer, width = fig.canvas.get_renderer(), fig.get_figwidth() * fig.dpi
  most = min(len(labels), 2 if fig.get_figwidth() <= COLUMN else 4)
  longest = max(len(line) for label in labels for line in label.splitlines())
  tries = [(ncol, longest) for ncol in range(most, 0, -1)] + [(1, chars) for chars in range(longest - 4, 7, -4)]
  for ncol, chars in tries:
    legend = fig.legend(handles, [wrap(label, chars) for label in labels], loc="upper center",
                        bbox_to_anchor=(0.5, 0.0), ncol=ncol, frameon=False)
    if legend.get_window_extent(renderer).width <= width or (ncol, chars) == tries[-1]:
      return
    legend.remove()


def _caption(fig, runs) -> None:
  """Say above the panels what the runs are (dataset, way/shot, backbone, seeds per arm), wrapped to the width."""
  chars = int(fig.get_figwidth() * 72 / (STYLE["figure.titlesize"] * CHAR_WIDTH))
  fig.suptitle(wrap(caption(_groups(runs)), chars), color="0.25")


def _groups(runs) -> list[tuple[str, list]]:
  return seed_groups(runs, curve_labels(runs))


def _plot_series(ax, runs, key: str, interval: str | None = None) -> list[tuple]:
  """One line per run; a seed group as its median line with the band of its middle half of seeds. Returns each
  curve's legend entry (its line over its band, a label naming the band).

  ``interval`` names a row field holding a single run's half-width (``val_ci95``), drawn as a band around it.
  """
  entries = []
  groups = _groups(runs)
  for (label, members), style in zip(groups, curve_styles(groups)):
    episodes, median, low, high = median_band(members, key)
    defined = np.isfinite(median)  # null diagnostics are gaps in the record, not zeros
    line, = ax.plot(episodes[defined], median[defined], marker=".", markersize=2, **style)
    if len(members) == 1 and interval is not None:
      half = members[0].values(interval)
      low, high = median - half, median + half
      defined &= np.isfinite(half)
    band = None
    if (len(members) > 1 or interval is not None) and defined.any():
      band = ax.fill_between(episodes[defined], low[defined], high[defined], color=line.get_color(), alpha=0.2,
                             linewidth=0)
    entries.append((line if band is None else (band, line), legend_label(label, len(members), band is not None)))
  return entries


def _plot_curves(runs, key: str, path: pathlib.Path, ylabel: str, title: str, interval: str | None = None) -> str:
  """One measure against the runs' checkpoints (episodes, or epochs), every run (or fold model) on one axis."""
  fig, ax = _pyplot().subplots(figsize=(COLUMN, 2.6), constrained_layout=True)
  entries = _plot_series(ax, runs, key, interval=interval)
  ax.set(xlabel=f"{runs[0].axis}s", ylabel=ylabel, title=title)
  ax.xaxis.get_major_locator().set_params(integer=True)  # checkpoints are whole episodes or epochs
  ax.grid(alpha=0.3)
  _caption(fig, runs)
  _legend_below(fig, entries)
  return _save(fig, path)


def plot_val_accuracy(runs, out: pathlib.Path, fmt: str = "png") -> str:
  return _plot_curves(runs, "val_accuracy", out / f"val_accuracy.{fmt}", "validation accuracy (%)",
                      "Validation accuracy", interval="val_ci95")


def plot_retrieval(runs, out: pathlib.Path, fmt: str = "png") -> tuple[list[str], None]:
  """Metric-learning runs' figures (:data:`fewshot.analysis.retrieval_figures.FIGURES`), a curve per fold model
  (their row's ``figures``), and no warning: every run records every curve.
  """
  curves = retrieval_figures.curves(runs)
  return [_plot_curves(curves, f.key, out / f"{f.name}.{fmt}", f.ylabel, f.title)
          for f in retrieval_figures.FIGURES], None


def _shade_properly_learned(ax, measure: str) -> None:
  """The line at 1 and, shaded and labelled, the side where an update counts as properly learned."""
  low, high = ax.get_ylim()
  low, high = min(low, 0.98), max(high, 1.02)  # 1 always in view
  ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
  above = PROPERLY_LEARNED[measure] == ">1"
  ax.axhspan(*((1.0, high) if above else (low, 1.0)), color=PROPER_SHADE, alpha=0.08, linewidth=0)
  ax.text(0.98, 0.96 if above else 0.04, f"properly learned ({PROPERLY_LEARNED[measure]})", transform=ax.transAxes,
          ha="right", va="top" if above else "bottom", fontsize=6.5, color=PROPER_SHADE)
  ax.set_ylim(low, high)


def _plot_ratios(runs, measures, path: pathlib.Path, width: float) -> str:
  fig, axes = _pyplot().subplots(1, len(measures), figsize=(width, 2.4), squeeze=False, constrained_layout=True)
  for ax, measure in zip(axes[0], measures):
    entries = _plot_series(ax, runs, measure)
    title = LABELS[measure]
    if BY_NAME[measure].properly_learned:
      _shade_properly_learned(ax, measure)
    else:  # the norm ratio has no properly learned side; its scale, zoomed to the data, is in the title
      title += " (in [0, 1]; 0: the update only rescales)"
    ax.set(xlabel="episodes", ylabel=SYMBOLS[measure], title=title)
    ax.grid(alpha=0.3)
  _caption(fig, runs)
  _legend_below(fig, entries)  # every panel draws the same curves: the last one's entries stand for all
  return _save(fig, path)


def plot_norm_ratio(runs, out: pathlib.Path, fmt: str = "png") -> str:
  return _plot_ratios(runs, ("norm_ratio",), out / f"norm_ratio.{fmt}", COLUMN)


def plot_alpha_ratios(runs, out: pathlib.Path, fmt: str = "png") -> str:
  return _plot_ratios(runs, ALPHA_RATIOS, out / f"alpha_ratios.{fmt}", PAGE)


RATIO_FIGURES = ((plot_norm_ratio, ("norm_ratio",), "norm_ratio"), (plot_alpha_ratios, ALPHA_RATIOS, "alpha_ratios"))


def _records(run, measures) -> bool:
  """Whether ``run`` recorded a value of any of ``measures`` (MAML and ANIL record no update diagnostics)."""
  return any(np.isfinite(run.values(m)).any() for m in measures)


def few_shot_figures(runs, out: pathlib.Path, fmt: str = "png") -> tuple[list[str], str | None]:
  """The few-shot figures' files, each diagnostic figure of the runs that record its measures only, and a warning
  line naming the runs (or figures) left out, or None.
  """
  written, left = [plot_val_accuracy(runs, out, fmt)], []
  for draw, measures, name in RATIO_FIGURES:
    recorded = [run for run in runs if _records(run, measures)]
    if len(recorded) < len(runs):
      missing = [run.path for run in runs if run not in recorded]
      left.append(f"{name}.{fmt} " + (f"leaves out {', '.join(missing)}" if recorded else "is not drawn"))
    if recorded:
      written.append(draw(recorded, out, fmt))
  if not left:
    return written, None
  return written, (f"warning: {'; '.join(left)}: no update diagnostics recorded (MAML and ANIL record none; "
                   "a run from before they existed neither).")


def plot_confidence_landscape(out: pathlib.Path, prototypes=PROTOTYPES, extent: float = EXTENT,
                              fmt: str = "png") -> str:
  fig, axes = _pyplot().subplots(1, 2, figsize=(PAGE, 3.0), constrained_layout=True)
  protos = np.asarray(prototypes)
  titles = {"softmax": r"softmax: $p_c \propto e^{-d_c^2}$",
            "dr": r"distance ratio: $p_c \propto d_c^{-\theta}$, $\theta=e^2$"}
  for ax, head in zip(axes, ("softmax", "dr")):
    # Both maps share one colour scale, from chance (1/k) to certainty, so they can be compared.
    image = ax.imshow(confidence_landscape(prototypes, head, extent), origin="lower", cmap="viridis",
                      extent=(-extent, extent, -extent, extent), vmin=1.0 / len(protos), vmax=1.0)
    ax.scatter(protos[:, 0], protos[:, 1], marker="*", s=160, c="red", edgecolors="white", label="prototypes")
    ax.set(title=titles[head], xlabel="$z_1$", ylabel="$z_2$")
  axes[0].legend(loc="lower left")
  fig.colorbar(image, ax=axes, label="largest class probability", shrink=0.9)
  return _save(fig, out / f"confidence_landscape.{fmt}")


def plot(paths: list[str], out: str, landscape_only: bool = False, fmt: str = "png",
         exclude: tuple[str, ...] = ()) -> tuple[list[str], str | None]:
  """Write the figures as ``fmt`` files (png, pdf or svg) of the runs the paths name (run directories, or folders of
  them at any depth, by ``analyze``'s rule: :func:`fewshot.records.reading.expand`); return the figures' paths and
  the warnings (runs left out, runs of other protocols), or None.
  """
  if fmt not in FORMATS:
    raise ConfigError(f"--format {fmt} is not one of {', '.join(FORMATS)}; choose one of them.")
  if not paths and not landscape_only:
    raise ConfigError("pass at least one run directory (python -m fewshot.plot runs/A runs/B) or --landscape_only.")
  if paths and landscape_only:
    raise ConfigError("--landscape_only draws the heads' illustration, not runs; drop the run paths, or the flag for "
                      "the runs' figures.")
  found, _, left_out = ([], False, None) if landscape_only else expand(paths, exclude)
  kind = one_kind(found)
  runs = kinds.read_runs_of(found, kind)
  out_dir = pathlib.Path(out)
  if out_dir.exists() and not out_dir.is_dir():
    raise OutputError(f"--out {out} is a file; pass a folder for the figures.")
  check_writable(out_dir, "--out")
  make_dirs(out_dir)
  if landscape_only:
    return [plot_confidence_landscape(out_dir, fmt=fmt)], None
  written, undrawn = kinds.resolve(kind, "figures")(runs, out_dir, fmt)
  warnings = [w for w in (left_out, protocol_warning(runs) if len(runs) > 1 else None, undrawn) if w]
  return written, "\n".join(warnings) or None


def main(argv):
  logging.set_verbosity(logging.WARNING)  # jax's INFO line about absent TPUs is noise here
  written, warning = plot(argv[1:], FLAGS.out, FLAGS.landscape_only, FLAGS.format, tuple(FLAGS.exclude))
  if warning:
    print(warning, file=sys.stderr)
  for path in written:
    print(path)


if __name__ == "__main__":
  define_flags()
  runner.run(main, takes_paths=True)
