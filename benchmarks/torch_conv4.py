"""Reference eager-PyTorch episode trainer: Conv4 + ProtoNet (softmax or DR head), Adam.

Used only by ``benchmarks/bench_episodes.py`` to time the same episode as
``fewshot.episodic.learning.train_chunk`` the way the paper's reference code runs it
(CloserLookFewShot style, eager mode, one episode per optimiser step). Not a dependency
of the ``fewshot`` package; ``import torch`` happens here only.

Per episode: draw the classes and images on the host with numpy from a uint8 tensor
already in memory (resident, like the JAX side's ``DeviceSource``), gather, convert to
float in [0, 1], forward support + query together (one set of BatchNorm statistics),
prototype logits, cross-entropy, backward, Adam step. With ``crop`` (the stored images
larger, as the image datasets store int(1.15·size)), each drawn image is first augmented as
the paper's training transform does (``fewshot.augment``): a random resized crop (scale
0.08-1, ratio 3/4-4/3, bilinear) to ``crop``, a horizontal flip half the time, brightness,
contrast and saturation jitter of 0.4, ImageNet normalisation; eager, image by image.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

RHO_INIT = 2.0
DR_EPS = 1e-10


def conv_block(in_channels: int, out_channels: int) -> nn.Sequential:
  conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=True)
  # Reference init (CloserLook init_layer): N(0, 2 / (k*k*out_channels)); BN gamma 1, beta 0.
  nn.init.normal_(conv.weight, 0.0, math.sqrt(2.0 / (3 * 3 * out_channels)))
  bn = nn.BatchNorm2d(out_channels, eps=1e-5, momentum=0.1)
  return nn.Sequential(conv, bn, nn.ReLU(inplace=True), nn.MaxPool2d(2))


class Conv4(nn.Module):
  """4 × [Conv 3×3 (64, pad 1, bias) → BatchNorm2d → ReLU → MaxPool2d(2)], flattened."""

  def __init__(self, in_channels: int, features: int = 64, depth: int = 4):
    super().__init__()
    blocks, c = [], in_channels
    for _ in range(depth):
      blocks.append(conv_block(c, features))
      c = features
    self.trunk = nn.Sequential(*blocks)

  def forward(self, x: torch.Tensor) -> torch.Tensor:
    return self.trunk(x).flatten(1)


class ProtoNet(nn.Module):
  """Conv4 embedding + prototype head, softmax (−d²) or distance-ratio (−e^ρ·log √(d²+ε))."""

  def __init__(self, in_channels: int, head: str = "softmax"):
    super().__init__()
    if head not in ("softmax", "dr"):
      raise ValueError(f"Unknown head {head!r}; choose softmax or dr.")
    self.head = head
    self.backbone = Conv4(in_channels)
    self.rho = nn.Parameter(torch.tensor(RHO_INIT))  # unused (no gradient) by the softmax head

  def logits(self, images: torch.Tensor, way: int, shot: int) -> torch.Tensor:
    """Query logits; ``images`` is [way*(shot+query), C, H, W] class-major, support first per class."""
    n_support = way * shot
    z = self.backbone(images)
    support, query = z[:n_support], z[n_support:]
    prototypes = support.view(way, shot, -1).mean(1)
    sq = (query.pow(2).sum(1, keepdim=True) + prototypes.pow(2).sum(1)[None, :] - 2.0 * query @ prototypes.T).clamp_min(0.0)
    if self.head == "softmax":
      return -sq
    return -torch.exp(self.rho) * torch.log(torch.sqrt(sq + DR_EPS))


IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def augment(x: torch.Tensor, crop: int, rng: np.random.Generator) -> torch.Tensor:
  """The paper's training transform on float images ``[n, C, H, W]`` in [0, 1], image by image."""
  n, channels, height, width = x.shape
  out = []
  for image in x:
    area = height * width * rng.uniform(0.08, 1.0)
    aspect = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
    h = min(height, max(1, int(round(math.sqrt(area / aspect)))))
    w = min(width, max(1, int(round(math.sqrt(area * aspect)))))
    top, left = rng.integers(0, height - h + 1), rng.integers(0, width - w + 1)
    image = F.interpolate(image[None, :, top : top + h, left : left + w], size=(crop, crop), mode="bilinear",
                          align_corners=False)[0]
    if rng.random() < 0.5:
      image = image.flip(-1)
    image = image * rng.uniform(0.6, 1.4)
    luma = torch.tensor((0.299, 0.587, 0.114)[:channels] if channels == 3 else (1.0,))[:, None, None]
    grey = (image * luma).sum(0, keepdim=True)
    image = (image - grey.mean()) * rng.uniform(0.6, 1.4) + grey.mean()
    image = (image - grey) * rng.uniform(0.6, 1.4) + grey
    out.append(image.clamp(0.0, 1.0))
  mean = torch.tensor(IMAGENET_MEAN[:channels])[:, None, None]
  std = torch.tensor(IMAGENET_STD[:channels])[:, None, None]
  return (torch.stack(out) - mean) / std


class EpisodeTrainer:
  """Episodes drawn on the host from a resident uint8 tensor; one Adam step per episode."""

  def __init__(self, images: np.ndarray, labels: np.ndarray, way: int, shot: int, query: int,
               head: str = "softmax", device: str = "cpu", seed: int = 0, crop: int | None = None):
    torch.manual_seed(seed)
    self.crop = crop
    self.rng = np.random.default_rng(seed)
    self.device = torch.device(device)
    # uint8 [N, H, W, C] -> resident uint8 [N, C, H, W]
    self.images = torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2))).to(self.device)
    counts = np.bincount(labels)
    self.offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
    self.counts = counts
    self.way, self.shot, self.query = way, shot, query
    self.model = ProtoNet(images.shape[-1], head).to(self.device)
    self.model.train()
    self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    self.query_labels = torch.arange(way, device=self.device).repeat_interleave(query)

  def sample_indices(self) -> np.ndarray:
    """[way*(shot+query)] image indices laid out support (class-major) then query (class-major)."""
    per_class = self.shot + self.query
    classes = self.rng.choice(len(self.counts), self.way, replace=False)
    idx = np.stack([self.offsets[c] + self.rng.choice(self.counts[c], per_class, replace=False) for c in classes])
    return np.concatenate([idx[:, : self.shot].reshape(-1), idx[:, self.shot :].reshape(-1)])

  def step(self) -> torch.Tensor:
    idx = torch.from_numpy(self.sample_indices()).to(self.device)
    x = self.images[idx].float().div_(255.0)
    if self.crop is not None:
      x = augment(x, self.crop, self.rng)
    logits = self.model.logits(x, self.way, self.shot)
    loss = F.cross_entropy(logits, self.query_labels)
    self.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    self.optimizer.step()
    return loss

  def run(self, num_episodes: int) -> float:
    """Train on ``num_episodes`` episodes and return the last loss (synchronises the device)."""
    loss = None
    for _ in range(num_episodes):
      loss = self.step()
    if self.device.type == "cuda":
      torch.cuda.synchronize()
    return float(loss.detach())
