"""Class splits from lists (issue 37): Vinyals et al.'s published split, a user's own lists, the old seeded cut."""

import hashlib
import os
import pathlib

import pytest

from fewshot import data
from fewshot.config import Config
from fewshot.data import class_lists, omniglot
from fewshot.errors import ConfigError, DataError

FULL = pathlib.Path(os.environ.get("FEWSHOT_OMNIGLOT_FULL_DIR",
                                   pathlib.Path(__file__).resolve().parents[3] / "shared" / "data" / "omniglot_full"))


def _raw(split: str) -> list[str]:
  return (class_lists.VINYALS / f"{split}.txt").read_text().split()


def test_the_shipped_lists_are_vinyals_split_as_published():
  lists = class_lists.read(class_lists.VINYALS)
  assert [len(lists.splits[s]) for s in data.SPLITS] == [1028, 172, 423]
  for split in data.SPLITS:  # each character listed at its four rotations, as published
    raw = _raw(split)
    assert len(raw) == 4 * len(lists.splits[split])
    assert sorted({name.rsplit("/", 1)[1] for name in raw}) == ["rot000", "rot090", "rot180", "rot270"]
    assert sorted({name.rsplit("/", 1)[0] for name in raw}) == lists.splits[split]
  test_alphabets = {name.split("/")[0] for name in lists.splits["test"]}
  assert len(test_alphabets) == 13 and test_alphabets <= omniglot.EVALUATION_ALPHABETS
  trained = {name.split("/")[0] for s in ("train", "val") for name in lists.splits[s]}
  assert test_alphabets & trained == {"Gurmukhi"}  # 12 held out whole, Gurmukhi's characters 42-45 tested
  assert [n for n in lists.splits["test"] if n.startswith("Gurmukhi/")] == [f"Gurmukhi/character{k}" for k in range(42, 46)]
  digest = hashlib.sha256()
  for file in ("train.txt", "val.txt", "test.txt"):
    digest.update(file.encode() + b"\0" + (class_lists.VINYALS / file).read_bytes() + b"\0")
  assert lists.sha256 == digest.hexdigest()


def test_listed_characters_are_the_splits_and_a_missing_one_is_named_in_one_line():
  lists = class_lists.read(class_lists.VINYALS)
  names = sorted(sum(lists.splits.values(), [])) + ["Extra/character01"]  # a character no list names is unused
  assert omniglot.character_splits(names, "vinyals_published") == lists.splits
  with pytest.raises(DataError) as raised:
    omniglot.character_splits([n for n in names if n != lists.splits["test"][0]], "vinyals_published")
  assert "1 of the classes" in str(raised.value) and lists.splits["test"][0] in str(raised.value)
  assert "images_evaluation.zip" in str(raised.value) and "\n" not in str(raised.value)


def test_a_users_lists_are_read_with_or_without_rotations_and_refused_when_they_overlap(tmp_path):
  for split, names in {"train": ["A/character01/rot000", "A/character01/rot090", "A/character02"],
                       "val": ["# held out", "B/character01"], "test": ["", "C/character01"]}.items():
    (tmp_path / f"{split}.txt").write_text("\n".join(names) + "\n")
  lists = class_lists.read(tmp_path)
  assert lists.splits == {"train": ["A/character01", "A/character02"], "val": ["B/character01"],
                          "test": ["C/character01"]}
  before = lists.sha256
  (tmp_path / "test.txt").write_text("C/character01\nA/character02\n")
  with pytest.raises(ConfigError, match="A/character02 is listed in both train.txt and test.txt"):
    class_lists.read(tmp_path)
  (tmp_path / "test.txt").write_text("C/character02\n")
  assert class_lists.read(tmp_path).sha256 != before  # recorded by content
  (tmp_path / "val.txt").unlink()
  with pytest.raises(ConfigError, match="has no readable val.txt"):
    class_lists.read(tmp_path)


def test_lists_need_their_folder_and_the_folder_its_class_splits(tmp_path):
  with pytest.raises(ConfigError, match="pass both or neither"):
    Config(dataset="omniglot", class_splits="lists")
  with pytest.raises(ConfigError, match="pass both or neither"):
    Config(dataset="omniglot", split_lists=str(tmp_path))
  assert Config(dataset="omniglot", class_splits="lists", split_lists=str(tmp_path)).split_lists == str(tmp_path)


