"""How much device memory each split of the image datasets takes, and where it is meant to live while training.

A split stays resident on the device when its images fit the budget (``catalog.fits_on_device``:
sampling then never leaves the device); a larger one stays in host memory and streams to the
device (:class:`fewshot.training.sources.HostSource`). :func:`fewshot.training.sources.place` applies the same rule
to a loaded split; this module answers the question before any data is read.
"""

from __future__ import annotations

import dataclasses

from fewshot.data import catalog

# Bytes of each split of the real datasets at the stored size (default class
# order), and where it is meant to live while training: resident on the device
# when it fits a budget (sampling then never leaves the device), else in host
# memory, streamed to the device batch by batch.
#
#   dataset        class_splits  split   images   at 84 (96 px)   at 224 (257 px)
#   cub            fewshot   train    5,885    163 MB device   1.17 GB device
#                            val      2,950     82 MB device    585 MB device
#                            test     2,953     82 MB device    585 MB device
#   cub            dml       train    5,864    162 MB device   1.16 GB device
#                            test     5,924    164 MB device   1.17 GB device
#   mini_imagenet  fewshot   train   38,400   1.06 GB device   7.61 GB host
#                            val      9,600    265 MB device   1.90 GB device
#                            test    12,000    332 MB device   2.38 GB device
#   cars196        dml       train    8,054    223 MB device   1.60 GB device
#                            test     8,131    225 MB device   1.61 GB device
#   sop            dml       train   59,551   1.65 GB device  11.80 GB host
#                            test    60,502   1.67 GB device  11.99 GB host
#   cifar_fs       fewshot   train   38,400   at 32 (36 px): 149 MB device (val 9,600: 37 MB; test 12,000: 47 MB)
#   fc100          fewshot   train   36,000   at 32 (36 px): 140 MB device (val and test 12,000: 47 MB each)
#   (MB, GB = 10^6, 10^9 bytes; budget DEVICE_BUDGET_BYTES = 4 GiB per split.
#   CUB's fewshot counts are those of Chen et al.'s base / val / novel files. The image counts are each dataset's
#   row's split_images, catalog.SPECS.)


@dataclasses.dataclass(frozen=True)
class SplitPlan:
  num_images: int
  stored_size: int
  nbytes: int
  placement: str  # 'device': resident on the accelerator; 'host': streamed from host memory


def memory_plan(dataset: str, image_size: int = catalog.DEFAULT_IMAGE_SIZES["conv4"], *, class_splits: str | None = None,
                split_images: dict[str, int] | None = None,
                device_budget_bytes: int = catalog.DEVICE_BUDGET_BYTES) -> dict[str, SplitPlan]:
  """{split: SplitPlan} for ``dataset`` at model input ``image_size`` (stored at int(1.15 * image_size)).

  ``split_images`` gives the image count of each split (e.g. ``Prepared.num_images``
  of the chosen classes); by default the real dataset's, in the default order.
  """
  class_splits = catalog.resolve(dataset, image_size=image_size, class_splits=class_splits).class_splits
  size = catalog.stored_size(image_size)
  counts = catalog.SPECS[dataset].split_images[class_splits] if split_images is None else split_images
  plan = {}
  for split, n in counts.items():
    nbytes = int(n) * 3 * size ** 2
    plan[split] = SplitPlan(int(n), size, nbytes, "device" if catalog.fits_on_device(nbytes, device_budget_bytes) else "host")
  return plan
