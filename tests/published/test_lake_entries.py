"""Lake-style one-shot runs drawn from the evaluation alphabets, and a Lake entry end to end on fixtures (issue 37)."""

import dataclasses
import json
import pathlib

import numpy as np
import pytest

from fewshot import published, reproduce
from fewshot.data import Split
from fewshot.episodic import lake
from fewshot.errors import DataError
from fewshot.published import page, plan
from fewshot.published.registry import Cell, Schedule

from omniglot_fixtures import characters, write_background_zip


def _split(sizes: dict[str, int], drawers: int = 4) -> Split:
  names = [f"{a}/character{c + 1:02d}" for a, n in sizes.items() for c in range(n)]
  images = np.array([[[[10 * k + d]]] for k in range(len(names)) for d in range(drawers)], np.uint8)
  return Split(images, np.repeat(np.arange(len(names), dtype=np.int32), drawers), tuple(names))


def test_drawn_runs_are_one_alphabet_two_drawers_and_labels_that_name_the_support():
  split = _split({"Angelic": 5, "Keble": 3, "Tengwar": 6})
  runs = lake.draw_runs(split, 30, way=4, seed=7)
  assert [r.name for r in runs[:2]] == ["drawn0001", "drawn0002"]
  for run in runs:
    alphabets = {f.split("/")[0] for f in run.class_files + run.item_files}
    assert len(alphabets) == 1 and alphabets <= {"Angelic", "Tengwar"}  # Keble has too few characters
    support_class, support_drawer = run.support[:, 0, 0, 0] // 10, run.support[:, 0, 0, 0] % 10
    query_class, query_drawer = run.queries[:, 0, 0, 0] // 10, run.queries[:, 0, 0, 0] % 10
    assert len(set(support_drawer)) == 1 and len(set(query_drawer)) == 1 and support_drawer[0] != query_drawer[0]
    np.testing.assert_array_equal(support_class[run.labels], query_class)  # a query's label is its support's class
    assert sorted(run.labels.tolist()) == list(range(4))
    assert [f"#drawer{support_drawer[0] + 1:02d}" in f for f in run.class_files] == [True] * 4
  again = lake.draw_runs(split, 30, way=4, seed=7)
  assert all(a.item_files == b.item_files for a, b in zip(runs, again))
  assert any(a.item_files != b.item_files for a, b in zip(runs, lake.draw_runs(split, 30, way=4, seed=8)))
  with pytest.raises(DataError, match="no alphabet of the test split has 7 characters"):
    lake.draw_runs(split, 1, way=7)


@pytest.mark.slow
def test_a_lake_entry_trains_and_scores_drawn_runs_on_fixture_alphabets(tmp_path, monkeypatch):
  chars = characters({"Latin": 6, "Greek": 6, "Angelic": 4, "Keble": 4}, drawers=4)
  background = {a: chars[a] for a in ("Latin", "Greek")}
  write_background_zip(background, tmp_path / "data", "images_background")
  write_background_zip({a: chars[a] for a in ("Angelic", "Keble")}, tmp_path / "data", "images_evaluation")
  base = published.ENTRIES["lake2015_background"]
  test = dict(lake_runs="drawn", runs=5, way=3, seed=0)
  tiny = dataclasses.replace(
      base, name="tiny_lake", heads=("softmax",), models=(dataclasses.replace(base.models[1], options=dict(
          way=3, query=2, episodes=4, eval_every=2)),),
      options={**base.options, "test_way": 3, "test_query": 2, "val_episodes": 2, "test_episodes": 2},
      cells=(Cell("protonet vs people", "protonet", test, 95.5),), schedules=(Schedule("own", {}, "tiny", True),))
  monkeypatch.setitem(published.ENTRIES, tiny.name, tiny)
  text = reproduce.reproduce(tiny.name, (0,), str(tmp_path / "data"), str(tmp_path / "tfds"), str(tmp_path / "runs"))
  workdir = plan.run_dir(str(tmp_path / "runs"), tiny, tiny.schedules[0], tiny.models[0], "softmax", plan.SELECT, 0)
  scored = json.loads(open(f"{workdir}/{plan.drawn_runs_name(test)}").read())
  assert scored["runs"] == 5 and scored["items"] == 15 and scored["drawn"] == test
  assert "protonet vs people: published 95.50" in text
  assert f"{scored['rules']['head']['accuracy']:.2f}" in text
  # The page keeps the drawn runs' scores with the run's records and reads them back.
  page.keep(str(tmp_path / "runs"), str(tmp_path / "kept"))
  assert (tmp_path / "kept" / pathlib.Path(workdir).relative_to(tmp_path / "runs") / plan.drawn_runs_name(test)).exists()
  assert f"| {scored['rules']['head']['accuracy']:.2f} (1 seeds" in page.build(str(tmp_path / "kept"), [tiny])
