"""Graphviz's ``dot`` as a process, one started ahead of need.

A ``dot`` process spends ~10 ms starting (loading its plugins, then its fonts when it
measures its first label), as long as laying out a small drawing. :func:`prepare` starts
one and has it lay out a one-box graph (dot reads graphs one after another from its
input) while the caller does other work (a Session tracing its model); :func:`run`
hands the next drawing to it, or starts one where none is waiting, then starts the next
spare, so an Explorer's redraws find one ready too. A spare waits on its input; it ends
when given a drawing, or, at exit, an empty one.
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import threading

from fxviz.errors import RenderError

_lock = threading.Lock()
_spare: subprocess.Popen | None = None
_owner = os.getpid()  # a forked child (a DataLoader worker) starts its own: the spare's pipes are its parent's


def executable() -> str:
    """The path of ``dot``; a RenderError saying how to install it where there is none."""
    found = shutil.which("dot")
    if found is None:
        raise RenderError(
            "Graphviz's `dot` program was not found on PATH. Install it: "
            "`sudo apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` (macOS) "
            "or `conda install -c conda-forge graphviz`; then restart the kernel."
        )
    return found


def prepare() -> None:
    """Start a spare ``dot`` where none is waiting (nothing where dot is not installed:
    the drawing says so)."""
    global _spare, _owner
    exe = shutil.which("dot")
    with _lock:
        if _owner != os.getpid():
            _spare, _owner = None, os.getpid()
        if exe is None or (_spare is not None and _spare.poll() is None):
            return
        _spare = _start(exe)


def run(source: str, *, timeout: float) -> tuple[int, bytes, bytes]:
    """``dot -Tsvg`` on ``source``: (exit code, stdout, stderr); ``subprocess.TimeoutExpired``
    past ``timeout`` seconds, with the process killed, never left running."""
    global _spare
    exe = executable()
    with _lock:
        process, _spare = (_spare, None) if _owner == os.getpid() else (None, _spare)
    warmed = process is not None and process.poll() is None
    if not warmed:
        process = _start(exe, warm=False)
    try:
        out, err = process.communicate(source.encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    finally:
        prepare()  # after, not during, the layout: on two cores a starting dot slowed it down 2x
    if warmed:  # the one-box graph's SVG comes first; dot names a later graph's group "page0,1_<id>"
        out = _SECOND_GRAPH.sub(rb'<g id="\1" class="graph"', out[out.find(b"</svg>") + len(b"</svg>"):], count=1)
    return process.returncode, out, err


_SECOND_GRAPH = re.compile(rb'<g id="page\d+,\d+_([^"]*)" class="graph"')


_WARM_UP = b'digraph { a [label="a"] }\n'


def _start(exe: str, *, warm: bool = True) -> subprocess.Popen:
    process = subprocess.Popen([exe, "-Tsvg"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if warm:
        process.stdin.write(_WARM_UP)
        process.stdin.flush()
    return process


@atexit.register
def _end_spare() -> None:
    """An empty drawing ends the waiting process (no warning about a process left running)."""
    with _lock:
        process = _spare if _owner == os.getpid() else None
    if process is not None and process.poll() is None:
        process.communicate(b"", timeout=10)
