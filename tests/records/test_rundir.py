"""Run records: checkpoints of the shared TrainState, and those of runs saved before it (steps as 'episode')."""

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from fewshot.backbones import Conv4
from fewshot.episodic import learning
from fewshot.episodic.episodes import EpisodeShape
from fewshot.episodic.learning import EpisodicLearner
from fewshot.records.rundir import RunDir


def _state(seed):
  learner = EpisodicLearner(Conv4(features=4), EpisodeShape(2, 1, 1))
  return learning.init_state(learner, jax.random.key(seed), (28, 28, 1))


def _assert_same(a, b):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_a_checkpoint_saved_before_the_shared_state_resumes_into_it(tmp_path):
  saved = _state(0).replace(step=jnp.int32(20))
  # What a few-shot run wrote before the shared TrainState: the same tree, its step named "episode".
  old = {"episode": saved.step, "params": saved.params, "batch_stats": saved.batch_stats,
         "opt_state": saved.opt_state}
  options = ocp.CheckpointManagerOptions(max_to_keep=1, enable_async_checkpointing=False, create=True)
  with ocp.CheckpointManager(tmp_path / "checkpoints" / "last", options=options) as manager:
    manager.save(20, args=ocp.args.StandardSave(old))
    manager.wait_until_finished()
  rundir = RunDir(tmp_path)
  rundir.write_metrics([{"episode": 10}, {"episode": 20}, {"episode": 30}])  # 30: written before a crash
  state, rows = rundir.resume(_state(1), "episode")
  assert int(state.step) == 20 and [r["episode"] for r in rows] == [10, 20]
  _assert_same(state, saved)


def test_the_shared_state_round_trips_and_replaces_a_replayed_checkpoint(tmp_path):
  rundir, saved = RunDir(tmp_path), _state(0).replace(step=jnp.int32(7))
  rundir.save_checkpoint("best", 7, _state(2))
  rundir.save_checkpoint("best", 7, saved)  # a resumed run replaying step 7 saves it again
  assert rundir.checkpoint_step("best") == 7
  _assert_same(rundir.restore_checkpoint("best", _state(1)), saved)
