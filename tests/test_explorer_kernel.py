"""The Explorer on a large graph in a real IPython kernel, its cells queued at once as
JupyterLab's "Run All" queues them: the drawing goes out, the node rows follow once the
cell is done and before the next cell runs, and a cell left alone still gets them.
What a later cell reads here is the synced traits (what the browser was sent), not the
accessors that fill on demand."""
from __future__ import annotations

import inspect
import json

import pytest

pytest.importorskip("anywidget")
pytest.importorskip("ipykernel")
from jupyter_client import KernelManager  # noqa: E402

from test_explorer_scale import Chain  # noqa: E402  (one block of a deep stack)

MAKE = r'''
import json, torch, fxviz, ipykernel
from torch import nn
from fxviz.widgets.explorer import Explorer, LARGE_GRAPH
''' + inspect.getsource(Chain) + r'''
session = fxviz.Session(nn.Sequential(*[Chain(20) for _ in range(100)]), (torch.randn(2, 4),))
ex = Explorer(session, profile="off")
print(json.dumps({"ipykernel": ipykernel.__version__, "n": len(session.current.graph), "large": LARGE_GRAPH,
                  "rows": len(ex.table.data), "records": len(ex.graph.nodes)}))
display(ex)
'''
READ = r'''
print(json.dumps({"rows": len(ex.table.data), "records": len(ex.graph.nodes),
                  "pending": [ex.table.pending is not None, ex.graph.pending is not None]}))
'''


@pytest.fixture(scope="module")
def kernel():
    manager = KernelManager(kernel_name="python3")  # this interpreter's ipykernel; PYTHONPATH inherited
    manager.start_kernel()
    client = manager.client()
    client.start_channels()
    client.wait_for_ready(timeout=None)  # a hang is pytest-timeout's to report
    yield client
    client.stop_channels()
    manager.shutdown_kernel(now=True)


def run(client, *cells: str, until_fill_of: int | None = None) -> tuple[list[tuple[int, str]], list[dict]]:
    """Queue ``cells`` at once; the kernel's messages in order as (cell, what) until every
    cell is idle (and, with ``until_fill_of``, that cell's rows have come), and each
    cell's printed JSON."""
    ids = [client.execute(cell) for cell in cells]
    events: list[tuple[int, str]] = []
    out = ["" for _ in cells]  # stdout may come in pieces
    idle = 0
    while idle < len(cells) or (until_fill_of is not None and (until_fill_of, "rows") not in events):
        msg = client.get_iopub_msg(timeout=None)
        parent = msg["parent_header"].get("msg_id")
        if parent not in ids:
            continue
        cell, kind, content = ids.index(parent), msg["msg_type"], msg["content"]
        state = content.get("data", {}).get("state", {}) if kind == "comm_msg" else {}
        if kind == "status":
            events.append((cell, content["execution_state"]))
            idle += content["execution_state"] == "idle"
        elif kind == "display_data":
            events.append((cell, "display"))
        elif "data" in state and json.loads(state["data"])["n"]:  # the table's rows, as the browser gets them
            events.append((cell, "rows"))
        elif kind == "stream" and content["name"] == "stdout":
            out[cell] += content["text"]
        elif kind == "error":
            raise AssertionError(f"cell {cell}: {content['ename']}: {content['evalue']}")
    return events, [json.loads(text) if text else {} for text in out]


def test_run_all_the_rows_reach_the_browser_before_the_next_cell_runs(kernel):
    events, (made, read) = run(kernel, MAKE, READ)
    assert made["n"] > made["large"] and made["rows"] == made["records"] == 0, made  # put off past the cell
    assert read == {"rows": made["n"], "records": made["n"], "pending": [False, False]}, made["ipykernel"]
    order = [events.index(e) for e in [(0, "display"), (0, "idle"), (0, "rows"), (1, "busy")]]
    assert order == sorted(order), events  # drawing, cell done, rows, then the next cell


def test_a_cell_left_alone_still_gets_its_rows(kernel):
    events, (made,) = run(kernel, MAKE, until_fill_of=0)
    assert made["rows"] == 0 and events.index((0, "idle")) < events.index((0, "rows")), events


UNDOABLE = r'''
import json, torch, fxviz
from torch import nn
from fxviz.widgets.explorer import Explorer
def change(gm):
    gm.graph.call_function(torch.relu, (next(iter(gm.graph.nodes)),))
s = fxviz.Session(nn.Sequential(nn.Linear(2, 2), nn.ReLU()), (torch.randn(1, 2),))
for _ in range(3):
    s.apply(change)
ex = Explorer(s, profile="off")
print(json.dumps({"undo": ex.undo_button.model_id}))
'''
STATE = 'print(json.dumps({"index": s.index, "status": ex.status.value}))'


def test_a_second_click_made_while_an_undo_runs_is_dropped(kernel):
    """Two clicks sent as a double click would be: the second waits in the kernel's
    queue while the first undo runs, and is dropped (its browser time is before the
    first's end), not run after it; a click sent after the undo runs. The double click's
    two clicks carry one browser time: the second is before the first's end, however
    long the undo takes on a busy machine."""
    _, (made,) = run(kernel, UNDOABLE)

    def click(at=None) -> dict:
        msg = kernel.session.msg("comm_msg", {
            "comm_id": made["undo"], "data": {"method": "custom", "content": {"event": "click"}}})
        msg["header"]["date"] = at or msg["header"]["date"]
        kernel.shell_channel.send(msg)
        return msg["header"]["date"]

    click(click())
    _, (state,) = run(kernel, STATE)
    assert state == {"index": 2, "status": "A click or key made before the last action ended was ignored: make it again if you meant it."}
    click()
    _, (state,) = run(kernel, STATE)
    assert state == {"index": 1, "status": ""}
