"""Data-parallel metric learning and retrieval over a sharded gallery, on 4 forced CPU devices."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from devices import FOUR_CPU_DEVICES

_SCRIPT = r"""
import json
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from fewshot import distances
from fewshot.data.split import Split
from fewshot.dml import embedding, knn, metrics
from fewshot.dml.embedding import Embedder, MetricLearner
from fewshot.dml.samplers import BatchShape
from fewshot.backbones import Conv4
from fewshot.training.sources import DeviceSource

assert len(jax.devices()) == 4
mesh = Mesh(np.array(jax.devices()), ("data",))
rng = np.random.default_rng(0)
labels = np.repeat(np.arange(10), 6).astype(np.int32)
split = Split(rng.integers(0, 256, (60, 16, 16, 1), dtype=np.uint8), labels, tuple(str(i) for i in range(10)))
out = {}
for name, sharding in (("one", None), ("data", NamedSharding(mesh, P("data")))):
  learner = MetricLearner(Embedder(Conv4(features=8), embedding_dim=8), BatchShape(4, 2), loss="contrastive",
                          batch_sharding=sharding)
  state = embedding.init_state(learner, jax.random.key(0), (16, 16, 1))
  source = DeviceSource.from_split(split)
  if sharding is not None:
    state = jax.device_put(state, NamedSharding(mesh, P()))
    source = DeviceSource.from_split(split, NamedSharding(mesh, P()))
  z = embedding.embed_split(learner, embedding.model_variables(state), split.images, batch=24)  # the same variables
  state, losses = embedding.train_chunk(learner, state, source, jax.random.key(1), 3)
  out[name] = {"losses": np.asarray(losses).tolist(), "kernel": np.asarray(state.params["model"]["Dense_0"]["kernel"]).ravel().tolist(),
               "embeddings": z.tolist()}

# A gallery with exact duplicates (ties) searched on one device and sharded over four: the same neighbours.
x = rng.normal(size=(203, 5)).astype(np.float32)
x[100:110] = x[:10]
y = rng.integers(0, 20, 203)
for exclude in (False, True):
  one = knn.nearest_neighbours(x, x, 7, exclude_self=exclude)
  four = knn.nearest_neighbours(x, x, 7, exclude_self=exclude, mesh=mesh)
  out[f"knn_{exclude}"] = [float(np.max(np.abs(np.asarray(one[0]) - np.asarray(four[0])))),
                           bool(np.array_equal(np.asarray(one[1]), np.asarray(four[1])))]
m1 = metrics.retrieval_metrics(x, y, x, y, True).as_dict()
m4 = metrics.retrieval_metrics(x, y, x, y, True, mesh=mesh).as_dict()
out["metrics"] = [m1, m4]
print(json.dumps(out))
"""


@pytest.mark.slow  # a subprocess of four CPU devices compiling both programs: fifteen seconds
def test_a_data_parallel_step_and_a_sharded_gallery_equal_one_device():
  env = {**os.environ, "XLA_FLAGS": FOUR_CPU_DEVICES}
  done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env)
  assert done.returncode == 0, done.stderr[-3000:]
  out = json.loads(done.stdout.strip().splitlines()[-1])
  one, data = out["one"], out["data"]
  # The same batches; BatchNorm's statistics and the loss's pairs summed across devices in another order.
  np.testing.assert_allclose(data["losses"], one["losses"], rtol=1e-5)
  np.testing.assert_allclose(data["kernel"], one["kernel"], rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(data["embeddings"], one["embeddings"], rtol=1e-5, atol=1e-6)
  # Sharding the gallery changes nothing but the rounding of the distances (a product over fewer references):
  # neighbours, their tie order and the metrics are exact.
  for exclude in ("False", "True"):
    distance_gap, same_neighbours = out[f"knn_{exclude}"]
    assert same_neighbours and distance_gap < 1e-5
  assert out["metrics"][0] == out["metrics"][1]
