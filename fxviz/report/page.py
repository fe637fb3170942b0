"""A Session as one self-contained HTML page: readable, clickable, shareable, no kernel.

The page hosts the Explorer's own graph view and node table (their ES modules and CSS
from :mod:`fxviz.present.assets`, as the widgets load them; no ipywidgets or anywidget is
imported) on a small in-page model (``widgets/report_host.js``), with the
drawings of :mod:`fxviz.report.views`, each step's node details, code, check result and
(when measured) timings, and the code diff between any two steps. Nothing is fetched:
scripts, styles and data are inline; heavy data (drawings, code, diffs) is gzip+base64
and inflated by the browser (``DecompressionStream``) when first shown.

Every user string reaches the page as JSON (``<``, ``>``, ``&`` escaped, so it cannot
close the script element) and enters the DOM with ``textContent``; SVG goes through the
graph view's own sanitiser.

Node details, check badges and timing tables arrive as the strings of
:mod:`fxviz.present.presentation`, the Explorer's own; the page renders them as given.

Policy: the report writes what is known. A step's check appears when it has run (the
Explorer runs checks in the background) and reads "not checked yet" otherwise, unless
``check=True`` runs it: a check is the reference model and the step on several inputs,
which on a large model is most of the report's time (18 of 22 s on a 48-layer decoder).
Likewise timings appear only for steps already profiled (by the Explorer or
``step.profile()``) unless ``profile=True`` measures the others.
"""
from __future__ import annotations

import base64
import contextlib
import gzip
import html
import json
import pathlib
import re
from collections.abc import Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

from fxviz._torch_internals.unlift import code_text
from fxviz.present import assets

from fxviz.draw import colour_modes

from fxviz.present import presentation
from fxviz.background._gc import gc_paused
from fxviz.present.chart import chart_svg
from fxviz.present.columns import Columns
from fxviz.errors import FxvizError, UsageError
from fxviz.present.node_table import COLUMNS, values
from fxviz.present.overview import graph_overview
from fxviz.present.presentation import NodeTime, check_text, node_times
from fxviz.report.kernels import kernels_section
from fxviz.report.views import WORKERS, box_places, draw_all, variant_record

TOP_NODES = 15  # rows of each step's timing table and chart
NODE_KEYS = ("name", "op", "target", "module_path", "shape")  # the graph view's columns of the node table's

def write_html(session: Any, path: str | pathlib.Path, *, title: str | None = None, profile: bool = False,
               check: bool = False, max_views: int | None = None) -> pathlib.Path:
    """Write the report of ``session`` to ``path`` (see the module doc); returns the path.
    ``check``: run the checks not run yet (default: show those run, say the others were not).
    ``max_views``: pre-drawn focused views per step (None: :data:`~fxviz.report.views.VIEWS`, or
    more while they total under :data:`~fxviz.report.views.SMALL_BOXES` boxes; see :mod:`fxviz.report.views`)."""
    out = pathlib.Path(path)
    if not out.parent.is_dir():  # said before the page is made (seconds on a large session), not after
        raise UsageError(f"Cannot write the report to {str(out)!r}: the folder {str(out.parent)!r} does not exist. "
                         "What to do: create it, or pass a path in an existing folder.")
    with gc_paused():  # the records of every node of every step: collections would rescan them (7x at 30k nodes)
        page = report_html(session, title=title, profile=profile, check=check, max_views=max_views)
    try:
        out.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"Cannot write the report to {str(out)!r}: {exc.strerror or exc}. What to do: pass "
                         "a path you can write to.") from exc
    return out


