"""python -m fewshot.reproduce end to end on strokes, and its page (issue 37)."""

import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from fewshot import published, reproduce
from fewshot.errors import ConfigError
from fewshot.published import kept, page, plan, report
from fewshot.published.registry import Cell, Entry, Model, Schedule, head_arms

import dataset_fixtures as fixtures

TINY = Entry(
    name="tiny_strokes", source="a test", protocol="Snell et al.'s steps on strokes, tiny", dataset="strokes",
    needs="nothing", options=dict(dataset="strokes", way=3, query=2, test_way=2, test_query=2, test_episodes=3,
                                  eval_every=2, val_episodes=2),
    models=(Model("1-shot", dict(shot=1)),),
    schedules=(Schedule("tiny", dict(episodes=6, patience=1), "six episodes"),),
    cells=(Cell("2-way 1-shot", "1-shot", dict(test_way=2), 60.0), Cell("3-way 1-shot", "1-shot", dict(test_way=3),
                                                                          50.0)),
    differences=("tiny",), arms=head_arms("softmax"), retrain=True)


@pytest.mark.slow  # the command's smoke run (a selection and a final run trained, two cells tested): 31 s
def test_an_entry_trains_selects_retrains_measures_and_resumes_on_strokes(tmp_path, monkeypatch):
  monkeypatch.setitem(published.ENTRIES, TINY.name, TINY)
  out = str(tmp_path / "runs")
  text = reproduce.reproduce(TINY.name, (0,), out=out)
  model, schedule = TINY.models[0], TINY.schedules[0]
  for seed in (0,):
    chosen = json.loads((tmp_path / f"runs/tiny_strokes/tiny/1-shot_softmax/select/seed{seed}/results.json").read_text())
    final = plan.run_dir(out, TINY, schedule, model, "softmax", plan.FINAL, seed)
    config = json.loads(open(f"{final}/config.json").read())
    assert config["train_splits"] == "train+val" and config["episodes"] == chosen["best_episode"]
    assert config["patience"] is None
    own = json.loads(open(f"{final}/results.json").read())
    measured = json.loads(open(plan.cell_record(final, TINY, model, TINY.cells[1])).read())
    assert measured["options"]["test_way"] == 3 and measured["test_episodes"] == 3
    assert plan.cell_values(out, TINY, schedule, TINY.cells[0], "softmax", (0,))[seed] == own["test_accuracy"]
  assert "2-way 1-shot: published 60.00" in text and "not the published schedule: inconclusive at 1 seed" in text
  before = {p: p.stat().st_mtime_ns for p in (tmp_path / "runs").rglob("results.json")}
  assert reproduce.reproduce(TINY.name, (0,), out=out) == text  # all kept: nothing trains again
  assert {p: p.stat().st_mtime_ns for p in (tmp_path / "runs").rglob("results.json")} == before
  records = tmp_path / "kept"
  assert len(kept.keep(out, str(records), published.ENTRIES)) == 2
  assert not list(records.rglob("checkpoints"))
  assert len(kept.keep(out, str(records), published.ENTRIES)) == 2  # again: the same records, nothing replaced
  built = page.build(str(records), [TINY])
  assert built == page.build(str(records), [TINY]) and "| 2-way 1-shot | 60.00 |" in built
  assert report.cell_reports(str(records), TINY, schedule, (0,))[0].by_arm["softmax"].values == tuple(
      plan.cell_values(out, TINY, schedule, TINY.cells[0], "softmax", (0,)).values())
  own = pathlib.Path(plan.run_dir(out, TINY, schedule, model, "softmax", plan.FINAL, 0)) / "results.json"
  own.write_text(own.read_text().replace('"test_accuracy": ', '"test_accuracy": 1'))  # a seed trained again
  with pytest.raises(ConfigError, match="is kept and .* differs from it; a kept record is never replaced"):
    kept.keep(out, str(records), published.ENTRIES)


def _fake_run(root, entry, schedule, model, head, seed, accuracy):
  stage = plan.tested_stage(entry, schedule)
  folder = root / plan.run_dir("", entry, schedule, model, head, stage, seed)
  folder.mkdir(parents=True)
  options = {**kept.expected_options(entry, schedule, model, head, stage), "seed": seed}
  (folder / "config.json").write_text(json.dumps({**options, "provenance": {"backend": "cpu", "started": str(seed)}}))
  (folder / "metrics.jsonl").write_text(json.dumps({"episode": 2, "seconds": 1800.0}) + "\n")
  (folder / "results.json").write_text(json.dumps({"test_accuracy": accuracy, "best_episode": 2}))


