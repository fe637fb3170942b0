"""Line diffs of generated code that stay fast on graphs of 100,000 nodes.

difflib's SequenceMatcher alone takes seconds on codes of 30,000 lines whose changes
are spread throughout (a pass that renames every add: 4.6 s), because it searches the
whole remaining range for each matching block. Generated code is almost all unique
lines (each assigns a node of its own name), so the lines found once in each text, in
an order both keep (patience diff's anchors), cut it into short gaps, and difflib
matches within each gap alone.
"""
from __future__ import annotations

import bisect
import difflib
from collections import Counter
from collections.abc import Sequence


class AnchoredMatcher(difflib.SequenceMatcher):
    """A ``difflib.SequenceMatcher`` of two lists of lines whose matching blocks come from
    the anchors and difflib within the gaps between them; its opcodes, grouped opcodes
    and ratio are difflib's own, computed from those blocks."""

    def __init__(self, a: Sequence[str], b: Sequence[str]):
        super().__init__(None, a, b, autojunk=False)

    def get_matching_blocks(self) -> list:
        if self.matching_blocks is not None:
            return self.matching_blocks
        a, b = self.a, self.b
        blocks: list[tuple[int, int, int]] = []
        alo = blo = 0
        for i, j in [*_anchors(a, b), (len(a), len(b))]:
            if i > alo and j > blo:
                gap = difflib.SequenceMatcher(None, a[alo:i], b[blo:j], autojunk=False)
                blocks += [(alo + x, blo + y, n) for x, y, n in gap.get_matching_blocks()[:-1]]
            if i < len(a):
                blocks.append((i, j, 1))
            alo, blo = i + 1, j + 1
        self.matching_blocks = [*_merged(blocks), (len(a), len(b), 0)]  # difflib's closing sentinel
        return self.matching_blocks


def unified_diff(a: Sequence[str], b: Sequence[str], fromfile: str, tofile: str, n: int = 3) -> list[str]:
    """The lines ``difflib.unified_diff(a, b, fromfile, tofile, lineterm="", n=n)`` gives,
    from an :class:`AnchoredMatcher`."""
    lines: list[str] = []
    for group in AnchoredMatcher(a, b).get_grouped_opcodes(n):
        if not lines:
            lines += [f"--- {fromfile}", f"+++ {tofile}"]
        first, last = group[0], group[-1]
        lines.append(f"@@ -{_span(first[1], last[2])} +{_span(first[3], last[4])} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [" " + line for line in a[i1:i2]]
                continue
            if tag in ("replace", "delete"):
                lines += ["-" + line for line in a[i1:i2]]
            if tag in ("replace", "insert"):
                lines += ["+" + line for line in b[j1:j2]]
    return lines


def _span(start: int, stop: int) -> str:
    """A hunk's range as unified diffs write it: ``first,count``, ``first`` alone for one
    line, and the line before for none."""
    count = stop - start
    if count == 1:
        return f"{start + 1}"
    return f"{start + 1 if count else start},{count}"


def _anchors(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int]]:
    """(i, j) of lines found exactly once in ``a`` and once in ``b``: the longest run of
    them in the same order in both (patience sorting)."""
    count_a, count_b = Counter(a), Counter(b)
    in_b = {line: j for j, line in enumerate(b) if count_b[line] == 1}
    pairs = [(i, in_b[line]) for i, line in enumerate(a) if count_a[line] == 1 and line in in_b]
    tails: list[int] = []  # per run length, the pair ending the run with the smallest j
    tail_js: list[int] = []
    before: list[int] = []  # per pair, the pair before it in its run
    for k, (_, j) in enumerate(pairs):
        at = bisect.bisect_left(tail_js, j)
        before.append(tails[at - 1] if at else -1)
        if at == len(tails):
            tails.append(k)
            tail_js.append(j)
        else:
            tails[at], tail_js[at] = k, j
    run, k = [], tails[-1] if tails else -1
    while k >= 0:
        run.append(pairs[k])
        k = before[k]
    return run[::-1]


def _merged(blocks: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Adjacent matching blocks as one, as difflib gives them."""
    merged: list[tuple[int, int, int]] = []
    for i, j, n in blocks:
        if merged and merged[-1][0] + merged[-1][2] == i and merged[-1][1] + merged[-1][2] == j:
            merged[-1] = (merged[-1][0], merged[-1][1], merged[-1][2] + n)
        else:
            merged.append((i, j, n))
    return merged
