"""Lake et al.'s one-shot classification runs (the Omniglot repository's ``all_runs``): reading and scoring.

Here a *run* is one of Lake's episodes, never a training run (docs/architecture.md, "Words": Lake's runs); the
trained run scored is a *model* (:func:`fewshot.load`).

    import fewshot
    from fewshot.episodic import lake
    results = lake.score_runs(fewshot.load("runs/omniglot_conv4_ProtoNet_DR_5w1s_seed0"), "all_runs.zip")

The release is a folder (or ``all_runs.zip``) of ``run01`` ... ``run20``; each run holds
``training/class01.png`` ... (one drawing per class: the support), ``test/item01.png`` ...
(the queries) and ``class_labels.txt``, whose lines ``run01/test/item01.png
run01/training/class05.png`` give each item's class. Every run is one 20-way one-shot
episode over characters of one evaluation alphabet (Lake et al., Science 2015). Images go
through the Omniglot training data's decoder (:func:`fewshot.data.omniglot.decode`) at the
model's ``image_size``, so a model sees them exactly as it saw its training characters.

Each run is scored under the model's own head (classifier and formulation, trained θ) and
under the plain 1-NN rule (nearest support embedding); with one image per class the two
agree up to ties, since every head is decreasing in the distance to the single support image.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from fewshot import distances, heads, method_rows
from fewshot.analysis import stats
from fewshot.data import archives
from fewshot.data.catalog import SMALL_IMAGE_SIZE
from fewshot.data.omniglot import decode
from fewshot.episodic import learning
from fewshot.errors import ConfigError, DataError
from fewshot.training import split_embedding

LABELS = "class_labels.txt"
_RUN = re.compile(r"run(\d+)")
# A label file names images relative to the folder of the runs ("run01/test/item01.png") or to the run's own.
_IMAGE = re.compile(r"(?:(run\d+)/)?(test|training)/([^/\\]+)")
_FIX = "pass Lake's all_runs folder or all_runs.zip as released (re-extract it)"


@dataclasses.dataclass(frozen=True)
class LakeRun:
  """One run, decoded: support image ``c`` is class ``c``; ``labels[i]`` is the class of query ``i``."""

  name: str  # "run01"
  class_files: tuple[str, ...]  # "run01/training/class01.png", ..., in name order
  item_files: tuple[str, ...]  # "run01/test/item01.png", ..., in the label file's order
  support: np.ndarray  # uint8 [way, size, size, 1] (28 unless read for a larger model)
  queries: np.ndarray  # uint8 [items, size, size, 1]
  labels: np.ndarray  # int32 [items]

  @property
  def way(self) -> int:
    return len(self.class_files)


# ---- reading --------------------------------------------------------------------------------------------------------
# Where Lake's file lies in an Omniglot folder: the Omniglot repository's own folder name, or beside the zips.
OFFICIAL_PLACES = ("one-shot-classification/all_runs.zip", "one-shot-classification/all_runs", "all_runs.zip",
                   "all_runs")


def official_runs(data_dir: str | None) -> pathlib.Path | None:
  """Lake's ``all_runs.zip`` (or its folder) in an Omniglot data folder, at one of :data:`OFFICIAL_PLACES`; None
  where it is not there.
  """
  if not data_dir:
    return None
  root = pathlib.Path(data_dir).expanduser()
  return next((root / place for place in OFFICIAL_PLACES if (root / place).exists()), None)


def _open(path: pathlib.Path) -> archives.FileTree:
  """The files of a folder or a zip (told by its content), as one tree: posix names relative to it."""
  if path.is_dir():
    return archives.open_folder(path)
  if archives.is_zip(path):
    return archives.open_archive(path)
  what = "not a readable zip (truncated?)" if path.suffix.lower() == ".zip" else "neither a folder nor a zip"
  raise DataError(f"Lake's runs {path} is {what}; {_FIX}.")


def _visible(name: str) -> bool:
  return not any(part.startswith(".") or part == "__MACOSX" for part in name.split("/"))


def _root(names: list[str], path: pathlib.Path) -> str:
  """The prefix of the folder holding the runs: the shallowest one with a ``runNN/class_labels.txt``."""
  prefixes = {name[: -len(f"{parts[-2]}/{LABELS}")] for name in names
              if len(parts := name.split("/")) >= 2 and parts[-1] == LABELS and _RUN.fullmatch(parts[-2])}
  if not prefixes:
    raise DataError(f"found no runNN/{LABELS} in {path}; {_FIX}.")
  return min(prefixes, key=lambda prefix: (prefix.count("/"), prefix))


def _parse_image(field: str, run: str, folder: str) -> str | None:
  """``run/folder/name`` for a label file's field naming an image of this run's ``folder``, else None."""
  match = _IMAGE.fullmatch(field)
  if match is None or match.group(1) not in (None, run) or match.group(2) != folder or match.group(3) in (".", ".."):
    return None
  return f"{run}/{folder}/{match.group(3)}"


def _pngs(names: set[str], prefix: str, folder: str) -> list[str]:
  """The ``*.png`` directly in ``folder`` (relative to the runs' folder), sorted."""
  inside = [name[len(prefix):] for name in names if name.startswith(f"{prefix}{folder}/")]
  return sorted(name for name in inside if "/" not in name[len(folder) + 1:] and name.lower().endswith(".png"))


def _read_run(tree: archives.FileTree, run: str, prefix: str, names: set[str], size: int, resize: str) -> LakeRun:
  read, where = tree.read, tree.where
  label_name = f"{prefix}{run}/{LABELS}"
  if label_name not in names:
    raise DataError(f"{run} has no {LABELS} ({where(prefix + run)}); {_FIX}.")
  lines = read(label_name).decode("utf-8-sig", errors="replace").splitlines()
  class_files = _pngs(names, prefix, f"{run}/training")
  items, labels = [], []
  for number, line in enumerate(lines, 1):
    if not line.strip():
      continue
    fields = line.split()
    parsed = [_parse_image(f, run, folder) for f, folder in zip(fields, ("test", "training"))]
    if len(fields) != 2 or None in parsed:
      raise DataError(f"{where(label_name)} line {number} is not '{run}/test/<item>.png {run}/training/<class>.png' "
                      f"but {line.strip()[:80]!r}; {_FIX}.")
    item, cls = parsed
    for image in (item, cls):
      if prefix + image not in names:
        raise DataError(f"{where(label_name)} line {number} names {image}, which is missing; {_FIX}.")
    if cls not in class_files:
      raise DataError(f"{where(label_name)} line {number} names {cls}, which is not a PNG; {_FIX}.")
    if item in items:
      raise DataError(f"{where(label_name)} line {number} labels {item} a second time; {_FIX}.")
    items.append(item)
    labels.append(class_files.index(cls))
  unlabelled = sorted(set(_pngs(names, prefix, f"{run}/test")) - set(items))
  if not items or unlabelled:
    what = f"has no label for {unlabelled[0]}" if unlabelled else "labels no test item"
    raise DataError(f"{where(label_name)} {what}; {_FIX}.")
  decoded = lambda files: np.stack([decode(read(prefix + name), where(prefix + name), size, resize) for name in files])
  return LakeRun(run, tuple(class_files), tuple(items), decoded(class_files), decoded(items),
                 np.asarray(labels, np.int32))


def read_runs(path: str | os.PathLike, image_size: int = SMALL_IMAGE_SIZE, resize: str = "box") -> list[LakeRun]:
  """Every run of Lake's layout in a folder or zip, decoded at ``image_size`` px as Omniglot's training data is
  (``resize``: the run's ``--resize``); one-line ``DataError`` for anything amiss.

  Any number of runs is accepted, but they must be numbered ``run01`` ... ``runNN`` with none
  missing; every label line must name this run's test item and training image, both present,
  and every test item must be labelled.
  """
  path = pathlib.Path(path).expanduser()
  if not path.exists():
    raise DataError(f"Lake's runs {path} do not exist; {_FIX}.")
  with _open(path) as tree:
    names = [name for name in tree.members() if _visible(name)]
    prefix = _root(names, path)
    runs = {match.group(0): int(match.group(1)) for name in names if name.startswith(prefix)
            and "/" in name[len(prefix):] and (match := _RUN.fullmatch(name[len(prefix):].split("/")[0]))}
    numbers = set(runs.values())
    missing = sorted(set(range(1, max(numbers) + 1)) - numbers)
    if missing:
      where = tree.where(prefix.rstrip("/")) if prefix else path
      raise DataError(f"{where} has runs up to run{max(numbers):02d} but no run{missing[0]:02d}; {_FIX}.")
    return [_read_run(tree, run, prefix, set(names), image_size, resize) for run in sorted(runs, key=runs.get)]


# ---- scoring ----------------------------------------------------------------------------------------------------
def head_predictions(support, queries, *, classifier: str = "proto", head="softmax", rho=heads.RHO_INIT,
                     params: dict | None = None) -> np.ndarray:
  """The class each query gets under a head, support embedding ``c`` being class ``c`` (argmax of the logits);
  ``head`` is a ``--head`` name (with ``classifier`` and ``rho``) or a head value (with its ``params``).

  >>> head_predictions(np.array([[0.0], [1.0]]), np.array([[0.9], [0.2]]), classifier="proto", head="dr").tolist()
  [1, 0]
  """
  way = support.shape[0]
  head = heads.resolve(head, classifier)
  params = {"rho": jnp.asarray(rho)} if params is None else params
  logits = head.logits(params, jnp.asarray(support), jnp.arange(way), jnp.asarray(queries), way)
  return np.asarray(jnp.argmax(logits, axis=-1))


def nearest_neighbour(support, queries) -> np.ndarray:
  """The index of each query's nearest support embedding (Euclidean distance): the 1-NN rule.

  >>> nearest_neighbour(np.array([[0.0, 0.0], [3.0, 4.0]]), np.array([[2.0, 2.0]])).tolist()
  [1]
  """
  return np.asarray(jnp.argmin(distances.squared_euclidean(jnp.asarray(queries), jnp.asarray(support)), axis=-1))


def summarise(correct: Sequence[np.ndarray]) -> dict:
  """Accuracy (%) over all items, and the mean and 95% half-width over runs of the runs' accuracies (%).

  >>> summarise([np.array([True, True]), np.array([True, False])])["accuracy"]
  75.0
  """
  run_accuracies = [100.0 * float(np.mean(c)) for c in correct]
  mean, half_width = stats.mean_confidence_interval(run_accuracies)
  hits, items = sum(int(np.sum(c)) for c in correct), sum(len(c) for c in correct)
  return {"accuracy": 100.0 * hits / items, "correct": hits, "items": items, "run_mean": mean, "run_ci95": half_width}


def check_model(config) -> None:
  """Refuse a model that does not read grayscale characters (Lake's runs decode as Omniglot's training data)."""
  if config.is_image_dataset:
    raise ConfigError(f"Lake's runs are grayscale Omniglot characters; a {config.dataset} run reads "
                      f"{config.image_size}px RGB images. Pass an omniglot or strokes run.")
  method_rows.require(config.method, "distance_head", "Lake's runs are scored by a run's distance head and 1-NN on "
                      "one embedding", "pass a --method protonet run")


def score_runs(model, runs: str | os.PathLike | Sequence[LakeRun]) -> dict:
  """Score a model (:func:`fewshot.load`) on Lake's runs (a folder, a zip, or :func:`read_runs`'s runs).

  Returns the run's head and the 1-NN rule's accuracy over all items, their mean ± 95% interval
  over runs, and a per-run table (``labels`` and predictions are class indices, class ``c`` being
  the run's ``c``-th ``training/*.png`` in name order). Images are embedded as
  :meth:`TrainedModel.embed` embeds them: with the model's ``--test_shifts`` views.
  """
  check_model(model.config)
  source = None
  if isinstance(runs, (str, os.PathLike)):
    source = str(pathlib.Path(runs).expanduser().resolve())
    runs = read_runs(runs, model.config.image_size, model.config.resize)
  return score(model.config, model.learner, model.variables, runs, model.config.test_shifts, source)


def score(config, learner, variables: dict, runs: Sequence[LakeRun], shifts: int = 0,
          source: str | None = None) -> dict:
  """:func:`score_runs` of a learner's ``variables`` on runs already read, each image the mean over its ``shifts``
  translations where > 0 (the ``lake`` evaluator's work, :mod:`fewshot.episodic.evaluators`); ``source`` is
  recorded as where the runs came from.
  """
  check_model(config)
  sides = {run.support.shape[1] for run in runs}
  if sides != {config.image_size}:
    raise ConfigError(f"the runs were read at {', '.join(map(str, sorted(sides)))} px but the model reads "
                      f"{config.image_size} px; read them with read_runs(path, {config.image_size}).")
  # The run's own head (its distance, or a head passed from Python) with its trained parameters.
  head, params = learner.head, learning.head_params(variables["params"])
  # One forward pass over every image: BatchNorm in evaluation mode makes the batch irrelevant.
  images = np.concatenate([images for run in runs for images in (run.support, run.queries)])
  embedded = np.asarray(split_embedding.embed_batch(learning.view_embeddings, (learner, shifts), variables,
                                                    jnp.asarray(images)))
  sizes = [size for run in runs for size in (run.way, len(run.labels))]
  parts = np.split(embedded, np.cumsum(sizes)[:-1])
  per_run, correct = [], {"head": [], "nn": []}
  for run, support, queries in zip(runs, parts[0::2], parts[1::2]):
    predicted = {"head": head_predictions(support, queries, head=head, params=params),
                 "nn": nearest_neighbour(support, queries)}
    row = {"run": run.name, "way": run.way, "items": len(run.labels), "labels": run.labels.tolist()}
    for rule, prediction in predicted.items():
      hits = prediction == run.labels
      correct[rule].append(hits)
      row.update({f"{rule}_correct": int(hits.sum()), f"{rule}_accuracy": 100.0 * float(hits.mean()),
                  f"{rule}_predicted": prediction.tolist()})
    per_run.append(row)
  rules = {"head": {"name": config.model_name, "classifier": config.classifier, "head": config.head,
                    "distance": config.distance, "theta": learning.theta(head, variables["params"]),
                    **summarise(correct["head"])},
           "nn": {"name": "1-NN (Euclidean)", **summarise(correct["nn"])}}
  return {"lake_runs": source, "model": config.model_name, "test_shifts": shifts, "runs": len(runs),
          "items": sum(sizes[1::2]), "rules": rules, "per_run": per_run}


def table(results: dict, per_run: bool = True) -> str:
  """The per-run table (with ``per_run``: 20 lines for the official runs, too many for 400 of his design) and the
  summary lines of :func:`score_runs`'s results (``python -m fewshot.evaluate --lake_runs`` prints them).
  """
  head, nn = results["rules"]["head"], results["rules"]["nn"]
  lines = [f"{'run':<8}{'way':>4}{'items':>6}  {head['name']:>12}  {'1-NN':>8}"] if per_run else []
  for row in results["per_run"] if per_run else ():
    lines.append(f"{row['run']:<8}{row['way']:>4}{row['items']:>6}  {row['head_accuracy']:>11.1f}%  "
                 f"{row['nn_accuracy']:>7.1f}%")
  for rule in (head, nn):
    lines.append(f"{rule['name']}: {rule['accuracy']:.2f}% of {rule['items']} items ({rule['correct']} right); "
                 f"{rule['run_mean']:.2f}% ± {rule['run_ci95']:.2f}% over {results['runs']} runs")
  return "\n".join(lines)
