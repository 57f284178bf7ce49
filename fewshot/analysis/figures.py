"""What a figure of runs says in words: its curves' labels, its seed groups and their bands, its caption.

:mod:`fewshot.plot` draws with these; they are text and numbers only (no matplotlib), so the rules for what a
figure names can be tested, and reused by other figures (``projects/dr_ratio/dr_results.py``), without drawing.

* :func:`seed_groups`: runs of one configuration but for the seed, together;
* :func:`median_band`: a seed group's median and 25th/75th percentiles at each checkpoint;
* :func:`curve_labels`: the model name (a metric-learning run's loss) plus the options in which the runs differ,
  its fold model among them (not the directory name);
* :func:`legend_label`: a curve's label naming its band (a single run's 95% interval, a seed group's 25–75%);
* :func:`caption`: dataset, way/shot (a metric-learning run's embedding and fold models), backbone and seeds per
  arm, or which of them the runs differ in;
* :func:`curve_styles`: each curve's colour by its model (the paper's four always the same), its line style by
  which of that model's curves it is, whatever order the runs came in.
"""

from __future__ import annotations

import re
import textwrap
import warnings

import numpy as np

from fewshot.choices import MODEL_NAMES, display_name
from fewshot.options import LOCATION_FIELDS
from fewshot.records.run_kinds import KINDS, run_kind

# Options a run's model name already spells (choices.model_name, DMLConfig.model_name), and those that never tell
# arms apart.
MODEL_FIELDS = ("head", "classifier", "distance", "loss", "miner")
NOT_AN_ARM = ("seed", *LOCATION_FIELDS)
# What a caption names: the protocol's options, and the validation way, since the curves are of validation episodes.
CAPTION_OPTIONS = (*KINDS["fewshot"].protocol, "test_way")
INTERVAL_BAND, SEEDS_BAND = "95% interval", "seeds' 25–75%"
# matplotlib's default colour cycle by name: the paper's four models keep theirs in every figure.
MODEL_COLOURS = {name: f"C{k}" for k, name in enumerate(MODEL_NAMES.values())}
LINE_STYLES = ("-", "--", ":", "-.")


def _options(run) -> dict:
  """What tells a curve's runs from another's: their options but the seed, and a metric-learning run's fold model."""
  fold = {} if getattr(run, "fold", None) is None else {"fold": run.fold}
  return {**{k: v for k, v in run.config.to_dict().items() if k not in NOT_AN_ARM}, **fold}


def seed_groups(runs, labels) -> list[tuple[str, list]]:
  """Runs of one configuration but for the seed, together (in first-seen order), with their first run's label."""
  grouped: dict = {}
  for run, label in zip(runs, labels):
    key = tuple(sorted((k, str(v)) for k, v in _options(run).items()))
    grouped.setdefault(key, (label, []))[1].append(run)
  return list(grouped.values())


def median_band(runs, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
  """Checkpoints, and the median and 25th/75th percentiles across the runs at each (undefined values ignored)."""
  series = [run.series(key) for run in runs]
  episodes = np.array(sorted(set().union(*(set(e.tolist()) for e, _ in series))))
  table = np.full((len(series), len(episodes)), np.nan)
  for i, (e, v) in enumerate(series):
    table[i, np.searchsorted(episodes, e)] = v
  with np.errstate(all="ignore"), warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)  # a checkpoint no run defined is a gap, not an error
    low, median, high = np.nanpercentile(table, [25, 50, 75], axis=0)
  return episodes, median, low, high


def curve_labels(runs) -> list[str]:
  """Each run's model name plus the options, beside the seed, in which the runs differ (``ProtoNet_DR,
  learning_rate=0.0005``): what tells the curves apart, where a directory name would only be long. Runs whose
  labels agree differ in the seed alone, and :func:`seed_groups` draws them as one curve.
  """
  options = [_options(run) for run in runs]
  keys = list(dict.fromkeys(k for o in options for k in o))  # one configuration type's fields, in their order
  differ = [k for k in keys if k not in MODEL_FIELDS and len({str(o.get(k)) for o in options}) > 1]
  return [", ".join([run.config.model_name, *(f"{k}={o[k]}" for k in differ if k in o)])
          for run, o in zip(runs, options)]


def legend_label(label: str, seeds: int, band: bool) -> str:
  """A curve's legend label, naming what its band is: a single run's 95% interval or its seeds' middle half."""
  if seeds > 1:
    return f"{label}, {seeds} seeds (median; band: {SEEDS_BAND})"
  return f"{label} (band: {INTERVAL_BAND})" if band else label


