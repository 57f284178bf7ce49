"""Where each dataset's files come from, pinned: one place for every source, size and checksum.

Each :class:`Remote` is one file as its publisher serves it: its name in the data folder, its size in bytes, its
SHA-256 (or the MD5 its source publishes: CIFAR-100's), the URLs to try in order, and where the checksum comes from. Sizes and
SHA-256s are those TensorFlow Datasets pins for the same files (``tensorflow_datasets/url_checksums/*.txt`` and
``datasets/stanford_online_products/checksums.tsv`` of tensorflow-datasets 4.9.10); the Omniglot background-small
zips' were checked against the official archives kept in this project's data (md5 e704a628… and b75a71a5…, the
Omniglot repository's own). ``all_runs.zip`` (Lake et al.'s one-shot runs) has no published checksum: it is checked
by its structure (20 runs of 20 items each, :func:`fewshot.episodic.lake.read_runs`' rules) and its SHA-256 is
recorded beside it on first fetch.

:mod:`fewshot.data.fetch` downloads and verifies them; ``python -m fewshot.data.get NAME --to DIR`` is the command.
"""

from __future__ import annotations

import dataclasses

_TFDS = "tensorflow-datasets 4.9.10's url_checksums"
_OMNIGLOT = "https://github.com/brendenlake/omniglot/raw/master/python/"


@dataclasses.dataclass(frozen=True)
class Remote:
  """One file of a dataset: ``name`` in the data folder, ``size`` bytes, ``sha256`` (None: checked otherwise, see
  ``check``), the ``urls`` tried in order, and where the pin comes from.
  """

  name: str
  size: int | None
  sha256: str | None
  urls: tuple[str, ...]
  pinned_by: str
  check: str = "sha256"  # or "md5": the checksum its publisher gives; "lake_runs": none published, the structure is checked
  md5: str | None = None

  @property
  def pin(self) -> str:
    """What a verified file's marker records: its checksum, or "structure" where its structure was checked."""
    return self.md5 if self.check == "md5" else self.sha256 or "structure"


@dataclasses.dataclass(frozen=True)
class Dataset:
  """A dataset's files and the manual route: the official page and which file goes where."""

  files: tuple[Remote, ...]
  manual: str


