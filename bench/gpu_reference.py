"""A GPU reference figure, not a contender: the ResNet-50 architecture (random weights, fp32)
in PyTorch on the machine's CUDA GPU, batch 64, images already in GPU memory, so the number is
the GPU's own ceiling for this model. Run where a GPU and PyTorch are present (the project's
GPU machine has no Java, so ONNXModel's CUDA path cannot run there); prints one JSON line.

Usage: python bench/gpu_reference.py [--batch 64] [--batches 50]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn


class Bottleneck(nn.Module):
    def __init__(self, cin: int, mid: int, stride: int) -> None:
        super().__init__()
        cout = mid * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, 3, stride, 1),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, cout, 1),
        )
        self.shortcut = nn.Conv2d(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return torch.relu(y + (x if self.shortcut is None else self.shortcut(x)))


def resnet50() -> nn.Module:
    """The graph bench/models.py builds in ONNX: batch norms folded into the convolutions."""
    layers: list[nn.Module] = [
        nn.Conv2d(3, 64, 7, 2, 3),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    ]
    cin = 64
    for mid, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, mid, stride if i == 0 else 1))
            cin = mid * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--batches", type=int, default=50)
    args = parser.parse_args()
    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    model = resnet50().to(device).eval()
    x = torch.randn(args.batch, 3, 224, 224, device=device)
    with torch.inference_mode():
        for _ in range(5):  # warm-up, cuDNN algorithm search
            model(x)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.batches):
            model(x)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "device": torch.cuda.get_device_name(0),
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "batch": args.batch,
                "images_per_s": args.batch * args.batches / seconds,
            }
        )
    )


if __name__ == "__main__":
    main()