def test_the_old_vinyals_reads_as_vinyals_sizes_and_is_refused_on_the_command_line_naming_both():
  old = Config.from_dict({"dataset": "omniglot", "class_splits": "vinyals"})
  assert old.class_splits == "vinyals_sizes"
  assert Config.from_dict({"dataset": "omniglot", "protocol": "vinyals"}).class_splits == "vinyals_sizes"
  with pytest.raises(ConfigError) as raised:
    Config(dataset="omniglot", class_splits="vinyals")
  assert "now named vinyals_sizes" in str(raised.value) and "vinyals_published" in str(raised.value)


@pytest.fixture(scope="module")
def complete(tmp_path_factory):
  if not (FULL / "images_evaluation.zip").exists():
    pytest.skip(f"the complete Omniglot is not in {FULL}; set FEWSHOT_OMNIGLOT_FULL_DIR")
  return str(FULL), str(tmp_path_factory.mktemp("tfds"))


@pytest.mark.slow  # 8 s: the complete Omniglot prepared and read; the lists' logic on fixtures is the default tier's
def test_on_the_complete_omniglot_vinyals_published_and_lakes_alphabets(complete):
  data_dir, tfds_dir = complete
  assert data.files("omniglot", data_dir)[0] == ["images_background.zip", "images_evaluation.zip"]  # not splits/
  vinyals = data.load_splits("omniglot", data_dir, tfds_dir, class_splits="vinyals_published", rotations=True)
  assert [vinyals[s].num_classes for s in data.SPLITS] == [4112, 688, 1692]
  listed = {s: sorted(_raw(s)) for s in data.SPLITS}
  assert {s: sorted(vinyals[s].class_names) for s in data.SPLITS} == listed
  lake = data.load_splits("omniglot", data_dir, tfds_dir, data.SPLITS, class_splits="background_evaluation")
  alphabets = {s: {name.split("/")[0] for name in lake[s].class_names} for s in lake}
  assert len(alphabets["test"]) == 20 and alphabets["test"] == set(omniglot.EVALUATION_ALPHABETS)
  assert len(alphabets["train"] | alphabets["val"]) == 30
  assert lake["test"].num_classes == 659 and lake["train"].num_classes + lake["val"].num_classes == 964


def test_lists_saved_with_crlf_or_a_bom_are_the_same_lists_and_an_indented_comment_is_no_class(tmp_path):
  """Issue 56 item 7: a list's line ends and byte-order mark are no part of the protocol; an edit is."""
  lists = {"train": "A/character01\n  # indented note\nA/character02\n", "val": "B/character01\n",
           "test": "C/character01\n"}
  saved = {"lf": lambda text: text.encode(), "crlf": lambda text: text.replace("\n", "\r\n").encode(),
           "bom": lambda text: b"\xef\xbb\xbf" + text.encode()}
  read = {}
  for kind, write in saved.items():
    (tmp_path / kind).mkdir()
    for split, text in lists.items():
      (tmp_path / kind / f"{split}.txt").write_bytes(write(text))
    read[kind] = class_lists.read(tmp_path / kind)
  assert read["lf"].splits == {"train": ["A/character01", "A/character02"], "val": ["B/character01"],
                               "test": ["C/character01"]}
  assert all(r.splits == read["lf"].splits and r.sha256 == read["lf"].sha256 for r in read.values())
  (tmp_path / "lf" / "val.txt").write_text("B/character01\n# edited\n")
  assert class_lists.read(tmp_path / "lf").sha256 != read["crlf"].sha256


def test_a_missing_listed_character_is_told_the_fix_its_name_needs(tmp_path):
  """The zip for an alphabet that is missing whole; the spelling for a name no zip could hold."""
  found = ["Latin/character01", "Latin/character02", "Greek/character01"]

  def refusal(*test):
    for split, names in {"train": ["Latin/character01"], "val": ["Greek/character01"], "test": list(test)}.items():
      (tmp_path / f"{split}.txt").write_text("\n".join(names) + "\n")
    with pytest.raises(DataError) as raised:
      omniglot.character_splits(found, "lists", split_lists=str(tmp_path))
    assert "\n" not in str(raised.value)
    return str(raised.value)

  assert "it needs images_evaluation.zip" in refusal("Latin/character02", "Tengwar/character01")
  assert "it needs images_background.zip" in refusal("Latin/character02", "Korean/character01")
  said = refusal("Latn/character02")
  assert "'Latn' is no Omniglot alphabet" in said and ".zip" not in said
  assert "holds Latin but not Latin/character99" in refusal("Latin/character99")