def report_html(session: Any, *, title: str | None = None, profile: bool = False, check: bool = False,
                max_views: int | None = None) -> str:
    """The report page as a string."""
    folder = assets.folder()
    steps = session.steps
    name = title or type(steps[0].gm).__name__
    # dot lays out the drawings and zlib compresses blobs while the page is made
    with _threads(WORKERS) as layouts, _threads(1) as compress:
        blobs = _Blobs(compress)
        views = draw_all((s.graph for s in steps), max_views, layouts)
        variants = blobs.reserve(len(views.variants))  # the drawings first, as they are added
        data = {
            "title": name,
            "current": session.index,
            "columns": COLUMNS,
            "color_modes": [colour_modes.mode(None).view()],  # its drawings are coloured by op
            "steps": [_step(s, session.index, views.per_step[s.index], variants, blobs, profile, check,
                            session.capture) for s in steps],
            "diffs": {f"{a.index},{b.index}": blobs.add(session.compare(a.index, b.index).code_diff)
                      for a in steps for b in steps if a is not b},
        }
        for i, rendering, svg in zip(variants, views.variants, views.svgs()):
            blobs.put(i, variant_record(rendering, svg))
        data["blobs"] = blobs.items()
    host = assets.join(assets.REPORT_HOST, folder)
    styles = "\n".join(assets.text(file, folder) for file in ("graph_view.css", "table_view.css", "report.css"))
    if "</script" in host.lower():
        raise FxvizError("report_host.js must not contain '</script': it is inlined in the page.")
    return "\n".join([
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(name)} · fxviz report</title>",
        '<link rel="icon" href="data:,">',
        f"<style>{styles}</style></head>",
        '<body><div id="fxviz-report" class="fxviz-report">Loading the report…</div>',
        kernels_section(steps[0].gm),  # a graph inductor compiled: its kernels, code and times
        f'<script type="application/json" id="fxviz-report-data">{_json(data)}</script>',
        f'<script type="application/json" id="fxviz-graph-view-esm">{_json(assets.join(assets.GRAPH_VIEW, folder))}</script>',
        f'<script type="application/json" id="fxviz-table-view-esm">{_json(assets.join(assets.TABLE_VIEW, folder))}</script>',
        f'<script type="module">{host}</script>',
        "</body></html>",
    ])


@contextlib.contextmanager
def _threads(workers: int) -> Iterator[ThreadPoolExecutor]:
    """A thread pool that drops the work not yet started when the block fails: an export
    that fails fails at once, not after dot has laid out every drawing."""
    pool = ThreadPoolExecutor(workers)
    try:
        yield pool
    finally:
        pool.shutdown(cancel_futures=True)


