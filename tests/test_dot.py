"""Graphviz's dot as a process started ahead of need (fxviz.draw.dot)."""
import re
import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree

import pytest

from fxviz.draw import dot
from fxviz.draw.render import layout_svg

pytestmark = pytest.mark.skipif(not shutil.which("dot"), reason="Graphviz's dot is not installed")


def test_a_prepared_process_lays_out_the_next_drawing_and_a_new_one_waits():
    dot.prepare()
    waiting = dot._spare
    assert waiting is not None and waiting.poll() is None
    source = b"digraph fxviz { graph [id=fxgraph] x -> y }"
    code, out, _ = dot.run(source.decode(), timeout=30)
    assert code == 0 and out.count(b"<svg") == 1 and b">x</text>" in out  # the warm-up's drawing is not in it
    alone = subprocess.run(["dot", "-Tsvg"], input=source, capture_output=True,
                           env=dot.environment(shutil.which("dot"))).stdout
    assert out[out.find(b"<svg"):] == alone[alone.find(b"<svg"):]  # what a dot of its own draws: a second
    # graph's group id ("page0,1_fxgraph") named back
    assert waiting.returncode == 0  # the spare laid it out
    assert dot._spare is not waiting and dot._spare.poll() is None  # and the next is started


def test_a_dead_spare_is_not_used():
    dot.prepare()
    dot._spare.kill()
    dot._spare.wait()
    code, out, _ = dot.run("digraph { c }", timeout=30)
    assert code == 0 and b">c</text>" in out


def test_a_layout_past_its_timeout_is_killed(monkeypatch):
    started = []

    def never_done(exe, warm=True):
        started.append(subprocess.Popen(["sleep", "600"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE))
        return started[-1]

    monkeypatch.setattr(dot, "_spare", None)
    monkeypatch.setattr(dot, "_start", never_done)
    with pytest.raises(subprocess.TimeoutExpired):
        dot.run("digraph { a }", timeout=0.2)
    assert started[0].returncode is not None  # killed and reaped, not left running
    for process in started[1:]:  # the spare started meanwhile
        process.kill()
        process.wait()


def test_bad_source_is_graphviz_error_text():
    code, _, err = dot.run("digraph { a -> }", timeout=30)
    assert code != 0 and b"syntax error" in err


def test_a_forked_child_does_not_write_to_its_parents_spare(monkeypatch):
    dot.prepare()
    parents = dot._spare
    monkeypatch.setattr(dot, "_owner", -1)  # as in a child forked after the spare started
    code, out, _ = dot.run("digraph { child }", timeout=30)
    assert code == 0 and b">child</text>" in out
    assert parents.poll() is None  # untouched: still waiting for its own process's drawing
    assert dot._spare is not parents and dot._owner > 0  # the child started its own
    parents.kill()
    parents.wait()


def test_dot_loads_its_layout_and_svg_plugins_alone(monkeypatch, tmp_path):
    """Not its text plugin: pango measured each label through fontconfig, half of a layout."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    dot.environment.cache_clear()
    try:
        env = dot.environment(shutil.which("dot"))
    finally:
        dot.environment.cache_clear()
    folder = tmp_path / "fxviz"
    assert env is not None and env["GVBINDIR"].startswith(str(folder))
    plugins = {p.name for p in Path(env["GVBINDIR"]).iterdir() if not p.name.startswith("config")}
    assert plugins and all("gvplugin_core" in p or "gvplugin_dot_layout" in p for p in plugins)
    loaded = subprocess.run(["dot", "-v"], stdin=subprocess.DEVNULL, capture_output=True, env=env).stderr
    assert b"dot_layout" in loaded and b"pango" not in loaded
    assert [p.name for p in folder.iterdir()] == [Path(env["GVBINDIR"]).name]  # no half-made folder left


def test_a_plugin_folder_removed_while_running_is_made_again(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    dot.environment.cache_clear()
    try:
        folder = Path(dot.environment(shutil.which("dot"))["GVBINDIR"])
        shutil.rmtree(folder)  # a user clearing ~/.cache
        if dot._spare is not None:  # started before: it has its plugins loaded
            dot._spare.kill()
            dot._spare.wait()
        code, out, _ = dot.run("digraph { again }", timeout=30)
        assert code == 0 and b">again</text>" in out and folder.is_dir()
    finally:
        dot.environment.cache_clear()


def test_a_dot_whose_plugins_cannot_be_set_apart_runs_as_installed(monkeypatch, tmp_path):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "libgvplugin_core.so.6").write_text("")
    fake = tmp_path / "dot"  # names its configuration, then draws nothing with the plugins set apart
    fake.write_text(f"#!/bin/sh\necho 'The plugin configuration file:\n\t{tmp_path}/plugins/config6a' >&2\n")
    fake.chmod(0o755)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert dot.environment.__wrapped__(str(fake)) is None
    assert list((tmp_path / "cache" / "fxviz").iterdir()) == []  # the half-made folder removed
    fake.write_text("#!/bin/sh\necho 'dot - graphviz version 0' >&2\n")  # names none
    assert dot.environment.__wrapped__(str(fake)) is None


def test_each_line_of_a_box_is_centred_on_it_and_a_line_of_spans_is_left_as_placed():
    source = ('digraph { a [shape=box style=rounded label=<<B>a_rather_long_bold_name_of_a_node</B><BR/>'
              '<FONT POINT-SIZE="8">1×3</FONT>>] b [shape=ellipse label=<<B>x</B>>] '
              'c [shape=box3d label=<<B>0 · Block</B>>] d [label=<one <B>two</B>>] a -> b -> c -> d }')
    svg = layout_svg(source)
    ElementTree.fromstring(svg)  # well-formed: a browser's parser drops a drawing that is not
    boxes = dict(re.findall(r'<title>(\w)</title>\n<(\w+ [^>]*)>', svg))
    for name in "ac":
        xs = [float(v) for v in re.findall(r"(-?[\d.]+),-?[\d.]+", boxes[name])]
        centre = (min(xs) + max(xs)) / 2
        texts = _texts(svg, name)
        assert texts and all(anchor == "middle" and abs(float(x) - centre) < 0.01 for anchor, x in texts)
    assert _texts(svg, "b") == [("middle", re.search(r' cx="([^"]*)"', boxes["b"]).group(1))]
    assert [anchor for anchor, _ in _texts(svg, "d")] == ["start", "start"]  # "one " and "two": dot's placement


def _texts(svg: str, name: str) -> list[tuple[str, str]]:
    node = svg[svg.index(f"<title>{name}</title>"):]
    return re.findall(r'<text text-anchor="(\w+)" x="([^"]*)"', node[:node.index("</g>")])
