"""Musgrave, Belongie & Lim 2020, A Metric Learning Reality Check (ECCV), the accuracy tables of its supplement:
MAP@R of the separated 128-d embeddings (mean ± 95% interval over its runs) on CUB200, Cars196 and SOP.

Not comparable with fewshot's metric learning: the published protocol fine-tunes an ImageNet-pretrained
BN-Inception trunk (with a 128-d embedder), where fewshot trains its backbones from scratch and loads no pretrained
weights. The entries hold the published numbers so the page can say so beside them; ``python -m fewshot.dml.train``
runs the same losses, miners and metrics from scratch.
"""

from __future__ import annotations

from fewshot.published.registry import Cell, Entry, Model, Schedule

_WHY = ("the published protocol fine-tunes an ImageNet-pretrained BN-Inception trunk; fewshot trains from scratch "
        "and loads no pretrained weights")
_LOSSES = ("Contrastive", "Triplet", "N. Softmax")


def _entry(dataset: str, label: str, map_at_r: tuple[tuple[float, float], ...], needs: str) -> Entry:
  return Entry(
      name=f"musgrave2020_{dataset}", source=f"Musgrave, Belongie & Lim 2020, A Metric Learning Reality Check, "
      f"accuracy on {label} (separated 128-d)", protocol="BN-Inception pretrained on ImageNet, 128-d embedding, "
      "4-fold class-disjoint cross-validation on the first half of the classes, tested on the second half; MAP@R.",
      dataset=dataset, needs=needs, options=dict(dataset=dataset), models=(Model("bn-inception", {}),),
      schedules=(Schedule("published", {}, "the paper's", unlike=None),),
      cells=tuple(Cell(f"{loss} MAP@R", "bn-inception", {}, value, ci95, measure="map_at_r")
                  for loss, (value, ci95) in zip(_LOSSES, map_at_r)),
      differences=(), arms={}, not_comparable=_WHY, kind="dml")


CUB = _entry("cub", "CUB200", ((21.18, 0.28), (18.75, 0.15), (20.96, 0.11)), "CUB_200_2011")
CARS196 = _entry("cars196", "Cars196", ((17.24, 0.35), (15.82, 0.36), (18.73, 0.20)), "Cars196")
SOP = _entry("sop", "SOP", ((40.37, 0.28), (37.70, 0.38), (42.35, 0.16)), "Stanford Online Products")