def test_the_report_pairs_the_heads_by_seed(tmp_path):
  entry = dataclasses.replace(TINY, arms=head_arms("softmax", "dr"), retrain=False, cells=TINY.cells[:1])
  schedule, model = entry.schedules[0], entry.models[0]
  for seed, (s, d) in enumerate([(90.0, 91.0), (92.0, 92.5), (91.0, 93.0)]):
    _fake_run(tmp_path, entry, schedule, model, "softmax", seed, s)
    _fake_run(tmp_path, entry, schedule, model, "dr", seed, d)
  _fake_run(tmp_path, entry, schedule, model, "dr", 3, 95.0)  # an unpaired seed counts for its head alone
  [cell] = report.cell_reports(str(tmp_path), entry, schedule, (0, 1, 2, 3))
  assert cell.by_arm["dr"].values == (91.0, 92.5, 93.0, 95.0) and len(cell.by_arm["softmax"].values) == 3
  mean, half, p, n = cell.paired
  assert (n, mean, p) == (3, pytest.approx((1.0 + 0.5 + 2.0) / 3), 0.25)
  text = page.build(str(tmp_path), [entry])
  assert "+1.17 ±" in text and "3 pairs, sign-flip p = 0.25, floor 0.25" in text
  assert "3.50 h of training" in text  # seven runs, each its own group (started apart), 1800 s each


def test_a_page_built_while_units_still_train_names_the_seeds_it_lacks_per_arm(tmp_path):
  entry = dataclasses.replace(TINY, arms=head_arms("softmax", "dr"), retrain=False, cells=TINY.cells[:1])
  schedule, model = entry.schedules[0], entry.models[0]
  _fake_run(tmp_path, entry, schedule, model, "softmax", 0, 90.0)
  _fake_run(tmp_path, entry, schedule, model, "dr", 0, 91.0)
  _fake_run(tmp_path, entry, schedule, model, "dr", 1, 92.0)
  assert report.seeds_missing(str(tmp_path), entry, schedule) == {"softmax": [1, 2], "dr": [2]}
  text = page.build(str(tmp_path), [entry])
  assert ("**Not on the page yet** (of the command's seeds 0, 1, 2): ProtoNet_S seeds 1, 2; ProtoNet_DR seed 2; "
          "they join it when their runs finish.") in text
  assert "| ProtoNet_S | 90.00 (1 seed: 90.00) | – | not the published schedule: inconclusive at 1 seed: no interval |" \
      in text
  assert "| 2-way 1-shot | +1.00 (1 pair, sign-flip p = 1, floor 1) |" in text
  _fake_run(tmp_path, entry, schedule, model, "softmax", 1, 90.5)
  _fake_run(tmp_path, entry, schedule, model, "softmax", 2, 90.2)
  _fake_run(tmp_path, entry, schedule, model, "dr", 2, 92.5)
  assert report.seeds_missing(str(tmp_path), entry, schedule) == {}
  assert "Not on the page yet" not in page.build(str(tmp_path), [entry])


def test_bad_names_and_missing_data_are_one_line_refusals(tmp_path):
  with pytest.raises(ConfigError, match="no published entry 'nope'; choose one of snell2017_omniglot"):
    reproduce.reproduce("nope", (0,))
  with pytest.raises(ConfigError, match="has no schedule 'long'; choose one of published, short"):
    reproduce.reproduce("snell2017_omniglot", (0,), schedule="long")
  with pytest.raises(ConfigError, match="has no model '2-shot'"):
    reproduce.reproduce("snell2017_omniglot", (0,), models=["2-shot"])
  with pytest.raises(ConfigError, match="pass --data_dir DIR holding images_background.zip and images_evaluation.zip"):
    reproduce.reproduce("snell2017_omniglot", (0,), out=str(tmp_path))
  with pytest.raises(ConfigError, match="mini-ImageNet's images with Ravi & Larochelle's train.csv"):
    reproduce.reproduce("snell2017_mini_imagenet", (0,), data_dir=str(tmp_path / "absent"), out=str(tmp_path))
  # A published schedule known by name only (figures quoted without their training) is refused before any data.
  with pytest.raises(ConfigError, match="lee2019_fc100's published schedule is not known .*; choose --schedule "
                                        "cpu_10000"):
    reproduce.reproduce("lee2019_fc100", (0,), out=str(tmp_path))
  assert not list(tmp_path.iterdir())
  assert "`python -m fewshot.reproduce lee2019_fc100 --schedule cpu_10000 --data_dir DIR`" in "\n".join(
      page.entry_section(str(tmp_path), published.ENTRIES["lee2019_fc100"]))
  done = subprocess.run([sys.executable, "-m", "fewshot.reproduce", "nope"], capture_output=True, text=True)
  assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1


