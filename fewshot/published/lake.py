"""Lake et al.'s one-shot classification on Omniglot in its two published settings, with the field's figures beside.

Lake, Salakhutdinov & Tenenbaum 2015 (Science), "Human-level concept learning through probabilistic program
induction": trained on the 30 background alphabets, tested on Lake's 20 runs of 20-way within-alphabet one-shot
classification (``all_runs.zip``: 10 of the 20 evaluation alphabets, one drawer's image of each character the
support, another's the query; 400 items). Lake, Salakhutdinov & Tenenbaum 2019 (Current Opinion in Behavioral
Sciences), "The Omniglot challenge: a 3-year progress report", Table 1, adds the "minimal" setting: trained on
``images_background_small1`` (or ``small2``) alone.

The published figures are other methods' (people, BPL, siamese nets, ...) or, for prototypical networks in the minimal
setting, the same method trained as Lake et al. trained it: points to set ours beside on the same 400 items, numbers
side by side, not reproductions of a fewshot protocol, so no verdict. Each model is scored on Lake's 20 runs (the
field's benchmark) and on 400 random runs of the same design (:mod:`fewshot.episodic.lake_design`), whose tighter
interval says how typical the official 20 are for it. Runs scored before 2026-12-02 were fewshot's own drawn runs
(100 runs from all 20 evaluation alphabets, their supports from several drawers): kept, and marked not comparable.
"""

from __future__ import annotations

from fewshot.published.registry import Cell, Comparison, Entry, Model, Schedule

OFFICIAL = dict(lake_runs="official")  # Lake's 20 runs, all_runs.zip
DESIGN = dict(lake_runs="design", runs=400, way=20, seed=0)  # random runs of his design
OLD_DRAWN = dict(lake_runs="drawn", runs=100, way=20, seed=0)  # fewshot's drawn runs before 2026-12-02: kept records
_COMMON = dict(dataset="omniglot", backbone="conv4", classifier="proto", distance="squared_euclidean", shot=1,
               test_way=20, test_query=5, val_episodes=100, test_episodes=200)
MODELS = (
    Model("recipe", dict(way=60, query=5, rotations=True, distort=True, lr_halve_every=3000, episodes=6000,
                         eval_every=1000, test_shifts=3)),
    Model("protonet", dict(way=60, query=5, rotations=True, lr_halve_every=2000, episodes=6000, eval_every=500)),
)
_SCHEDULES = (
    Schedule("own", {}, "each model's own length (6,000 episodes, Adam's rate halved every 3,000 for the recipe and "
             "every 2,000 for protonet), the checkpoint chosen on 20-way validation episodes", unlike=None),
    # Declared before any of its training runs: what a 2-core CPU trains for 3 seeds of both models and heads in each
    # of the three settings (36 training runs) in hours. Both models halve their rate once, at half the length, as
    # the recipe's own 6,000 episodes halve at 3,000.
    Schedule("short", dict(episodes=2000, eval_every=500, lr_halve_every=1000), "2,000 episodes, Adam's rate halved "
             "at 1,000, validated every 500 (a third of each model's own length): what a 2-core CPU trains for 3 "
             "seeds of both models and heads in hours"),
)
ALL_CHARACTERS = Schedule(
    # Declared on 2026-12-02, before any of its runs: the recipe on every background character, as Lake et al.'s
    # comparison points trained, for the recipe's own 6,000 episodes (its last checkpoint: nothing held out to
    # choose one), 3 seeds per head.
    "all_characters", dict(episodes=6000), "The recipe on all 964 background characters (train + val of the "
    "all_characters split) for its own 6,000 episodes, Adam's rate halved at 3,000, its last checkpoint tested",
    selects=False, models=("recipe",))
_OLD_RUNS = ("Before 2026-12-02 the runs scored were fewshot's own, drawn from all 20 evaluation alphabets (100 runs, "
             "seed 0), with a defect: each run's supports came from several drawers, not one (the prepared split "
             "does not store a character's images in drawer order). Those cells stay as measured and are not "
             "comparable with Lake's 20 runs, with runs of his design, or with the figures of people and other "
             "methods.")
