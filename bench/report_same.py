"""Proof that a change to the report's code left the report the same: write the report of
fixed sessions with one checkout, again with another, then compare the pages.

Sessions: torchvision's resnet18 (weights=None, seeded) with fuse_conv_bn and
lower_modules applied (modules become functions: op colours and FLOPs change between
steps), and bench/scale.py's synthetic graph of 5,000 nodes with replace_op applied
(runs of blocks drawn as ranges). Pages that are not byte-for-byte equal are compared
as what the browser reads: the page around the data, the data, and every blob inflated
(so a different gzip level or mtime is no difference; anything else is, with its path).

Run from the repository root, once per checkout, then compare:
  PYTHONPATH=<checkout> .venv/bin/python -P bench/report_same.py write DIR
  .venv/bin/python -P bench/report_same.py compare DIR_A DIR_B
"""
from __future__ import annotations

import argparse
import base64
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

DATA = re.compile(r'(<script type="application/json" id="fxviz-report-data">)(.*?)(</script>)', re.S)


def sessions() -> dict[str, Any]:
    import torch
    import torchvision

    import fxviz

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import scale

    torch.manual_seed(0)
    resnet = fxviz.Session(torchvision.models.resnet18(weights=None).eval(), (torch.randn(1, 3, 64, 64),))
    resnet.apply("fuse_conv_bn")
    resnet.apply("lower_modules")
    model, inputs, options = scale.synthetic(5_000)
    synthetic = fxviz.Session(model, inputs, **options)
    synthetic.apply("replace_op")
    return {"resnet18": resnet, "synthetic5k": synthetic}


def write(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, session in sessions().items():
        session.to_html(folder / f"{name}.html", title=name)
        print("wrote", folder / f"{name}.html")


def _read(page: str) -> tuple[str, dict[str, Any]]:
    """The page with its data cut out, and the data with every blob inflated."""
    match = DATA.search(page)
    data = json.loads(match.group(2))
    data["blobs"] = [json.loads(gzip.decompress(base64.b64decode(b))) for b in data["blobs"]]
    return page[: match.start(2)] + page[match.end(2):], data


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where ``a`` and ``b`` differ (JSON values), at most a few."""
    if type(a) is not type(b):
        return [f"{path}: {type(a).__name__} != {type(b).__name__}"]
    if isinstance(a, dict):
        if list(a) != list(b):
            return [f"{path}: keys {sorted(set(a) ^ set(b))[:5] or 'in another order'}"]
        return [d for k in a for d in differences(a[k], b[k], f"{path}.{k}")][:5]
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")][:5]
    return [] if a == b else [f"{path}: {str(a)[:80]!r} != {str(b)[:80]!r}"]


def compare(a: Path, b: Path) -> bool:
    same = True
    for page_a in sorted(a.glob("*.html")):
        page_b = b / page_a.name
        text_a, text_b = page_a.read_text(encoding="utf-8"), page_b.read_text(encoding="utf-8")
        if text_a == text_b:
            print(f"{page_a.name}: byte-for-byte the same ({len(text_a):,} characters)")
            continue
        (outer_a, data_a), (outer_b, data_b) = _read(text_a), _read(text_b)
        found = (["the page around the data"] if outer_a != outer_b else []) + differences(data_a, data_b)
        same &= not found
        print(f"{page_a.name}: " + ("; ".join(found) if found else
                                    f"the same once blobs are inflated ({len(text_a):,} vs {len(text_b):,} characters)"))
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("write").add_argument("folder", type=Path)
    both = sub.add_parser("compare")
    both.add_argument("a", type=Path)
    both.add_argument("b", type=Path)
    args = parser.parse_args()
    if args.command == "write":
        write(args.folder)
    else:
        sys.exit(0 if compare(args.a, args.b) else 1)


if __name__ == "__main__":
    main()