def test_every_entry_is_well_formed():
  for entry in published.ENTRIES.values():
    names = {m.name for m in entry.models}
    assert all(cell.model in names for cell in entry.cells), entry.name
    assert entry.schedules[0].published, f"{entry.name}: its first schedule is the paper's"
    if entry.not_comparable is None:
      from fewshot.config import Config

      for model in entry.models:
        for schedule in (s for s in entry.schedules if s.options is not None):  # None: known by name only
          for arm in entry.arms:
            Config(**entry.run_options(model, schedule, arm))  # every run's options are valid
    assert any(s.options is not None for s in entry.schedules), f"{entry.name}: a schedule fewshot can run"
    from fewshot.records.run_kinds import KINDS

    assert all(cell.measure in KINDS[entry.kind].measures for cell in entry.cells), f"{entry.name}: unknown measure"


def test_a_cell_reads_the_measure_it_names_through_its_entry_s_kind_of_run(tmp_path):
  """A metric-learning entry's cells are scored from its runs' retrieval (the fold models concatenated), a few-shot
  entry's from the test accuracy: each through its kind's row, none by testing the kind.
  """
  schedule, model = Schedule("s", {"epochs": 2}, "two epochs"), Model("m", {})
  cells = (Cell("MAP@R", "m", {}, 20.0, measure="map_at_r"), Cell("P@1", "m", {}, 50.0, measure="precision_at_1"))
  entry = Entry("made_up_dml", "made up", "made up", "cub", "nothing", {"dataset": "cub"}, (model,), (schedule,), cells,
                (), arms={"triplet": {"loss": "triplet"}}, kind="dml")
  for seed, (map_at_r, p_at_1) in enumerate(((0.25, 0.5), (0.3125, 0.625))):
    workdir = pathlib.Path(plan.run_dir(str(tmp_path), entry, schedule, model, "triplet", plan.SELECT, seed))
    workdir.mkdir(parents=True)
    tested = {"map_at_r": map_at_r, "precision_at_1": p_at_1, "r_precision": 0.0}
    (workdir / "results.json").write_text(json.dumps({
        "separated": [{"fold": 0, "test": {**tested, "map_at_r": 0.0}}], "concatenated": {"test": tested}}))
  assert plan.cell_measured(str(tmp_path), entry, schedule, cells[0], "triplet", (0, 1, 2)) == {
      0: (25.0, None), 1: (31.25, None)}
  assert plan.cell_values(str(tmp_path), entry, schedule, cells[1], "triplet", (0, 1)) == {0: 50.0, 1: 62.5}
  few = dataclasses.replace(entry, kind="fewshot", cells=(Cell("5-way", "m", {}, 90.0),))
  (pathlib.Path(plan.run_dir(str(tmp_path), few, schedule, model, "triplet", plan.SELECT, 0)) / "results.json"
   ).write_text(json.dumps({"test_accuracy": 91.5, "test_ci95": 0.25, "best_episode": 100}))
  assert plan.cell_measured(str(tmp_path), few, schedule, few.cells[0], "triplet", (0,)) == {0: (91.5, 0.25)}