def caption(groups) -> str:
  """What the runs of a figure are, in one line: ``omniglot, 5-way 1-shot, conv4, 5 seeds per arm`` (metric-learning
  runs: ``strokes, conv4, 128-d embedding, 4 fold models, 3 seeds per arm``); an option the runs differ in is named
  instead of its value (``...; runs differ in dataset``).
  """
  configs = [members[0].config for _, members in groups]
  c = configs[0]
  named, described = CAPTIONS[run_kind(c.to_dict())]
  same = {name: len({str(getattr(c, name)) for c in configs}) == 1 for name in named}
  parts = ([c.dataset] if same["dataset"] else []) + described(configs, same)
  seeds = sorted({len(members) for _, members in groups})
  count = str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]}–{seeds[-1]}"
  parts.append(f"{count} seed{'s' if seeds[-1] > 1 else ''} per arm")
  differ = [name for name, agree in same.items() if not agree]
  return ", ".join(parts) + (f"; runs differ in {', '.join(differ)}" if differ else "")


def _retrieval_parts(configs, same: dict[str, bool]) -> list[str]:
  """A metric-learning caption after its dataset: the backbone, the embedding's size, the fold models."""
  c = configs[0]
  parts = [display_name(c.backbone)] * same["backbone"] + [f"{c.embedding_dim}-d embedding"] * same["embedding_dim"]
  return parts + [f"{c.folds} fold models"] * (same["folds"] and c.folds > 1)


def _few_shot_parts(configs, same: dict[str, bool]) -> list[str]:
  """A few-shot caption after its dataset: the episode shape, the backbone."""
  return _episode_parts(configs, same) + [display_name(configs[0].backbone)] * same["backbone"]


def _episode_parts(configs, same: dict[str, bool]) -> list[str]:
  """A few-shot caption's episode shape (``5-way 1-shot``), the validation way where it is not the training way."""
  same["test_way"] |= all(c.test_way == c.way for c in configs)  # the default: "way" says it already
  c = configs[0]
  episode = " ".join([f"{c.way}-way"] * same["way"] + [f"{c.shot}-shot"] * same["shot"])
  if not episode:
    return []
  validated = same["way"] and same["test_way"] and c.test_way != c.way  # the curves are of validation episodes
  return [episode + (f" (validated {c.test_way}-way)" if validated else "")]


def wrap(text: str, width: int) -> str:
  """``text`` broken at spaces (or inside a word longer than ``width``) into lines of at most ``width`` characters."""
  return "\n".join(textwrap.wrap(text, max(width, 8), break_on_hyphens=False)) or text


def curve_styles(groups: list[tuple[str, list]]) -> list[dict]:
  """``color`` and ``linestyle`` of each curve of :func:`seed_groups`: the colour its model's (the paper's four
  fixed, other models the next colours in name order), the line style its place among that model's curves in
  label order, so that the same runs look the same in any order and in every figure. Curves of fold models (of
  metric-learning runs) take a colour per run's configuration (in label order) and a line style per fold model.

  >>> from types import SimpleNamespace as S
  >>> run = lambda model: S(config=S(model_name=model))
  >>> curve_styles([("b", [run("ProtoNet_DR")]), ("a", [run("ProtoNet_S")]), ("c", [run("ProtoNet_DR")])])
  [{'color': 'C1', 'linestyle': '-'}, {'color': 'C0', 'linestyle': '-'}, {'color': 'C1', 'linestyle': '--'}]
  """
  folds = [getattr(members[0], "fold", None) for _, members in groups]
  if any(fold is not None for fold in folds):  # curve_labels names the fold last: the rest names the run
    runs = [re.sub(r", fold=\d+$", "", label) for label, _ in groups]
    colours = {run: f"C{k % 10}" for k, run in enumerate(sorted(set(runs)))}
    return [{"color": colours[run], "linestyle": LINE_STYLES[(fold or 0) % len(LINE_STYLES)]}
            for run, fold in zip(runs, folds)]
  models = [members[0].config.model_name for _, members in groups]
  others = sorted(set(models) - set(MODEL_COLOURS))
  colours = {**MODEL_COLOURS, **{name: f"C{(len(MODEL_COLOURS) + k) % 10}" for k, name in enumerate(others)}}
  styles = []
  for (label, _), model in zip(groups, models):
    siblings = sorted(lab for (lab, _), m in zip(groups, models) if m == model)
    styles.append({"color": colours[model], "linestyle": LINE_STYLES[siblings.index(label) % len(LINE_STYLES)]})
  return styles


# What a figure's caption names of each kind's runs: the options it checks the runs agree in, and its words after the
# dataset (each kind's own: its row in records.run_kinds.KINDS names what the commands do; this is the figures').
CAPTIONS = {"fewshot": (CAPTION_OPTIONS, _few_shot_parts), "dml": (KINDS["dml"].protocol, _retrieval_parts)}
