"""Lee, Maji, Ravichandran & Soatto 2019, Meta-Learning with Differentiable Convex Optimization (MetaOptNet, CVPR),
Table 2: the Conv4 ("64-64-64-64") Prototypical Networks row on CIFAR-FS and FC100, 5-way 1- and 5-shot.

The table quotes that row from other papers (its marks: the CIFAR-FS figures from Bertinetto et al. 2019, R2D2; the
FC100 ones from Oreshkin et al. 2018, TADAM) as "average few-shot classification accuracies (%) with 95% confidence
intervals"; how those runs were trained and on how many test episodes they were scored is not in MetaOptNet's text
and was not checked against the cited papers here. TADAM's own text (the arXiv v1 source in ElementAI/TADAM) has a
Conv4 ProtoNet on FC100 of its own, 5-shot only, 51.1 ± 0.2 (5-way training; 500 tasks of 100 queries, 10 restarts),
not MetaOptNet's 48.6: both are cells here, each with its source. Neither entry has been run: CIFAR-100 is not in
this project's data (``python -m fewshot.data.get cifar100 --to DIR`` fetches it).
"""

from __future__ import annotations

from fewshot.published.registry import Cell, Entry, Model, Schedule

# Equivalence margins (points), declared on 2026-12-02 before any run: about twice the quoted 95% half-widths, as for
# Snell et al.'s mini-ImageNet cells.
_MARGIN = 1.5
_MODELS = (Model("1-shot", dict(shot=1)), Model("5-shot", dict(shot=5)))
_PROTOCOL = ("Conv4 (64-64-64-64) ProtoNet (squared Euclidean), 5-way 1-shot and 5-shot, CIFAR-100's 32 px images; "
             "the figures as MetaOptNet's Table 2 quotes them, \u00b1 a 95% confidence interval. The cited runs' "
             "training (episode shape, length, augmentation) and test episode count are not in MetaOptNet's text.")
_SCHEDULES = (
    Schedule("published", None, "the cited runs' training is not stated where MetaOptNet quotes the figures",
             unlike=None),
    # Declared on 2026-12-02, before any of its runs: Conv4 at 32 px costs a small fraction of an 84 px episode, so a
    # 2-core CPU trains 10,000 episodes per seed and head in well under an hour (not measured yet: no CIFAR-100 here).
    Schedule("cpu_10000", dict(episodes=10_000, eval_every=500, val_episodes=200), "10,000 episodes, Adam 1e-3, "
             "validated every 500 on 200 episodes, the best checkpoint tested (the cited papers' schedules are not "
             "known here)"),
)
_DIFFERENCES = (
    "Schedule: the cited runs' are not stated where the figures are quoted; `cpu_10000` is fewshot's, declared "
    "before its runs.",
    "Training episodes: 5-way with 15 queries per class, the test's shape; no augmentation (the cited runs' are not "
    "known here).",
    "Images: stored at 36 px (CIFAR's 32 upsampled, bilinear) and centre-cropped to 32, fewshot's evaluation "
    "transform for every image dataset (docs/protocol.md).",
)


def _entry(name: str, dataset: str, label: str, split: str, cells: tuple[Cell, ...], notes: tuple[str, ...] = ()
           ) -> Entry:
  return Entry(
      name=name, source=f"Lee, Maji, Ravichandran & Soatto 2019, Meta-Learning with Differentiable Convex "
      f"Optimization (MetaOptNet), Table 2 ({label}), Prototypical Networks 64-64-64-64", protocol=_PROTOCOL + split,
      dataset=dataset, needs="CIFAR-100's cifar-100-python.tar.gz (or its extracted cifar-100-python/ folder)",
      options=dict(dataset=dataset, class_splits="fewshot", backbone="conv4", classifier="proto",
                   distance="squared_euclidean", way=5, query=15, test_way=5, test_query=15, test_episodes=1000,
                   augment=False, learning_rate=1e-3),
      models=_MODELS, schedules=_SCHEDULES, cells=cells, differences=_DIFFERENCES, notes=notes)


CIFAR_FS = _entry(
    "lee2019_cifar_fs", "cifar_fs", "CIFAR-FS", " CIFAR-FS: Bertinetto et al.'s 64 / 16 / 20 classes; the figures "
    "quoted from Bertinetto et al. 2019.",
    (Cell("5-way 1-shot", "1-shot", dict(test_way=5), 55.5, 0.7, margin=_MARGIN),
     Cell("5-way 5-shot", "5-shot", dict(test_way=5), 72.0, 0.6, margin=_MARGIN)),
    ("Published figures: 55.5 ± 0.7 (1-shot) and 72.0 ± 0.6 (5-shot) as MetaOptNet quotes them; Bertinetto et al.'s "
     "own table was not at hand, so the quote is not checked against it.",))
FC100 = _entry(
    "lee2019_fc100", "fc100", "FC100", " FC100: Oreshkin et al.'s 12 / 4 / 4 superclasses (60 / 20 / 20 classes); "
    "the figures quoted from Oreshkin et al. 2018.",
    (Cell("5-way 1-shot", "1-shot", dict(test_way=5), 35.3, 0.6, margin=_MARGIN),
     Cell("5-way 5-shot", "5-shot", dict(test_way=5), 48.6, 0.6, margin=_MARGIN),
     Cell("5-way 5-shot, TADAM's own (v1 text)", "5-shot", dict(test_way=5), 51.1, 0.2, margin=_MARGIN)),
    ("Published figures: 35.3 ± 0.6 (1-shot) and 48.6 ± 0.6 (5-shot) as MetaOptNet quotes them; TADAM's own text "
     "(its arXiv v1 source, ElementAI/TADAM paper/main.tex) has a Conv4 ProtoNet of its own on FC100, 5-shot only: "
     "51.1 ± 0.2 (5-way training, 500 tasks of 100 queries, 10 restarts), a cell of its own here. The final version's "
     "tables were not at hand, so where MetaOptNet's 35.3 / 48.6 appear in it is not checked.",))