def test_a_schedule_that_reads_another_entry_s_runs_trains_them_under_the_same_options_and_reads_them(tmp_path):
  """``Schedule.runs_of``: the runs stand in only where every model and arm's options are the other entry's; a cell
  of the schedule is measured from those runs' records, where that entry keeps them.
  """
  from fewshot.config import Config

  borrowing = [(e, s) for e in published.ENTRIES.values() for s in e.schedules if s.runs_of is not None]
  assert borrowing, "no schedule reads another entry's runs: the checks below would pass vacuously"
  for entry, schedule in borrowing:
    source = published.ENTRIES[schedule.runs_of.entry]
    for name in schedule.models or [m.name for m in entry.models]:
      for arm in entry.arms:
        ours = entry.run_options(entry.model(name), schedule, arm)
        theirs = source.run_options(source.model(schedule.runs_of.models[name]), source.schedule(
            schedule.runs_of.schedule), arm)
        assert Config(**ours).to_dict() == Config(**theirs).to_dict(), (entry.name, schedule.name, name, arm)
  entry = published.ENTRIES["snell2017_mini_imagenet"]
  schedule, kim = entry.schedule("kim_cpu_2500"), published.ENTRIES["kim2022_mini_imagenet"]
  workdir = pathlib.Path(plan.run_dir(str(tmp_path), kim, kim.schedule("cpu_2500"), kim.model("conv4 1-shot"), "dr",
                                      plan.SELECT, 3))
  workdir.mkdir(parents=True)
  (workdir / "results.json").write_text(json.dumps({"test_accuracy": 31.5, "test_ci95": 0.6, "best_episode": 2000}))
  cell = next(c for c in entry.cells if c.model == "1-shot")
  assert plan.seeds_found(str(tmp_path), entry, schedule) == [3]
  assert plan.cell_measured(str(tmp_path), entry, schedule, cell, "dr", (3,)) == {3: (31.5, 0.6)}


def _tiny(entry: Entry, **options) -> Entry:
  """The entry's protocol cut to a smoke run: its first model, one arm, a few episodes of small images."""
  small = dict(episodes=2, eval_every=2, val_episodes=1, test_episodes=2, way=2, test_way=2, query=2, test_query=2,
               image_size=16, patience=None)
  schedule = Schedule("smoke", {k: v for k, v in small.items() if k in ("episodes", "patience")}, "a smoke run")
  model = dataclasses.replace(entry.models[0], options={**entry.models[0].options, **{
      k: v for k, v in small.items() if k in ("way", "episodes")}})
  cell = dataclasses.replace(next(c for c in entry.cells if c.model == model.name), test=dict(test_way=2))
  return dataclasses.replace(entry, name=f"{entry.name}_smoke", models=(model,), schedules=(schedule,), cells=(cell,),
                             arms=dict(list(entry.arms.items())[:1]), options={**entry.options, **small, **options})


@pytest.mark.slow
@pytest.mark.parametrize("name,write", [
    ("snell2017_mini_imagenet", lambda root: fixtures.write_mini_imagenet(root, classes=(4, 2, 2), per_class=6,
                                                                           size=(24, 24)).data_dir),
    ("kim2022_cub", lambda root: fixtures.write_cub(root, classes=8, per_class=6, size=(24, 28)).data_dir),
])
def test_an_entry_for_the_data_users_bring_runs_on_its_fixture(name, write, tmp_path, monkeypatch):
  tiny = _tiny(published.ENTRIES[name])
  monkeypatch.setitem(published.ENTRIES, tiny.name, tiny)
  text = reproduce.reproduce(tiny.name, (0,), str(write(tmp_path / "data")), str(tmp_path / "tfds"),
                             str(tmp_path / "runs"))
  [cell] = report.cell_reports(str(tmp_path / "runs"), tiny, tiny.schedules[0], (0,))
  assert len(cell.by_arm[next(iter(tiny.arms))].values) == 1 and "(1 seed: " in text


def test_entries_for_the_data_users_bring_refuse_without_it_naming_it(tmp_path):
  for name, needs in (("snell2017_mini_imagenet", "train.csv"), ("kim2022_cub", "CUB_200_2011"),
                      ("kim2022_mini_imagenet", "Ravi & Larochelle")):
    with pytest.raises(ConfigError, match=f"pass --data_dir DIR holding .*{needs}"):
      reproduce.reproduce(name, (0,), out=str(tmp_path))
  text = reproduce.reproduce("musgrave2020_sop", (0,), out=str(tmp_path))  # not comparable: nothing trains
  assert "not comparable: the published protocol fine-tunes an ImageNet-pretrained" in text
  assert "N. Softmax MAP@R: published 42.35 ± 0.16" in text and not (tmp_path / "musgrave2020_sop").exists()
  assert "the paper's text: comparable (the paper's exception)" in reproduce.reproduce("kim2022_cub", (0,),
                                                                                        train=False)


