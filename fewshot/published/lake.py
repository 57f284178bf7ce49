"""Lake et al.'s one-shot classification on Omniglot in its two published settings, with the field's comparison points.

Lake, Salakhutdinov & Tenenbaum 2015 (Science), "Human-level concept learning through probabilistic program
induction": trained on the 30 background alphabets, tested on 20 runs of 20-way within-alphabet one-shot
classification drawn from the 20 evaluation alphabets (one drawer's image of each character the support, another's
the query). Lake, Salakhutdinov & Tenenbaum 2019 (Current Opinion in Behavioral Sciences), "The Omniglot challenge: a
3-year progress report", Table 1, adds the "minimal" setting: trained on ``images_background_small1`` (or
``small2``) alone. The published figures are other methods' (people, BPL, siamese nets, ...), or, for prototypical
networks in the minimal setting, the same method trained as Lake et al. trained it: points to set ours beside, each a
cell of its own, not reproductions of a fewshot protocol.

fewshot scores runs of the same kind drawn from the evaluation alphabets (:func:`fewshot.episodic.lake.draw_runs`,
100 runs of 20 items, seeded and recorded); Lake's own 20 (``all_runs.zip``, a download of the Omniglot repository)
score with ``python -m fewshot.evaluate --workdir RUN --lake_runs all_runs.zip``. Each
setting has two models: the README's Omniglot recipe and Snell et al.'s ProtoNet episodes, the nearest to the cited
papers' training that fewshot has (rotations as classes; no distortion, no test shifts).
"""

from __future__ import annotations

from fewshot.published.registry import Cell, Entry, Model, Schedule

_DRAWN = dict(lake_runs="drawn", runs=100, way=20, seed=0)
_COMMON = dict(dataset="omniglot", backbone="conv4", classifier="proto", distance="squared_euclidean", shot=1,
               test_way=20, test_query=5, val_episodes=100, test_episodes=200)
MODELS = (
    Model("recipe", dict(way=60, query=5, rotations=True, distort=True, lr_halve_every=3000, episodes=6000,
                         eval_every=1000, test_shifts=3)),
    Model("protonet", dict(way=60, query=5, rotations=True, lr_halve_every=2000, episodes=6000, eval_every=500)),
)
_SCHEDULES = (
    Schedule("own", {}, "each model's own length (6,000 episodes, Adam's rate halved every 3,000 for the recipe and "
             "every 2,000 for protonet), the checkpoint chosen on 20-way validation episodes", published=True),
    # Declared before any of its training runs: what a 2-core CPU trains for 3 seeds of both models and heads in each
    # of the three settings (36 training runs) in hours. Both models halve their rate once, at half the length, as
    # the recipe's own 6,000 episodes halve at 3,000.
    Schedule("short", dict(episodes=2000, eval_every=500, lr_halve_every=1000), "2,000 episodes, Adam's rate halved "
             "at 1,000, validated every 500 (a third of each model's own length): what a 2-core CPU trains for 3 "
             "seeds of both models and heads in hours", published=False),
)
_DIFFERENCES = (
    "The runs scored are drawn by fewshot from the 20 evaluation alphabets (100 runs of 20 items, seed 0), not "
    "Lake's own 20 (all_runs.zip; python -m fewshot.evaluate --lake_runs scores those).",
    "The models are fewshot's (Conv4 ProtoNet, softmax and DR heads): the published figures are other methods'.",
)
_MINIMAL_DIFFERENCES = (
    _DIFFERENCES[0],
    "The models are fewshot's (Conv4 ProtoNet, softmax and DR heads). Of the published figures, Bayesian program "
    "learning's is another method's; prototypical networks' is the protonet model's method as Lake et al. 2019 "
    "trained it, whose episodes, length and stopping are not known here.",
)


def _cells(points: tuple[tuple[str, float, str, bool], ...]) -> tuple[Cell, ...]:
  """A cell per model and comparison point: the same measurement, set beside each point."""
  return tuple(Cell(f"{model.name} vs {who}" + ("" if verified else " (not verified)"), model.name, dict(_DRAWN),
                    value) for model in MODELS for who, value, _, verified in points)


BACKGROUND_POINTS = (("people", 95.5, "Lake et al. 2015", True),
                     ("Bayesian program learning", 96.7, "Lake et al. 2015", True),
                     ("Koch et al.'s siamese net", 92.0, "Lake et al. 2015", True))
# Lake et al. 2019, Table 1, minimal setting, as recalled: not checked against the paper's text here.
MINIMAL_POINTS = (("Bayesian program learning", 95.8, "Lake et al. 2019, Table 1", False),
                  ("prototypical networks", 69.9, "Lake et al. 2019, Table 1", False))


def _entry(name: str, class_splits: str, what: str, needs: str, points, differences=_DIFFERENCES) -> Entry:
  return Entry(
      name=name, source=what, dataset="omniglot", needs=needs,
      protocol=("20-way within-alphabet one-shot classification: each run 20 characters of one evaluation alphabet, "
                "one drawer's image of each the support and another drawer's the query; accuracy over the runs' "
                "items."),
      options=dict(_COMMON, class_splits=class_splits), models=MODELS, schedules=_SCHEDULES, cells=_cells(points),
      differences=differences, scored_on="lake_runs")


BACKGROUND = _entry("lake2015_background", "all_characters",
                    "Lake, Salakhutdinov & Tenenbaum 2015, Human-level concept learning through probabilistic program "
                    "induction (Science): one-shot classification after the 30 background alphabets",
                    "images_background.zip and images_evaluation.zip", BACKGROUND_POINTS)
SMALL1 = _entry("lake2019_small1", "lake_small1",
                "Lake, Salakhutdinov & Tenenbaum 2019, The Omniglot challenge: a 3-year progress report, Table 1: "
                "the minimal setting, images_background_small1 alone",
                "images_background_small1.zip and images_evaluation.zip", MINIMAL_POINTS, _MINIMAL_DIFFERENCES)
SMALL2 = _entry("lake2019_small2", "lake_small2",
                "Lake, Salakhutdinov & Tenenbaum 2019, The Omniglot challenge: a 3-year progress report, Table 1: "
                "the minimal setting, images_background_small2 alone",
                "images_background_small2.zip and images_evaluation.zip", MINIMAL_POINTS, _MINIMAL_DIFFERENCES)
