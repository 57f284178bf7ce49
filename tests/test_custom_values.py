"""Heads and backbones passed as values from Python: trained, recorded, loaded, analysed; bad ones refused first."""

import contextlib
import dataclasses
import io
import json
import math
import shutil

import flax.linen as nn
import jax.numpy as jnp
import numpy as np
import pytest

import fewshot
from fewshot import analyze, heads
from fewshot.config import Config
from fewshot.episodic.episodes import EpisodeShape
from fewshot.episodic.learners import with_values
from fewshot.episodic.learning import EpisodicLearner, check_shapes
from fewshot.errors import ConfigError
from fewshot.train import train

TINY = dict(episodes=2, eval_every=1, val_episodes=1, test_episodes=2)


@dataclasses.dataclass(frozen=True)
class ScaledDot(heads.Head):
  """Logits s * <query, prototype>: no class distance, so no psi."""

  name = "scaled_dot"
  scale: float = 0.1

  def init(self, key):
    return {"log_s": jnp.zeros(())}

  def logits(self, params, support, support_labels, query, way):
    return self.scale * jnp.exp(params["log_s"]) * query @ heads.prototypes(support, support_labels, way).T


class Flat(nn.Module):
  """A linear map of the flattened image: no BatchNorm, no `train` argument."""

  features: int = 16

  @nn.compact
  def __call__(self, x):
    return nn.Dense(self.features)(x.reshape(x.shape[0], -1))


@pytest.fixture(scope="module")
def custom_run(tmp_path_factory):
  workdir, stderr = tmp_path_factory.mktemp("custom") / "run", io.StringIO()
  with contextlib.redirect_stderr(stderr):
    results = train(Config(**TINY), str(workdir), progress=False, head=ScaledDot(), backbone=Flat())
  return workdir, results, stderr.getvalue()


def test_a_custom_head_and_backbone_train_and_are_recorded_by_name(custom_run):
  workdir, results, stderr = custom_run
  config = json.loads((workdir / "config.json").read_text())
  assert (config["head"], config["backbone"]) == ("custom:scaled_dot", "custom:Flat")
  assert config["computation"] == {}  # a backbone of one's own computes as it says: no --conv form to record
  assert results["model"] == "scaled_dot" and 0.0 <= results["test_accuracy"] <= 100.0
  # Strict JSON: the diagnostics that need a class distance are null, never NaN; the others are numbers.
  rows = [json.loads(line, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
          for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  assert len(rows) == 2
  for row in rows:
    assert all(row[k] is None for k in ("psi_con", "psi_div", "con_alpha", "div_alpha", "con_div", "theta"))
    assert math.isfinite(row["alpha"]) and math.isfinite(row["norm_ratio"])
  lines = [line for line in stderr.splitlines() if "class_distances" in line]
  assert len(lines) == 1 and "scaled_dot" in lines[0] and "null" in lines[0]


def test_a_custom_run_loads_with_its_values_and_refuses_without(custom_run):
  workdir = custom_run[0]
  with pytest.raises(ConfigError, match=r"--head custom:scaled_dot names a head passed as a value from Python.*head=") as info:
    fewshot.load(str(workdir), backbone=Flat())
  assert "\n" not in str(info.value)
  with pytest.raises(ConfigError, match="backbone custom:Flat"):
    fewshot.load(str(workdir), head=ScaledDot())
  with pytest.raises(ConfigError, match="--head is custom:scaled_dot, but the head passed records as dr"):
    fewshot.load(str(workdir), head="dr", backbone=Flat())
  model = fewshot.load(str(workdir), head=ScaledDot(), backbone=Flat())
  assert model.theta is None and set(model.variables["params"]) == {"backbone", "log_s"}
  images = np.zeros((6, 28, 28, 1), np.uint8)
  p = model.probabilities(images[:3], np.arange(3), images[3:])
  assert p.shape == (3, 3)
  # Another head on the same embeddings: its initial parameters (the run trained none of them).
  assert model.probabilities(images[:3], np.arange(3), images[3:], head="dr", distance="cosine").shape == (3, 3)


def test_a_custom_run_is_analysed_without_its_values(custom_run, tmp_path):
  workdir = str(custom_run[0])
  # A second run: its copy under another seed (a run named twice, or its exact copy, is refused).
  copy = shutil.copytree(workdir, tmp_path / "copy")
  record = json.loads((copy / "config.json").read_text())
  (copy / "config.json").write_text(json.dumps({**record, "seed": record["seed"] + 1}))
  text, _ = analyze.analyze([workdir, str(copy)])
  assert "scaled_dot" in text and "custom:Flat" in text


def test_a_distance_head_value_is_recorded_by_the_papers_names():
  config = with_values(Config(), head=heads.DistanceHead("dr", "nn", "angular"))
  assert (config.head, config.classifier, config.distance, config.model_name) == ("dr", "nn", "angular",
                                                                                   "1-NN_DR_angular")


def test_the_command_line_cannot_name_a_value(tmp_path):
  with pytest.raises(ConfigError, match=r"--head custom:cos names a head passed as a value from Python"):
    train(Config(head="custom:cos", **TINY), str(tmp_path / "run"), progress=False)
  assert not (tmp_path / "run").exists()


# ----------------------------------------------------------------------------- bad values, refused before training
@dataclasses.dataclass(frozen=True)
class FlatLogits(ScaledDot):
  name = "flat_logits"

  def logits(self, params, support, support_labels, query, way):
    return super().logits(params, support, support_labels, query, way).sum(axis=1)  # [n_query], not [n_query, way]


class Unpooled(nn.Module):
  @nn.compact
  def __call__(self, x, train: bool = True):
    return nn.Conv(4, (3, 3))(x)  # [n, H, W, 4]: not flattened


@dataclasses.dataclass  # eq without frozen: __hash__ is None
class Unfrozen(heads.Head):
  name = "unfrozen"
  scale: float = 0.1

  def logits(self, params, support, support_labels, query, way):
    return jnp.zeros((query.shape[0], way))


class NoMethods:
  name = "no_methods"


@pytest.mark.parametrize("values,fragments", [
    (dict(head=FlatLogits()), ("head FlatLogits(scale=0.1)'s logits returned shape (80,)", "(80, 5)")),
    (dict(backbone=Unpooled()), ("backbone Unpooled returned shape (2, 28, 28, 4)", "[n, D]")),
    (dict(head=Unfrozen()), ("head Unfrozen(scale=0.1) is not hashable", "frozen dataclass")),
    (dict(head=object()), ("a head passed from Python needs a name", "got None")),
    (dict(head=NoMethods()), ("has no init method",)),
    (dict(backbone=np.eye(3)), ("backbone must be a flax.linen module", "ndarray")),
])
def test_bad_values_are_one_line_errors_before_anything_is_written(tmp_path, values, fragments):
  with pytest.raises(ConfigError) as info:
    train(Config(**TINY), str(tmp_path / "run"), progress=False, **values)
  message = str(info.value)
  assert "\n" not in message
  for fragment in fragments:
    assert fragment in message
  assert not (tmp_path / "run").exists()


def test_class_distances_of_the_wrong_shape_are_refused():
  @dataclasses.dataclass(frozen=True)
  class Transposed(ScaledDot):
    name = "transposed"

    def class_distances(self, support, support_labels, query, way):
      return -self.logits({"log_s": 0.0}, support, support_labels, query, way).T

  learner = EpisodicLearner(Flat(), EpisodeShape(3, 1, 2), head=Transposed())
  with pytest.raises(ConfigError, match=r"class_distances returned shape \(3, 6\).*\(6, 3\)"):
    check_shapes(learner, (28, 28, 1))