def test_the_kept_page_rebuilds_byte_for_byte_from_its_records():
  root = __import__("pathlib").Path(__file__).resolve().parents[2]
  built = page.build(str(root / "docs" / "reproductions"), list(published.ENTRIES.values()))
  assert built == (root / "docs" / "reproductions.md").read_text(), "run python -m fewshot.reproduce --page"


def test_every_figure_of_the_readme_s_table_is_on_the_kept_page_with_its_words_whole():
  """The README's summary of the page is copied by hand: each of its cells must be a row of the page, its mean ±
  interval and its verdict word for word, and a row of the schedule its table's header names.
  """
  root = pathlib.Path(__file__).resolve().parents[2]
  readme = (root / "README.md").read_text()
  section = readme[readme.index("## Published results beside ours"):readme.index("```bash\npython -m fewshot.reproduce")]
  kept = (root / "docs" / "reproductions.md").read_text()
  lines = section.splitlines()
  tables = {}  # header -> rows: a table's header is the row before its |---| line, its other rows are ours
  for line, after in zip(lines, lines[1:] + [""]):
    if after.startswith("|---"):
      tables[line] = []
    elif line.startswith("| ") and not line.startswith("|---"):
      tables[list(tables)[-1]].append(line)
  assert tables, "the README's table of published results beside ours is gone"
  heads = ("ProtoNet_S", "ProtoNet_DR")
  for header, rows in tables.items():
    schedule = re.search(r"schedule `(\w+)`", header)
    assert schedule and rows, f"README's table '{header}' names no schedule (schedule `NAME`) or has no rows"
    # Every page section of that schedule, so a row of another schedule's table cannot match.
    sections = re.findall(rf"### Schedule `{schedule.group(1)}`.*?(?=\n##)", kept, re.S)
    for row in rows:
      cell, _, *ours = [part.strip() for part in row.strip("|").split("|")]
      for head, text in zip(heads, ours):
        figure, words = text.split(": ", 1)
        mean, interval = figure.split(" ± ")
        pattern = rf"\| {re.escape(cell)} \| [^|]+ \| [^|]+ \| {head} \| {re.escape(mean)} ± {re.escape(interval)} " \
                  rf"[^|]+\|[^|]+\| {re.escape(words)} \|"
        assert any(re.search(pattern, kept_section) for kept_section in sections), \
            f"README's {cell} {head} '{text}' is not a row of docs/reproductions.md's schedule {schedule.group(1)}"


def test_a_fixed_length_schedule_trains_every_seed_on_train_and_val_at_once_without_selecting():
  entry = published.ENTRIES["snell2017_omniglot"]
  schedule = entry.schedule("code_minimum")
  model = entry.model("1-shot")
  assert plan.final_groups("out", entry, schedule, model, "dr", (0, 1, 2)) == [plan.Group(
      model, "dr", plan.FINAL, {**{k: v for k, v in entry.run_options(model, schedule, "dr").items()
                                   if k != "patience"}, "train_splits": "train+val"}, (0, 1, 2),
      tuple(f"out/snell2017_omniglot/code_minimum/1-shot_dr/final/seed{s}" for s in (0, 1, 2)))]
  options = plan.final_groups("out", entry, schedule, model, "dr", (0,))[0].options
  assert (options["episodes"], options["lr_halve_every"], options["learning_rate"]) == (20_000, 2000, 1e-3)
  assert [m.name for m in reproduce.chosen(entry, None, None, schedule)[0]] == ["1-shot"]
  with pytest.raises(ConfigError, match="no model '5-shot' under schedule code_minimum; choose from 1-shot"):
    reproduce.chosen(entry, ["5-shot"], None, schedule)


@pytest.mark.slow  # two seeds of a fixed-length schedule trained and tested: ~20 s
def test_a_fixed_length_schedule_runs_end_to_end_with_no_select_run(tmp_path, monkeypatch):
  fixed = Schedule("fixed", dict(episodes=4), "four episodes on train + val", selects=False)
  entry = dataclasses.replace(TINY, name="tiny_fixed", schedules=(fixed,))
  monkeypatch.setitem(published.ENTRIES, entry.name, entry)
  out = str(tmp_path / "runs")
  text = reproduce.reproduce(entry.name, (0, 1), out=out)
  assert not (tmp_path / "runs/tiny_fixed/fixed/1-shot_softmax/select").exists()
  for seed in (0, 1):
    final = plan.run_dir(out, entry, fixed, entry.models[0], "softmax", plan.FINAL, seed)
    config = json.loads(open(f"{final}/config.json").read())
    assert (config["train_splits"], config["episodes"], config["seed"]) == ("train+val", 4, seed)
  assert len(plan.cell_values(out, entry, fixed, entry.cells[1], "softmax", (0, 1))) == 2 and "2 seeds" in text


