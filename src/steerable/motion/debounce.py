"""Debouncing per-frame labels into runs no shorter than a minimum, in O(n log n).

The shortest short run is merged first, into its longer free neighbour, and equal neighbours fuse
at once; a heap with lazy invalidation keeps this fast on long, noisy episodes where the label can
change almost every frame.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from steerable.motion.smoothing import runs

__all__ = ["Segment", "debounce"]

Segment = tuple[int, int, "str | None"]


def debounce(labels: Sequence[str | None], fixed_frames: Sequence[bool], min_frames: float) -> list[Segment]:
    """Runs of `labels` where every run not starting on a fixed frame lasts at least `min_frames`.

    Runs starting on a fixed frame (gripper events) keep their label; they may grow by absorbing a
    short run that has no free neighbour.
    """
    found = runs(list(labels))
    start = [s for s, _, _ in found]
    end = [e for _, e, _ in found]
    label = [t for _, _, t in found]
    fixed = [bool(fixed_frames[s]) for s in start]
    alive = [True] * len(found)
    prev = [i - 1 for i in range(len(found))]
    nxt = [i + 1 if i + 1 < len(found) else -1 for i in range(len(found))]
    heap = [(end[i] - start[i], start[i], i) for i in range(len(found)) if not fixed[i]]
    heapq.heapify(heap)

    def absorb(keep: int, gone: int) -> None:
        """`keep` takes over the frames of its neighbour `gone`."""
        start[keep], end[keep] = min(start[keep], start[gone]), max(end[keep], end[gone])
        alive[gone] = False
        if gone == nxt[keep]:
            nxt[keep] = nxt[gone]
            if nxt[keep] >= 0:
                prev[nxt[keep]] = keep
        else:
            prev[keep] = prev[gone]
            if prev[keep] >= 0:
                nxt[prev[keep]] = keep

    while heap:
        length, first, i = heapq.heappop(heap)
        if not alive[i] or length != end[i] - start[i] or first != start[i] or length >= min_frames:
            continue
        neighbours = [j for j in (prev[i], nxt[i]) if j >= 0]
        if not neighbours:
            break
        # Prefer a free neighbour (the longer one, the earlier on a tie) so gripper events keep their extent.
        free = [j for j in neighbours if not fixed[j]] or neighbours
        j = max(free, key=lambda n: (end[n] - start[n], -start[n]))
        absorb(j, i)
        for k in (prev[j], nxt[j]):
            if k >= 0 and label[k] == label[j] and fixed[k] == fixed[j]:
                absorb(j, k)
        if not fixed[j]:
            heapq.heappush(heap, (end[j] - start[j], start[j], j))
    return [(start[i], end[i], label[i]) for i in range(len(found)) if alive[i]]