def _json(value: Any) -> str:
    """JSON that cannot end the <script> element holding it."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


class _Blobs:
    """Heavy values, each stored once as gzip+base64 JSON; referenced by index. zlib lets
    go of the GIL: each value is compressed in ``pool`` while the page goes on."""

    def __init__(self, pool: Executor) -> None:
        self.pool = pool
        self._items: list[Future[str] | None] = []

    def add(self, value: Any) -> int:
        (index,) = self.reserve(1)
        self.put(index, value)
        return index

    def reserve(self, count: int) -> range:
        """Indices for values known later (:meth:`put`)."""
        self._items += [None] * count
        return range(len(self._items) - count, len(self._items))

    def put(self, index: int, value: Any) -> None:
        if isinstance(value, Columns):  # encoded already, or once for all its uses
            self._items[index] = self.pool.submit(_gzip64, value.json().encode())
            return
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except ValueError:  # NaN or infinity, which JSON lacks (looked for only when there is one)
            text = json.dumps(_no_nan(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        self._items[index] = self.pool.submit(_gzip64, text.encode())

    def items(self) -> list[str]:
        """Every value as gzip+base64 text, once all are put and compressed."""
        return [item.result() for item in self._items]


def _gzip64(raw: bytes) -> str:
    """zlib's level 4: half the time of its default (6; 17 against 8 ms on a 24-layer decoder's
    1.2 MB of blobs) for a page 3 % larger; 9 takes 3x as long as 6 for a page 1-4 % smaller."""
    return base64.b64encode(gzip.compress(raw, compresslevel=4, mtime=0)).decode("ascii")


def _no_nan(value: Any) -> Any:
    """``value`` with None for every NaN or infinity in it."""
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_no_nan(v) for v in value]
    return _finite(value) if isinstance(value, float) else value


def _step(step: Any, current: int, views: dict[str, int], variants: list[int], blobs: _Blobs,
          profile: bool, check: bool, capture: Any) -> dict[str, Any]:
    graph = step.graph
    code = code_text(step.gm).lstrip("\n")  # torch.fx starts its code with blank lines
    table = step.measured_profile
    if table is None and profile:
        table = step.profile(budget_s=1.0)  # the Explorer's setting
    times = node_times(table)
    every = Columns(values(graph))  # the graph view's and the node table's columns, made and encoded once
    return {
        "index": step.index,
        "pass_name": step.pass_name,
        "params": ", ".join(f"{k}={v!r}" for k, v in step.params.items()),
        "selection": list(step.nodes),
        "undone": step.index > current,
        "check": _check(step.check if check or step.check_done else None),
        "n_nodes": len(graph),
        "views": {focus: variants[i] for focus, i in views.items()},
        "nodes": _nodes(every, times),
        "details": blobs.add(_details(graph, times)),
        "overview": graph_overview(graph, capture),  # Details while no node is selected
        "boxes": box_places(graph),  # calls and loops: where a node's box is not its module's
        "rows": blobs.add(presentation.table_rows(graph, table, every)),  # column by column, as the table reads them
        "code": blobs.add(code),
        "lines": _node_lines(code, graph),
        "timing": None if table is None else _timing(table, blobs),
    }


def _node_lines(code: str, graph: Any) -> dict[str, int]:
    """1-based line where each node is computed, as the Code tab marks it (its assignment,
    ``def forward`` for inputs, ``return`` for the output), in one pass over the code:
    a search per node would be quadratic on graphs of thousands of nodes."""
    assigned: dict[str, int] = {}
    special: dict[str, int] = {}
    for number, line in enumerate(code.splitlines(), start=1):
        match = re.match(r"\s*(\w+) = |\s*(def forward\(|return\b)", line)
        if match and match.group(1):
            assigned.setdefault(match.group(1), number)
        elif match:
            special.setdefault("output" if match.group(2) == "return" else "placeholder", number)
    return {n: line for n, a in graph.nodes(data=True)
            if (line := special.get(a["op"]) if a["op"] in ("placeholder", "output") else assigned.get(n))}


def _finite(x: float) -> float | None:
    """JSON has no NaN or infinity: None stands for them."""
    return x if x == x and abs(x) != float("inf") else None


def _check(check: Any) -> dict[str, Any]:
    """A step's check for its badge (``text`` and ``slug``, its class, as
    :mod:`fxviz.present.presentation` words them); None: not run when the report was written."""
    status = presentation.NOT_CHECKED if check is None else check.status
    found = {"status": status, "text": check_text(check), "slug": presentation.CHECK_CLASSES.get(status, "mismatch")}
    if check is None:
        return found | {"max_abs": None, "max_rel": None,
                        "message": "The check had not run when this report was written: to_html(path, check=True) runs it."}
    return found | {"message": check.message, "max_abs": _finite(check.max_abs), "max_rel": _finite(check.max_rel)}


def _nodes(every: Columns, times: dict[str, NodeTime]) -> dict[str, Any]:
    """The graph view's node records (tooltip and search) as it reads them (``nodesOf``):
    the node table's columns ``every`` it shows, and each node's time."""
    nodes = every.pick(NODE_KEYS)
    nodes.columns["time"] = [presentation.time_text(times.get(n)) for n in every.columns["name"]]
    return nodes.encoded()


def _details(graph: Any, times: dict[str, NodeTime]) -> Columns:
    """What the Explorer's Details tab says about each node (:func:`fxviz.present.presentation.node_details`)
    and its inputs and users, column by column (``detailsByName`` in report_panels.js reads them): a
    dict per node, each label repeated, made 1 MB of JSON for a 24-layer decoder (0.26 MB so)."""
    names = list(graph)
    inputs = [[[f"{use}: {p}", p] for p in graph.predecessors(n) for use in graph.edges[p, n]["uses"]] for n in names]
    return Columns(presentation.node_details(graph, names, times, untimed="not profiled")
                   | {"inputs": inputs, "users": [list(graph.successors(n)) for n in names]}, len(names))


def _timing(table: Any, blobs: _Blobs) -> dict[str, Any]:
    """The step's slowest nodes as a table of display strings and a chart (matplotlib
    SVG, the Timing tab's), and its totals."""
    from fxviz.timing.profiling import plot_profile

    top = table.nlargest(TOP_NODES, "median_us")
    columns = ["node", "op", "target", "median_us", "p25_us", "p75_us", "share"]
    rows = [[presentation.timing_cells(r[c]) for c in columns] for _, r in top.iterrows()]
    attrs = table.attrs
    chart = chart_svg(lambda ax: plot_profile(table, top=TOP_NODES, ax=ax), min(TOP_NODES, len(table)))
    return {
        "columns": columns, "rows": rows,
        "summary": (f"forward {attrs.get('plain_forward_us', float('nan')):.1f} µs unprofiled, "
                    f"{float(table['median_us'].sum()):.1f} µs over its nodes "
                    f"({attrs.get('device', '?')}, {attrs.get('repeats', '?')} repeats, median; p25–p75 below)"),
        "chart": blobs.add(chart),
    }
