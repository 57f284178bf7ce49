"""Finn, Abbeel & Levine 2017, Model-Agnostic Meta-Learning for Fast Adaptation of Deep Networks (ICML), Table 1:
MAML on Omniglot, 5- and 20-way, 1- and 5-shot.

The protocol as the paper's code runs it (github.com/cbfinn/maml, ``main.py``'s usage lines and defaults): Conv4 of
64 filters with batch norm, 28 px; each of the four cells a model of its own, trained on episodes of its own shape
with as many queries per class as shots; 5-way: one inner step of rate 0.4, 32 episodes per meta-update; 20-way: five
inner steps of rate 0.1, 16 per meta-update; Adam 1e-3; 40,000 meta-updates; tested with 10 inner steps on 600
episodes, ± 1.96 standard deviations over √600.
"""

from __future__ import annotations

from fewshot.published.registry import Cell, Entry, Model, Schedule

_FIVE = dict(way=5, test_way=5, inner_steps=1, inner_lr=0.4, meta_batch=32)
_TWENTY = dict(way=20, test_way=20, inner_steps=5, inner_lr=0.1, meta_batch=16)
MODELS = tuple(Model(f"{way}-way {shot}-shot", dict(options, shot=shot, query=shot, test_query=shot))
               for way, options in ((5, _FIVE), (20, _TWENTY)) for shot in (1, 5))

OMNIGLOT = Entry(
    name="finn2017_omniglot",
    source="Finn, Abbeel & Levine 2017, Model-Agnostic Meta-Learning for Fast Adaptation of Deep Networks, Table 1 "
           "(Omniglot)",
    protocol=("MAML (second order) with Conv4 (64 filters, strided convolutions, batch norm) at 28 px on a random "
              "split of the 1,623 characters (1,100 train, 100 validation, 423 test), each class rotated by a "
              "multiple of 90 degrees; each cell's model trained on episodes of its shape with K queries per class: "
              "5-way with one inner step of rate 0.4 and 32 episodes per meta-update, 20-way with five steps of rate "
              "0.1 and 16 per meta-update; Adam 1e-3 for 40,000 meta-updates; tested with 10 inner steps on 600 "
              "episodes."),
    dataset="omniglot",
    needs="images_background.zip and images_evaluation.zip of the Omniglot repository (folder python/)",
    options=dict(dataset="omniglot", class_splits="vinyals_sizes", rotations=True, backbone="conv4", method="maml",
                 test_inner_steps=10, learning_rate=1e-3, eval_every=1000, val_episodes=100, test_episodes=600),
    models=MODELS,
    schedules=(Schedule("published", dict(episodes=40_000), "the code's usage lines: 40,000 meta-updates",
                        unlike=None),),
    # Margins as Snell et al.'s Omniglot cells (fewshot.published.snell2017): 0.5 points at 5-way, 1.0 at 20-way.
    cells=(Cell("5-way 1-shot", "5-way 1-shot", {}, 98.7, 0.4, margin=0.5),
           Cell("5-way 5-shot", "5-way 5-shot", {}, 99.9, 0.1, margin=0.5),
           Cell("20-way 1-shot", "20-way 1-shot", {}, 95.8, 0.3, margin=1.0),
           Cell("20-way 5-shot", "20-way 5-shot", {}, 98.9, 0.2, margin=1.0)),
    differences=(
        "Backbone: fewshot's Conv4 pools with 2x2 max-pooling; the code's Omniglot network strides its convolutions "
        "instead.",
        "Split: a seeded permutation of the 1,623 characters cut at 1,028 / 172 / 423 (vinyals_sizes); the code "
        "shuffles them under its own seed and cuts 1,100 / 100 / 423.",
        "Rotations: each rotation by 90 degrees is a class of its own; the code rotates a sampled class's images by "
        "one multiple of 90 degrees per task.",
        "Checkpoint: the best by validation accuracy every 1,000 meta-updates; the code tests its last.",
    ),
    arms={"maml": {}},  # the paper's one arm: MAML with its linear classifier (the entry's options)
    # One seed of the 5-way 1-shot model alone is 40,000 meta-updates of 32 episodes (1,280,000 adapted episodes).
    accelerator=True,
)