DATASETS: dict[str, Dataset] = {
    "omniglot": Dataset(
        files=(
            Remote("images_background.zip", 9_464_212,
                   "ad41ab679c8b5d90b271ef46be6987cc81211774a695c29dcc5367b2b26ee640",
                   (_OMNIGLOT + "images_background.zip",), _TFDS),
            Remote("images_evaluation.zip", 6_462_886,
                   "1f61a8f3366785b057fc117d9228e78a16e3d976c8953b2a10fcc74cf0609cee",
                   (_OMNIGLOT + "images_evaluation.zip",), _TFDS),
            Remote("images_background_small1.zip", 1_319_022,
                   "f38eb80f801274ac2b4dff5b24289016bfaba4a7d5bb50deebf27104ad6cb8a4",
                   (_OMNIGLOT + "images_background_small1.zip",), _TFDS + "; the official archive's"),
            Remote("images_background_small2.zip", 1_580_917,
                   "3ccaa407515a8778e5d0861875af38b17e418f301ad5bb3b5a6b65d901a41c7f",
                   (_OMNIGLOT + "images_background_small2.zip",), _TFDS + "; the official archive's"),
            Remote("all_runs.zip", None, None, (_OMNIGLOT + "one-shot-classification/all_runs.zip",),
                   "no published checksum: its 20 runs are checked", check="lake_runs"),
        ),
        manual="the Omniglot repository, github.com/brendenlake/omniglot, folder python/ (all_runs.zip in "
               "python/one-shot-classification/): put the zips in the folder as they are"),
    "cub": Dataset(
        files=(Remote("CUB_200_2011.tgz", 1_150_585_339,
                      "0c685df5597a8b24909f6a7c9db6d11e008733779a671760afef78feb49bf081",
                      ("https://data.caltech.edu/records/65de6-vp158/files/CUB_200_2011.tgz?download=1",
                       "https://drive.google.com/uc?export=download&id=1hbzc_P1FuxMkcabkgn9ZKinBwW683j45"), _TFDS),),
        manual="Caltech's data repository, data.caltech.edu record 65de6-vp158 (CUB-200-2011): put CUB_200_2011.tgz "
               "in the folder as it is"),
    "cars196": Dataset(
        files=(
            Remote("cars_train.tgz", 979_269_282, "512b227b30e2f0a8aab9e09485786ab4479582073a144998da74d64b801fd288",
                   ("http://ai.stanford.edu/~jkrause/car196/cars_train.tgz",), _TFDS),
            Remote("cars_test.tgz", 977_350_468, "bffea656d6f425cba3c91c6d83336e4c5f86c6cffd8975b0f375d3a10da8e243",
                   ("http://ai.stanford.edu/~jkrause/car196/cars_test.tgz",), _TFDS),
            Remote("car_devkit.tgz", 330_960, "b97deb463af7d58b6bfaa18b2a4de9829f0f79e8ce663dfa9261bf7810e9accd",
                   ("https://ai.stanford.edu/~jkrause/cars/car_devkit.tgz",), _TFDS),
            Remote("cars_test_annos_withlabels.mat", 185_758,
                   "790f75be8ea34eeded134cc559332baf23e30e91367e9ddca97d26ed9b895f05",
                   ("http://ai.stanford.edu/~jkrause/car196/cars_test_annos_withlabels.mat",), _TFDS),
        ),
        manual="the Stanford Cars page, ai.stanford.edu/~jkrause/cars/car_dataset.html (often offline; the same four "
               "files are mirrored on dataset hubs): put cars_train.tgz, cars_test.tgz, car_devkit.tgz and "
               "cars_test_annos_withlabels.mat in the folder as they are"),
    "sop": Dataset(
        files=(Remote("Stanford_Online_Products.zip", 3_083_860_082,
                      "b04fa78210e69fab050ce73939550e1cd0f96890bdd98ec9fee732c3b756ef48",
                      ("ftp://cs.stanford.edu/cs/cvgl/Stanford_Online_Products.zip",), _TFDS),),
        manual="the Stanford Online Products page, cvgl.stanford.edu/projects/lifted_struct: put "
               "Stanford_Online_Products.zip in the folder as it is"),
    "cifar100": Dataset(
        files=(Remote("cifar-100-python.tar.gz", 169_001_437, None,
                      ("https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",),
                      "the md5 the CIFAR page publishes", check="md5", md5="eb9058c3a382ffc7106e4002c42a8d85"),),
        manual="the CIFAR page, www.cs.toronto.edu/~kriz/cifar.html (CIFAR-100, python version): put "
               "cifar-100-python.tar.gz in the folder as it is (read as --dataset cifar_fs or fc100)"),
}


# The readers' display names of the datasets the command fetches (fewshot.data.readers.*.NAME).
_BY_DISPLAY_NAME = {"CIFAR-100": "cifar100", "cifar_fs": "cifar100", "fc100": "cifar100", "omniglot": "omniglot", "Omniglot": "omniglot", "CUB-200-2011": "cub", "cub": "cub",
                    "Cars196": "cars196", "cars196": "cars196", "Stanford Online Products": "sop", "sop": "sop"}


def fetch_hint(dataset: str) -> str:
  """What a missing or incomplete data folder's error adds: the command that fetches (or builds) the dataset."""
  if dataset in ("mini-ImageNet", "mini_imagenet"):
    return (" (python -m fewshot.data.get mini_imagenet --from ILSVRC/train --to DIR builds it from your own "
            "ILSVRC-2012)")
  key = _BY_DISPLAY_NAME.get(dataset)
  return f" (python -m fewshot.data.get {key} --to DIR fetches it)" if key else ""
