"""Graphviz's dot as a process started ahead of need (fxviz.draw.dot)."""
import shutil
import subprocess

import pytest

from fxviz.draw import dot

pytestmark = pytest.mark.skipif(not shutil.which("dot"), reason="Graphviz's dot is not installed")


def test_a_prepared_process_lays_out_the_next_drawing_and_a_new_one_waits():
    dot.prepare()
    waiting = dot._spare
    assert waiting is not None and waiting.poll() is None
    source = b"digraph fxviz { graph [id=fxgraph] x -> y }"
    code, out, _ = dot.run(source.decode(), timeout=30)
    assert code == 0 and out.count(b"<svg") == 1 and b">x</text>" in out  # the warm-up's drawing is not in it
    alone = subprocess.run(["dot", "-Tsvg"], input=source, capture_output=True).stdout
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
