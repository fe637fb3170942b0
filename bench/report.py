"""Session.to_html: file size, time to write, and open-to-first-graph time in Chromium.

Cases: resnet18 (2 passes), resnet50 (10 passes: 11 steps) and a ~5k-node graph (1 pass).
Baselines measured in the same run: the write time against drawing every step once as
the Explorer first draws it (``render(step.graph).svg``), and the open time against a
page holding only the Explorer's first SVG of the current step (no script). Targets:
resnet50 with 10 steps under 5 MB, open under 1 s.
Run: PYTHONPATH=. .venv/bin/python -P bench/report.py  (-P: bench/profile.py would shadow the stdlib)
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torchvision
from torch import nn

import fxviz
from fxviz.draw.render import render

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
import labdriver  # noqa: E402

OPENS = 5  # page loads per case, interleaved with the baseline's


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm, self.fc1, self.fc2 = nn.LayerNorm(width), nn.Linear(width, width), nn.Linear(width, width)
        self.act = nn.ReLU()

    def forward(self, x):
        h = self.act(self.fc1(self.norm(x)))
        return x + torch.sigmoid(self.fc2(h)) * h - 0.5


def wide_model(stages: int = 25, blocks: int = 25, width: int = 8) -> nn.Module:
    """8 nodes per block: 25 x 25 blocks make a ~5,000-node graph in nested modules."""
    return nn.Sequential(*(nn.Sequential(*(Block(width) for _ in range(blocks))) for _ in range(stages)))


def resnet50_session() -> fxviz.Session:
    """The whole graph at every step: ten passes after the trace (nine one-node fusions,
    as a person clicking through, then lowering the ReLUs)."""
    model = torchvision.models.resnet50(weights=None).eval()
    session = fxviz.Session(model, (torch.randn(1, 3, 64, 64),))
    for bn in ["bn1", "layer1_0_bn1", "layer1_0_bn2", "layer1_0_bn3", "layer2_0_bn1", "layer2_0_bn2",
               "layer3_0_bn1", "layer3_0_bn2", "layer4_0_bn1"]:
        session.apply("fuse_conv_bn", nodes=[bn])
    session.apply("lower_modules")
    return session


def resnet18_session() -> fxviz.Session:
    session = fxviz.Session(torchvision.models.resnet18(weights=None).eval(), (torch.randn(1, 3, 64, 64),))
    session.apply("fuse_conv_bn")
    session.apply("lower_modules")
    return session


def wide_session() -> fxviz.Session:
    session = fxviz.Session(wide_model().eval(), (torch.randn(2, 8),))
    session.apply("lower_modules")
    return session


FIRST_NODE = """new MutationObserver(() => {
  if (!window.__firstNode && document.querySelector("svg g.node")) window.__firstNode = performance.now();
}).observe(document, {subtree: true, childList: true});"""


def open_times(browser, page_path: Path, baseline_path: Path) -> tuple[list[float], list[float], list[float]]:
    """Seconds from navigation to the first graph node in the page (recorded in the page,
    so a busy main thread afterwards does not count), report and baseline interleaved;
    and the report's time until it is fully ready (``data-ready``)."""
    report, baseline, ready = [], [], []
    for _ in range(OPENS):
        for path, selector, out in ((page_path, ".fxviz-report[data-ready]", report),
                                    (baseline_path, "svg g.node", baseline)):
            page = browser.new_page()
            page.route("**/*", lambda route: route.abort() if not route.request.url.startswith(("file:", "blob:"))
                       else route.continue_())
            page.add_init_script(FIRST_NODE)
            start = time.perf_counter()
            page.goto(path.as_uri())
            page.wait_for_selector(selector, timeout=30_000)
            if out is report:
                ready.append(time.perf_counter() - start)
            out.append(page.evaluate("window.__firstNode") / 1000)
            page.close()
    return report, baseline, ready


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} s ({min(xs):.2f}–{max(xs):.2f})"


def main() -> None:
    from playwright.sync_api import sync_playwright

    torch.manual_seed(0)
    cases = {"resnet18, 2 passes": resnet18_session, "resnet50, 10 passes": resnet50_session,
             "~5k nodes, 1 pass": wide_session}
    out = Path(tempfile.mkdtemp(prefix="fxviz-report-bench-"))
    with sync_playwright() as p:
        browser = labdriver.launch_chromium(p)
        for name, make in cases.items():
            session = make()
            for step in session.steps:
                step.check  # checks are part of the report; not part of its writing time here
            start = time.perf_counter()
            draws = [render(step.graph).svg for step in session.steps]
            draw_s = time.perf_counter() - start
            path = out / f"{name.split(',')[0].replace('~', '')}.html"
            start = time.perf_counter()
            session.to_html(path)
            write_s = time.perf_counter() - start
            baseline = out / f"{path.stem}-svg-only.html"
            baseline.write_text(f"<!doctype html><meta charset='utf-8'><body>{draws[session.index]}</body>")
            report_open, base_open, ready = open_times(browser, path, baseline)
            mb = path.stat().st_size / 1e6
            nodes = max(len(s.graph) for s in session.steps)
            print(f"{name:20} nodes {nodes:5d}  size {mb:5.2f} MB ({mb / 5:.2f} of the 5 MB target)  "
                  f"write {write_s:6.2f} s = {write_s / draw_s:5.1f} x drawing each step once ({draw_s:.2f} s)")
            print(f"{'':20} open to first graph {spread(report_open)} = "
                  f"{statistics.median(report_open) / statistics.median(base_open):.1f} x a bare SVG page "
                  f"({spread(base_open)}); target < 1 s; all panels ready {spread(ready)}")
            sys.stdout.flush()
        browser.close()
    print(f"reports in {out}")


if __name__ == "__main__":
    main()
