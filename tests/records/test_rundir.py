"""Run records: checkpoints of the shared TrainState, and those of runs saved before it (steps as 'episode')."""

import errno

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from fewshot.backbones import Conv4
from fewshot.episodic import learning
from fewshot.episodic.episodes import EpisodeShape
from fewshot.episodic.learning import EpisodicLearner
from fewshot.errors import OutputError, RunDirError
from fewshot.records import checkpoints as checkpoints_module
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
  rundir.checkpoints.save("best", 7, _state(2))
  rundir.checkpoints.save("best", 7, saved)  # a resumed run replaying step 7 saves it again
  assert rundir.checkpoints.step("best") == 7
  _assert_same(rundir.checkpoints.restore("best", _state(1)), saved)


@pytest.mark.parametrize("vanished", [
    lambda where: FileNotFoundError(2, "No such file or directory", str(where / "default")),
    # orbax's own words for a step folder gone before its metadata is read (issue 42, item 8: 1 call in 38)
    lambda where: ValueError(f"Checkpoint directory does not exist: {where / 'default'}."),
])
def test_a_checkpoint_replaced_while_it_is_read_is_read_again_not_called_damaged(tmp_path, monkeypatch, vanished):
  """evaluate on a run still training said, in 2 of 10 calls, that its checkpoint "is damaged" (issue 29, case 5)."""
  rundir, newer = RunDir(tmp_path), _state(3).replace(step=jnp.int32(4))
  rundir.checkpoints.save("best", 2, _state(0).replace(step=jnp.int32(2)))
  checkpoints, read = rundir.checkpoints, checkpoints_module._restore_orbax

  def replaced_while_read(manager, where, step, like):
    if step == 2:  # the training saves best 4, which deletes best 2, as this read goes on
      checkpoints.save("best", 4, newer)
      raise vanished(where)
    return read(manager, where, step, like)

  monkeypatch.setattr(checkpoints_module, "_restore_orbax", replaced_while_read)
  _assert_same(checkpoints.restore("best", _state(1)), newer)
  rundir.checkpoints.save("best", 2, _state(0).replace(step=jnp.int32(2)))  # a read of that very step says so
  with pytest.raises(RunDirError, match=r"best/2 was replaced while it was read \(the run is still training\): "
                                        "read best step 4 instead"):
    checkpoints.restore("best", _state(1), step=2)


def test_a_full_disk_during_a_save_is_one_line_naming_the_folder_and_the_space(tmp_path, monkeypatch):
  """It was a 260-line traceback (issue 29, case 8); the checkpoint before it stays whole."""
  rundir, state = RunDir(tmp_path), _state(0)
  rundir.checkpoints.save("last", 2, state)

  def full(*args, **kwargs):
    raise ValueError("orbax: the save failed") from OSError(errno.ENOSPC, "No space left on device")

  monkeypatch.setattr(ocp.CheckpointManager, "save", full)
  with pytest.raises(OutputError, match=rf"no space left on the disk to write {tmp_path}/checkpoints/last/4 \(it "
                                        r"needs about \d+\.\d MiB; \d+\.\d MiB free there\): free some space, then "
                                        "run the same command with --resume") as info:
    rundir.checkpoints.save("last", 4, state)
  assert "\n" not in str(info.value) and rundir.checkpoints.steps("last") == [2]
