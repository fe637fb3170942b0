"""torch's profiler first started on a measuring worker (an Explorer's ATen breakdown),
not on the thread that imported torch: kineto prints "ERROR: External init callback must
run in same thread as registerClient" once per process, in red under the user's cell. It
only says that kineto skipped its client's init, which does nothing on CPU and CUDA
(torch's LibKinetoClient.init sets up MTIA's memory profiler): fxviz keeps it out of the
cell, as it does kineto's other notes, and passes on what else was written."""
import subprocess
import sys

SCRIPT = """
import os, torch
from torch import nn
from fxviz import Session
from fxviz.background.measure import Scheduler

class Loud(nn.Module):
    def forward(self, x):
        os.write(2, b"mine\\n")
        return x + 1

session = Session(nn.Sequential(nn.Linear(4, 4), Loud()), (torch.randn(2, 4),), tracer="symbolic")
scheduler = Scheduler("background", {"warmup": 0, "repeats": 3})  # the worker runs the ATen breakdown
scheduler.request([session.current])
scheduler.wait_idle()
print(len(scheduler.known(session.current).aten), flush=True)
scheduler.close()
"""


def test_the_profiler_started_on_a_worker_thread_prints_nothing_into_the_cell():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True)
    assert done.returncode == 0 and int(done.stdout) > 0, done.stderr
    assert "External init callback" not in done.stderr, done.stderr
    assert "mine" in done.stderr.splitlines()  # the model's own writes still reach the cell
