"""Graphviz's ``dot`` as a process, one started ahead of need.

A ``dot`` process spends ~10 ms starting (loading its plugins, then its fonts when it
measures its first label), as long as laying out a small drawing. :func:`prepare` starts
one and has it lay out a one-box graph (dot reads graphs one after another from its
input) while the caller does other work (a Session tracing its model); :func:`run`
hands the next drawing to it, or starts one where none is waiting, then starts the next
spare, so an Explorer's redraws find one ready too. A spare waits on its input; it ends
when given a drawing, or, at exit, an empty one.

dot loads only its layout and SVG plugins (:func:`environment`): with its text plugin
(pango) it measured every label through fontconfig, half of mobilenet_v3's 37 ms layout
and 8 of its 9 ms start. Its built-in metrics are Helvetica's, which browsers draw (or
a font of the same widths), but they do not widen bold text: :func:`centre_labels` has
the browser centre each line of a box instead.
"""
from __future__ import annotations

import atexit
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
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
    env = environment(exe)
    if env is not None and not os.path.isdir(env["GVBINDIR"]):  # the cache was cleared since: made again
        environment.cache_clear()
        env = environment(exe)
    process = subprocess.Popen([exe, "-Tsvg"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=env)
    if warm:
        process.stdin.write(_WARM_UP)
        process.stdin.flush()
    return process


_PLUGINS = ("gvplugin_core", "gvplugin_dot_layout")  # the SVG writer, and dot's layout
_CONFIG = re.compile(rb"The plugin configuration file:\s*(\S+)")


@functools.cache
def environment(exe: str) -> dict[str, str] | None:
    """The environment in which ``exe`` loads only :data:`_PLUGINS`: a folder of links to
    them and the configuration ``dot -c`` writes for them, made once per Graphviz install
    in the user's cache; None (dot as installed) where that cannot be made or does not work."""
    try:
        stat = os.stat(exe)
        key = hashlib.sha1(f"{os.path.realpath(exe)}|{stat.st_mtime_ns}|{stat.st_size}".encode()).hexdigest()[:12]
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(cache, "fxviz", f"graphviz-{key}")
        made = os.path.isdir(folder) or _make(exe, folder)
    except (OSError, subprocess.SubprocessError):
        return None
    return {**os.environ, "GVBINDIR": folder} if made else None


def _make(exe: str, folder: str) -> bool:
    """Links to the installed :data:`_PLUGINS` and their configuration, made in a new folder
    moved to ``folder`` once a drawing made with them checks out."""
    found = _CONFIG.search(subprocess.run([exe, "-v"], stdin=subprocess.DEVNULL, capture_output=True,
                                          timeout=30).stderr)
    if found is None:
        return False
    installed = os.path.dirname(found.group(1).decode())
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    made = tempfile.mkdtemp(dir=os.path.dirname(folder))
    try:
        for name in os.listdir(installed):
            if any(plugin in name for plugin in _PLUGINS):
                os.symlink(os.path.join(installed, name), os.path.join(made, name))
        env = {**os.environ, "GVBINDIR": made}
        subprocess.run([exe, "-c"], env=env, capture_output=True, timeout=30, check=True)
        drawn = subprocess.run([exe, "-Tsvg"], input=_WARM_UP, env=env, capture_output=True, timeout=30)
        if drawn.returncode or b"<svg" not in drawn.stdout:
            return False
        os.rename(made, folder)
        return True
    except OSError:
        return os.path.isdir(folder)  # another process made it first
    finally:
        shutil.rmtree(made, ignore_errors=True)


_LINE = '<text text-anchor="start" x="'


def centre_labels(svg: str) -> str:
    """``svg`` with each line of a box's label centred on the box by the browser: dot
    places a line of an HTML label by its own estimate of its width, short for bold text.
    Read with ``str`` methods: regular expressions over the drawing took a third of a layout."""
    parts = svg.split('class="node">')
    for k in range(1, len(parts)):
        end = parts[k].find("</g>")
        box, rest = parts[k][:end], parts[k][end:]
        lines = box.split(_LINE)
        ys = [line[line.find(' y="'):line.find('"', line.find(' y="') + 4)] for line in lines[1:]]
        centre = _centre(lines[0])
        if centre is None or not ys or len(set(ys)) < len(ys):  # a line of several spans: dot's placement holds
            continue
        head = f'<text text-anchor="middle" x="{centre:.2f}'  # then the line from its x's closing quote
        parts[k] = "".join([lines[0], *(head + line[line.find('"'):] for line in lines[1:]), rest])
    return 'class="node">'.join(parts)


def _centre(shape: str) -> float | None:
    """The x middle of a box's outline (an ellipse's ``cx``, a path's or polygon's extent)."""
    for attribute in (' cx="', ' points="', ' d="'):
        at = shape.find(attribute)
        if at >= 0:
            value = shape[at + len(attribute):shape.find('"', at + len(attribute))]
            if attribute == ' cx="':
                return float(value)
            xs = list(map(float, value.replace("M", "").replace("C", " ").replace(",", " ").split()[::2]))
            return (min(xs) + max(xs)) / 2
    return None


@atexit.register
def _end_spare() -> None:
    """An empty drawing ends the waiting process (no warning about a process left running)."""
    with _lock:
        process = _spare if _owner == os.getpid() else None
    if process is not None and process.poll() is None:
        process.communicate(b"", timeout=10)
