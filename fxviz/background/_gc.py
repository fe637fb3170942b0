"""Pausing Python's cyclic garbage collector while building large graphs."""
from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# The collector's switch is the process's; the kernel's thread (a capture, a drawing) and
# the measuring worker's (a profile's timed forwards) pause it at once. One count for both:
# the first to pause turns it off, the last to finish turns it back on, and only if it was
# on before (never left off by an unlucky interleaving of two threads' own bookkeeping).
_LOCK = threading.Lock()
_pauses = 0
_restore = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside: building the records of 100,000 nodes allocates
    millions of objects that all stay alive, and every collection the allocations
    trigger rescans the whole growing heap (measured: 70 % of to_networkx at 30k
    nodes); a collection in the middle of a timed node would be charged to it.
    Reference counting still frees everything as usual. Nests, also across threads."""
    global _pauses, _restore
    with _LOCK:
        if _pauses == 0:
            _restore = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _LOCK:
            _pauses -= 1
            if _pauses == 0 and _restore:
                _promote()
                gc.enable()


def _promote() -> None:
    """Move every object the collector tracks into its oldest generation without a scan
    (freeze then unfreeze: two list splices, and the young count reset). Otherwise the
    first allocation after ``gc.enable()`` scans all the objects made while paused (at
    100k nodes: 0.45 s), which then push a full collection of the heap (1 s) into the
    Session or the first drawing; they are scanned at the next full collection instead,
    which also frees any cycle made meanwhile. Skipped where something else froze
    objects (unfreezing would thaw them)."""
    if hasattr(gc, "freeze") and gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
