"""The Explorer on graphs too large to draw whole: it opens within the box budget, the
table and search cover every node, a node hidden in a collapsed box is revealed when
selected, and expanding a box opens only that box."""
import asyncio
import concurrent.futures

import pytest
import torch
from torch import nn

pytest.importorskip("anywidget")

from test_graph_view import from_browser  # noqa: E402

from fxviz.widgets import _busy  # noqa: E402
from fxviz.widgets.explorer import Explorer  # noqa: E402


class Chain(nn.Module):
    """``n_ops`` element-wise ops and a residual add: one block of a deep stack."""

    def __init__(self, n_ops: int):
        super().__init__()
        self.n_ops = n_ops

    def forward(self, x):
        h = x
        for i in range(self.n_ops):
            h = torch.tanh(h) if i % 2 else torch.sigmoid(h)
        return h + x


class Stack(nn.Module):
    def __init__(self, n_blocks: int, n_ops: int):
        super().__init__()
        self.blocks = nn.Sequential(*[Chain(n_ops) for _ in range(n_blocks)])
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.blocks(x))


def drawn_nodes(explorer) -> set[str]:
    return {e["name"] for e in explorer.graph.elements.values() if e["kind"] == "node"}


@pytest.fixture(scope="module")
def big():
    import fxviz

    session = fxviz.Session(Stack(150, 20), (torch.randn(2, 4),))
    explorer = Explorer(session, profile="off")
    yield explorer
    explorer.close()


def test_a_large_graph_opens_within_budget_with_every_node_in_table_and_search(big):
    graph = big.session.current.graph
    assert len(graph) > 3000
    boxes = [e for e in big.graph.elements.values() if e["kind"] in ("node", "collapsed", "stub")]
    assert 5 < len(boxes) <= 260
    assert big.table.pending is None  # outside a kernel nothing waits for the cell's end
    assert len(big.table.rows) == len(big.graph.nodes) == len(graph)  # all nodes, drawn or not
    assert "blocks 0–31 · Chain" in big.graph.svg  # identical blocks in ranges, collapsed


def test_a_large_graph_is_drawn_first_and_its_rows_follow_the_cell(big, monkeypatch):
    """In a kernel, the node table and the view's records of a large graph are sent once
    the cell is done (its event loop runs them next), so the first drawing does not wait
    for them; whatever reads them sooner (the static copy, ``rows``, ``select``) still
    sees them. The kernel here: a loop of our own, in a thread of its own (a test's
    thread may hold Playwright's)."""
    session, n = big.session, len(big.session.current.graph)
    monkeypatch.setattr(_busy, "_kernel_loop", asyncio.get_running_loop)

    async def cells():
        first = Explorer(session, profile="off")
        seen = {"svg": "blocks 0–31 · Chain" in first.graph.svg, "rows": len(first.table.data),
                "records": len(first.graph.nodes)}
        static = first._repr_mimebundle_()["text/html"]  # displayed: its first rows, still nothing sent
        seen["static"] = "sigmoid_1" in static and f"(first 200 of {n})" in static and len(first.table.data) == 0
        second = Explorer(session, profile="off")
        seen["read at once"] = len(second.table.rows)  # the same cell reads them: filled on demand
        third = Explorer(session, profile="off")
        third.close()  # before the cell ends: its fill is dropped, nothing holds the Explorer
        seen["closed"] = (third.graph.pending, third.table.pending, len(third.table.data))
        await asyncio.sleep(0)  # the cell is done: the kernel's loop runs what waited
        seen["after"] = (len(first.table.data), len(first.graph.nodes), first.table.pending, first.graph.pending)
        for explorer in (first, second):
            explorer.close()
        return seen

    with concurrent.futures.ThreadPoolExecutor(1) as kernel:
        seen = kernel.submit(asyncio.run, cells()).result()
    assert seen["svg"] and seen["rows"] == seen["records"] == 0 and seen["static"]
    assert seen["read at once"] == n and seen["closed"] == (None, None, 0)
    assert seen["after"] == (n, n, None, None)


def test_selecting_a_hidden_node_reveals_it_and_keeps_the_rest(big):
    hidden = "sigmoid_1400"
    assert hidden in big.session.current.graph and hidden not in drawn_nodes(big)
    collapsed_before = set(big.graph.collapsed)
    from_browser(big.graph, selected=hidden)  # a search hit: Enter in the view's search box
    assert hidden in drawn_nodes(big) and big.graph.selected == big.table.selected == hidden
    assert hidden in big.details.body.value
    assert len(collapsed_before - set(big.graph.collapsed)) <= 2  # its range and its block
    boxes = [e for e in big.graph.elements.values() if e["kind"] in ("node", "collapsed", "stub")]
    assert len(boxes) <= 260 + 2 * 48


def test_expanding_one_box_opens_that_box_only(big):
    before = set(big.graph.collapsed)
    target = sorted(before)[0]
    from_browser(big.graph, collapsed=sorted(before - {target}))  # a click on the box
    clusters = {e["name"] for e in big.graph.elements.values() if e["kind"] == "cluster"}
    assert target in clusters
    assert before - {target} <= set(big.graph.collapsed)  # every other box stays closed
