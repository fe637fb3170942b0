"""What capture costs beyond the trace that makes the graph, as ratios measured in one run.

- ``export (joint)`` (a model and its loss as one module) against torch's own joint
  graph: ``torch.export.export`` then ``torch.export.experimental._export_forward_backward``
  (timm lowformer_b0 at 64x64, a 2-block vit_tiny at 32x32; small configs). fxviz adds the
  module paths and backward clusters from AOT autograd's first trace (no trace of its own)
  and the runnable graph; torch traces the joint twice (a first trace, then a flattening one).
- ``tracer="auto"`` on a model torch.export stops at a data-dependent branch (torchvision
  maskrcnn_resnet50_fpn_v2, random weights, one 64x64 image) against ``tracer="dynamo"``,
  the method that opens it: the ratio is what the failing methods cost on top (each
  attempt's seconds are printed); strict export, which would stop where export did, is skipped.

fxviz and the baseline alternate; medians of ``--repeats``. The machine is shared: the load
average is printed; read the ratios, not the seconds.

Run: ``PYTHONPATH=. .venv/bin/python bench/capture_tries.py [--part joint|auto] [--repeats 3]``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable

# bench/profile.py would shadow the standard library's profile module (imported by dynamo).
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import torch  # noqa: E402
from torch import nn  # noqa: E402


class _WithLoss(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model.train()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x).float().pow(2).mean()


def _alternating(ours: Callable[[], object], base: Callable[[], object], repeats: int) -> tuple[float, float]:
    times: dict[str, list[float]] = {"ours": [], "base": []}
    for i in range(repeats):
        for name, fn in ((("ours", ours), ("base", base)) if i % 2 == 0 else (("base", base), ("ours", ours))):
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return statistics.median(times["ours"]), statistics.median(times["base"])


def joint(repeats: int) -> None:
    import timm
    from torch.export import experimental

    import fxviz

    cases = {"lowformer_b0 64x64": (lambda: timm.create_model("lowformer_b0", pretrained=False, num_classes=8), 64),
             "vit_tiny 2 blocks 32x32": (lambda: timm.create_model(
                 "vit_tiny_patch16_224", pretrained=False, num_classes=8, img_size=32, patch_size=8, depth=2), 32)}
    for name, (make, size) in cases.items():
        model, x = _WithLoss(make()), torch.randn(1, 3, size, size)

        def torch_joint() -> object:
            ep = torch.export.export(model, (x,), strict=False)
            return experimental._export_forward_backward(ep, joint_loss_index=0)

        ours, base = _alternating(lambda: fxviz.trace(model, x, tracer="export (joint)"), torch_joint, repeats)
        print(f"{name:26s} export (joint) {ours:6.2f} s   torch's joint {base:6.2f} s   ratio {ours / base:.2f}x",
              flush=True)


def auto(repeats: int) -> None:
    import torchvision

    from fxviz.capture import capture

    model = torchvision.models.detection.maskrcnn_resnet50_fpn_v2(
        weights=None, weights_backbone=None, num_classes=3, min_size=64, max_size=64).eval()
    images = ([torch.randn(3, 64, 64)],)
    tries: list[list[tuple[str, str]]] = []

    def chain() -> None:
        result = capture(model, images, tracer="auto")
        tries.append(result.attempts)

    ours, base = _alternating(chain, lambda: capture(model, images, tracer="dynamo"), repeats)
    print(f"maskrcnn_resnet50_fpn_v2 auto {ours:6.2f} s   dynamo alone {base:6.2f} s   ratio {ours / base:.2f}x")
    for method, why in tries[-1]:
        print(f"  {method}: {why.rsplit(' [', 1)[-1].rstrip(']') if why.endswith(' s]') else why.split(':')[0]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("joint", "auto"), action="append")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    for part in args.part or ("joint", "auto"):
        {"joint": joint, "auto": auto}[part](args.repeats)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
