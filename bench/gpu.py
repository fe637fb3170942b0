"""What fxviz measures on a GPU, as ratios to what the GPU itself reports (run on a CUDA machine).

- Device times that add up: per model, the nodes' ``kernel_us`` summed over the device time
  of an uninstrumented forward (``kernel_sum_ratio``; target 0.9-1.1 on device-bound and
  launch-bound models alike), beside the old host measure (node times summed over the
  plain forward) and how busy the GPU was. Models: torchvision resnet50 fp32 (device-bound),
  timm ViT-B/16 bf16 and a 16-layer Llama bf16 (launch-bound at batch 1).
- Memory: ``Step.memory``'s estimated activation peak over the peak measured around one
  forward (``torch.cuda.max_memory_allocated``; target within 10 %).
- Inductor: ``fxviz.compiled(..., backend="inductor").kernels`` on resnet18: kernels by
  kind, and their times summed over the compiled forward's own device time.

Run: ``PYTHONPATH=. python bench/gpu.py [--only times|memory|inductor]``.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import torch  # noqa: E402

import fxviz  # noqa: E402

DEVICE = "cuda"


def _resnet50():
    import torchvision

    return torchvision.models.resnet50(weights=None).to(DEVICE).eval(), torch.randn(32, 3, 224, 224, device=DEVICE)


def _vit():
    import timm

    model = timm.create_model("vit_base_patch16_224", pretrained=False).to(DEVICE, torch.bfloat16).eval()
    return model, torch.randn(1, 3, 224, 224, device=DEVICE, dtype=torch.bfloat16)


def _llama():
    from transformers import AutoModel, LlamaConfig

    config = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=16, num_attention_heads=16,
                         num_key_value_heads=4, vocab_size=32000, use_cache=False)
    model = AutoModel.from_config(config).to(DEVICE, torch.bfloat16).eval()
    return model, torch.randint(0, 32000, (1, 128), device=DEVICE)


MODELS = {"resnet50 fp32 b32": _resnet50, "ViT-B/16 bf16 b1": _vit, "Llama 16 layers bf16 b1": _llama}


def times() -> None:
    print("== device times: the nodes' kernel_us summed over an uninstrumented forward's device time")
    print(f"{'model':26} {'nodes':>6} {'kernel sum/device fwd':>22} {'host sum/fwd (old)':>19} {'busy':>6}  launch-bound")
    for name, build in MODELS.items():
        model, x = build()
        step = fxviz.Session(model, x).current
        df = step.profile(warmup=3, repeats=10)
        attrs = df.attrs
        print(f"{name:26} {len(df):6d} {attrs['kernel_sum_ratio']:22.3f} "
              f"{df['median_us'].sum() / attrs['plain_forward_us']:19.3f} {attrs['device_busy']:6.2f}  "
              f"{attrs['launch_bound']}", flush=True)


def memory() -> None:
    print("== memory: estimated activation peak over the peak measured around one forward")
    for name, build in MODELS.items():
        model, x = build()
        mem = fxviz.Session(model, x).current.memory
        est, measured = mem.attrs["peak_bytes"], mem.attrs.get("measured_peak_bytes")
        ratio = est / measured if measured else float("nan")
        print(f"{name:26} estimate {est / 2**20:9.1f} MiB  measured {measured / 2**20:9.1f} MiB  "
              f"ratio {ratio:.3f}  peak at {mem.attrs['peak_node']}", flush=True)


def inductor() -> None:
    import torchvision

    print("== inductor: resnet18 b16 compiled, kernels mapped and timed from the device's records")
    model = torchvision.models.resnet18(weights=None).to(DEVICE).eval()
    with torch.no_grad():
        c = fxviz.compiled(model, torch.randn(16, 3, 224, 224, device=DEVICE), backend="inductor")
    kernels = c.kernels
    print(kernels.groupby("kind").agg(kernels=("kernel", "size"), time_us=("time_us", "sum")).to_string())
    fused = (kernels["nodes"].map(len) >= 2).sum()
    total = c.kernel_totals[(0, "forward")]
    print(f"kernels {len(kernels)}, fused (2+ nodes) {fused}; kernel times sum {kernels.time_us.sum():.0f} µs "
          f"over the compiled forward's {total:.0f} µs = {kernels.time_us.sum() / total:.3f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["times", "memory", "inductor"])
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench/gpu.py: skipped, no CUDA device here (its numbers are a GPU's).")
        return
    print(torch.__version__, torch.cuda.get_device_name())
    for part in (times, memory, inductor):
        if args.only in (None, part.__name__):
            part()


if __name__ == "__main__":
    main()