_HELD_OUT = ("The `own` and `short` schedules trained on three quarters of the background characters (723 of 964; "
             "small1: 102 of 136, small2: 117 of 156), every fourth held out to validate; `all_characters` trains on "
             "all 964.")
_DIFFERENCES = (
    _OLD_RUNS, _HELD_OUT,
    "The models are fewshot's (Conv4 ProtoNet, softmax and DR heads): the published figures are other methods'.",
)
_MINIMAL_DIFFERENCES = (
    _OLD_RUNS, _HELD_OUT,
    "The models are fewshot's (Conv4 ProtoNet, softmax and DR heads). Of the published figures, Bayesian program "
    "learning's is another method's; prototypical networks' is the protonet model's method as Lake et al. 2019 "
    "trained it, whose episodes, length and stopping are not known here.",
)


def _cells() -> tuple[Cell, ...]:
  """Per model: Lake's 20 runs, runs of his design, and the old drawn runs (kept records)."""
  # The old drawn runs can no longer be drawn: their cell holds the `short` schedule's kept records only.
  return tuple(Cell(name, model.name, dict(test), None, schedules=("short",) if test is OLD_DRAWN else None)
               for model in MODELS for name, test in (
      ("Lake's 20 runs", OFFICIAL), ("400 runs of Lake's design", DESIGN),
      ("fewshot's old drawn runs (not comparable)", OLD_DRAWN)))


BACKGROUND_POINTS = (Comparison("people", 95.5, "Lake et al. 2015"),
                     Comparison("Bayesian program learning", 96.7, "Lake et al. 2015"),
                     Comparison("Koch et al.'s siamese net", 92.0, "Lake et al. 2015"),
                     Comparison("a simple ConvNet", 86.5, "Lake et al. 2015"))
# Lake et al. 2019, Table 1, minimal setting, as recalled: not checked against the paper's text here.
MINIMAL_POINTS = (Comparison("Bayesian program learning", 95.8, "Lake et al. 2019, Table 1", verified=False),
                  Comparison("prototypical networks", 69.9, "Lake et al. 2019, Table 1", verified=False))


def _entry(name: str, class_splits: str, what: str, needs: str, points, differences=_DIFFERENCES,
           schedules=_SCHEDULES) -> Entry:
  return Entry(
      name=name, source=what, dataset="omniglot", needs=needs,
      protocol=("20-way within-alphabet one-shot classification on Lake's 20 runs (all_runs.zip): each run 20 "
                "characters of one of 10 evaluation alphabets, one drawer's image of each the support and another "
                "drawer's the query (drawers 1-8); accuracy over the 400 items."),
      options=dict(_COMMON, class_splits=class_splits), models=MODELS, schedules=schedules, cells=_cells(),
      differences=differences, scored_on="lake_runs", comparisons=points)


BACKGROUND = _entry("lake2015_background", "all_characters",
                    "Lake, Salakhutdinov & Tenenbaum 2015, Human-level concept learning through probabilistic program "
                    "induction (Science): one-shot classification after the 30 background alphabets",
                    "images_background.zip, images_evaluation.zip and Lake's all_runs.zip", BACKGROUND_POINTS,
                    schedules=(*_SCHEDULES, ALL_CHARACTERS))
SMALL1 = _entry("lake2019_small1", "lake_small1",
                "Lake, Salakhutdinov & Tenenbaum 2019, The Omniglot challenge: a 3-year progress report, Table 1: "
                "the minimal setting, images_background_small1 alone",
                "images_background_small1.zip, images_evaluation.zip and Lake's all_runs.zip", MINIMAL_POINTS,
                _MINIMAL_DIFFERENCES)
SMALL2 = _entry("lake2019_small2", "lake_small2",
                "Lake, Salakhutdinov & Tenenbaum 2019, The Omniglot challenge: a 3-year progress report, Table 1: "
                "the minimal setting, images_background_small2 alone",
                "images_background_small2.zip, images_evaluation.zip and Lake's all_runs.zip", MINIMAL_POINTS,
                _MINIMAL_DIFFERENCES)