def _kept_copy(tmp_path) -> pathlib.Path:
  """A copy of the kept records and the page built from them, to damage."""
  root = pathlib.Path(__file__).resolve().parents[2]
  records = tmp_path / "records"
  __import__("shutil").copytree(root / "docs" / "reproductions", records)
  (tmp_path / "page.md").write_text((root / "docs" / "reproductions.md").read_text())
  return records


def _run_folder(root: pathlib.Path, place: str, config: dict, results: str = '{"test_accuracy": 90.0}'):
  folder = root / place
  folder.mkdir(parents=True)
  (folder / "config.json").write_text(json.dumps(config))
  (folder / "metrics.jsonl").write_text(json.dumps({"episode": 100, "seconds": 1.0}) + "\n")
  (folder / "results.json").write_text(results)
  return folder


def test_the_page_keeps_no_run_that_is_not_its_entry_s_and_none_it_cannot_read(tmp_path):
  records = _kept_copy(tmp_path)
  before = {p: p.read_bytes() for p in records.rglob("*") if p.is_file()}
  page_file = tmp_path / "page.md"
  page_text = page_file.read_text()
  place = "snell2017_omniglot/short/1-shot_dr/final/seed7"
  foreign = tmp_path / "foreign"
  _run_folder(foreign, place, {"dataset": "strokes", "way": 5, "seed": 7, "head": "dr"})  # a strokes run, copied in
  with pytest.raises(ConfigError, match=r"seed7 is not snell2017_omniglot's run: it trained with --dataset 'strokes' "
                     r"where snell2017_omniglot trains 'omniglot' \(and \d+ more\)"):
    reproduce.write_page(str(records), str(page_file), str(foreign))
  entry = published.ENTRIES["snell2017_omniglot"]
  schedule, model = entry.schedule("short"), entry.model("1-shot")
  own = {**kept.expected_options(entry, schedule, model, "dr", plan.FINAL), "seed": 7, "episodes": 900}
  truncated = tmp_path / "truncated"
  _run_folder(truncated, place, own, results='{"test_accuracy": 9')
  with pytest.raises(ConfigError, match=r"results.json does not parse \(JSONDecodeError"):
    reproduce.write_page(str(records), str(page_file), str(truncated))
  assert {p: p.read_bytes() for p in records.rglob("*") if p.is_file()} == before and page_file.read_text() == page_text
  # A kept record damaged afterwards: the page is not rewritten (it was left at 0 bytes), the record is named.
  metrics = next(records.rglob("metrics.jsonl"))
  metrics.write_text(metrics.read_text()[:-40])
  with pytest.raises(ConfigError, match="the kept .*metrics.jsonl does not parse"):
    reproduce.write_page(str(records), str(page_file))
  assert page_file.read_text() == page_text
  for records_, page_, keep_, fragment in ((tmp_path / "typo", page_file, None, "--records .*typo is not a folder"),
                                           (records, page_file, tmp_path / "none", "--keep .*none is not a folder"),
                                           (records, tmp_path / "no" / "page.md", None, "its folder .*no does not")):
    with pytest.raises(ConfigError, match=fragment):
      reproduce.write_page(str(records_), str(page_), None if keep_ is None else str(keep_))
  assert page_file.read_text() == page_text


def test_a_finished_run_trained_under_other_options_is_refused_not_mixed_into_the_cell(tmp_path, monkeypatch):
  monkeypatch.setitem(published.ENTRIES, TINY.name, TINY)
  schedule, model = TINY.schedules[0], TINY.models[0]
  group = plan.select_group(str(tmp_path), TINY, schedule, model, "softmax", (0,))
  old = {**json.loads(json.dumps(group.options)), "seed": 0, "query": 5}  # the entry's query was 5 when it ran
  _run_folder(tmp_path, os.path.relpath(group.workdirs[0], tmp_path), old)
  with pytest.raises(ConfigError, match=r"select/seed0 was trained with --query 5 where the entry now trains 2; move "
                     r"the old runs aside"):
    reproduce.train_group(group, None, None)
