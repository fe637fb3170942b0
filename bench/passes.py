"""Benchmarks for sessions and passes; ratios against baselines measured in this run.

1. Time of each built-in pass on resnet50 (target: under 100 ms each), with the
   copy-on-write fork every step starts from and a whole ``Session.apply``.
2. Forward time of fused vs unfused resnet18 and resnet50 at batch 1 and 10.
3. Memory of a Session with 10 steps on resnet50 relative to one copy of the model
   (target: under 1.5x): tensors the session added, counted by unique storage.

Run: ``.venv/bin/python bench/passes.py``. Models use ``weights=None``.
"""
from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Callable

import torch
import torchvision

from fxviz import Session, passes
from fxviz._cow import fork
from fxviz.passes import NothingToDo

PASS_TARGET_MS = 100.0
MEMORY_TARGET = 1.5
FORWARD_REPEATS = 5
# One set of parameters per built-in pass, valid on a torchvision ResNet.
PASS_PARAMS = {
    "fuse_conv_bn": {},
    "lower_modules": {"types": ("ReLU", "MaxPool2d", "AdaptiveAvgPool2d")},
    "replace_op": {"old": "add", "new": "mul"},
    "inline_module": {"nodes": ["maxpool"]},
    "eliminate_dead_code": {},
    "channels_last": {},
    "fake_quantize": {"bits": 8},
}
TEN_STEPS = [
    ("lower_modules", {"types": ("ReLU",)}),
    ("fuse_conv_bn", {}),
    ("lower_modules", {"types": ("MaxPool2d",)}),
    ("lower_modules", {"types": ("AdaptiveAvgPool2d",)}),
    ("inline_module", {"nodes": ["fc"]}),
    ("inline_module", {"nodes": ["conv1"]}),
    ("fake_quantize", {"bits": 8}),
    ("replace_op", {"old": "add", "new": "mul"}),
    ("fake_quantize", {"bits": 4, "nodes": ["layer4_2_conv3"]}),
    ("channels_last", {}),
]


def resnet(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return getattr(torchvision.models, name)(weights=None).eval()


def median_s(fn: Callable[[], object], repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_pass_times(session: Session) -> None:
    gm = session.steps[0].gm
    fork_ms = median_s(lambda: fork(gm), repeats=5) * 1e3
    weights = [p.detach() for p in gm.parameters()]
    with torch.no_grad():
        copy_ms = median_s(lambda: [w.clone() for w in weights], repeats=5) * 1e3
    print(f"\n1. pass times on resnet50 ({len(gm.graph.nodes)} nodes), median of 5; "
          f"fork (copy-on-write start of every step): {fork_ms:.1f} ms; baseline: writing one copy of "
          f"the weights ({sum(w.nbytes for w in weights) / 2**20:.0f} MiB) takes {copy_ms:.1f} ms")
    print(f"   {'pass':22s} {'pass ms':>8s} {'/target':>8s} {'/copy':>6s} {'apply ms':>9s}  note")
    for name, params in PASS_PARAMS.items():
        spec = passes.get(name)
        forks = [fork(gm) for _ in range(6)]
        note = ""

        def run_pass() -> None:
            nonlocal note
            try:
                spec(forks.pop(), **params)
            except NothingToDo as exc:
                note = f"nothing to do: {exc}"

        pass_ms = median_s(run_pass, repeats=5) * 1e3
        apply_ms = median_s(lambda: _apply_and_undo(session, name, params), repeats=1, warmup=0) * 1e3
        print(f"   {name:22s} {pass_ms:8.1f} {pass_ms / PASS_TARGET_MS:7.2f}x {pass_ms / copy_ms:5.2f}x "
              f"{apply_ms:9.0f}  {note}")
    print("   (/copy: against writing one copy of the weights, the floor for passes that rewrite them;\n"
          "    apply = fork + pass + lint/recompile + checking outputs on the example input)")


def _apply_and_undo(session: Session, name: str, params: dict) -> None:
    try:
        session.apply(name, **params)
        session.undo()
    except NothingToDo:
        pass


def bench_fused_forward() -> None:
    print(f"\n2. forward time, fused / unfused (224x224, median of {FORWARD_REPEATS} alternating runs)")
    for name in ("resnet18", "resnet50"):
        for batch in (1, 10):
            x = torch.randn(batch, 3, 224, 224)
            session = Session(resnet(name), x, n_random_inputs=0)
            unfused = session.current.gm
            fused = session.apply("fuse_conv_bn").gm
            times = {"unfused": [], "fused": []}
            with torch.no_grad():
                for gm in (unfused, fused):
                    gm(x)  # warm-up
                for _ in range(FORWARD_REPEATS):
                    for label, gm in (("unfused", unfused), ("fused", fused)):
                        start = time.perf_counter()
                        gm(x)
                        times[label].append(time.perf_counter() - start)
            base, new = statistics.median(times["unfused"]), statistics.median(times["fused"])
            print(f"   {name} batch {batch:2d}: unfused {base * 1e3:7.1f} ms, fused {new * 1e3:7.1f} ms, "
                  f"ratio {new / base:.2f}")


def storages(tensors) -> dict[int, int]:
    """Bytes per unique storage."""
    return {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}


def bench_memory() -> None:
    model = resnet("resnet50")
    model_bytes = sum(storages([*model.parameters(), *model.buffers()]).values())
    session = Session(model, torch.randn(1, 3, 64, 64), n_random_inputs=0)
    for name, params in TEN_STEPS:
        session.apply(name, **params)
    gc.collect()
    owned = {}
    by_step = []
    seen = set(storages([*model.parameters(), *model.buffers()]))
    for step in session.steps:
        step_storages = storages([*step.gm.parameters(), *step.gm.buffers()])
        new = {k: v for k, v in step_storages.items() if k not in seen and k not in owned}
        owned.update(new)
        by_step.append((step.pass_name, sum(new.values())))
    added = sum(owned.values())
    print(f"\n3. memory of a Session with {len(session.steps) - 1} steps on resnet50 "
          f"(model: {model_bytes / 2**20:.0f} MiB of parameters and buffers)")
    for i, (name, nbytes) in enumerate(by_step):
        print(f"   step {i:2d} {name:20s} adds {nbytes / 2**20:7.1f} MiB")
    ratio = added / model_bytes
    print(f"   tensors the session added: {added / 2**20:.0f} MiB = {ratio:.2f}x the model "
          f"(target under {MEMORY_TARGET}x); a deepcopy per step would be {len(session.steps) - 1:.0f}x")
    rewritten = sum(n for name, n in by_step if name in ("fuse_conv_bn", "channels_last"))
    print(f"   of which fuse_conv_bn and channels_last, which rewrite the conv weights: "
          f"{rewritten / model_bytes:.2f}x; all other steps: {(added - rewritten) / model_bytes:.3f}x")


def main() -> None:
    torch.manual_seed(0)
    load = os.getloadavg()[0]
    busy = " (busy machine: absolute times inflated, compare ratios)" if load > os.cpu_count() else ""
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, "
          f"load average {load:.1f}{busy}")
    bench_pass_times(Session(resnet("resnet50"), torch.randn(1, 3, 224, 224), n_random_inputs=0))
    bench_fused_forward()
    bench_memory()


if __name__ == "__main__":
    main()
