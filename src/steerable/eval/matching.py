"""One-to-one matching: an exact maximum-weight assignment (Hungarian method) and the greedy baseline.

Metrics match predicted and gold items (segments, boundaries) one-to-one. Greedy matching, best pair
first, can lose matches when one item overlaps two candidates; the assignment here maximises the
number of matches first and the total score second, which is what a fair F1 needs.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["greedy_matching", "optimal_matching"]

Scores = Sequence[Sequence[float | None]]


def optimal_matching(scores: Scores) -> list[tuple[int, int]]:
    """Pairs (row, column) of a one-to-one matching with the most pairs, then the highest total score.

    `scores[i][j]` in [0, 1] is how well row i fits column j, or None when the pair may not match.
    Rows and columns that share no allowed pair cannot affect each other, so each connected group of
    allowed pairs is solved on its own: spans only overlap their neighbours, which keeps long episodes fast.
    """
    pairs: list[tuple[int, int]] = []
    for rows, cols in _components(scores):
        sub = [[scores[i][j] for j in cols] for i in rows]
        pairs += [(rows[r], cols[c]) for r, c in _solve(sub)]
    return sorted(pairs)


def _components(scores: Scores) -> list[tuple[list[int], list[int]]]:
    """Connected groups (rows, columns) of the bipartite graph of allowed pairs; isolated items dropped."""
    n = len(scores)
    parent = list(range(n + (len(scores[0]) if n else 0)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    linked: set[int] = set()
    for i, row in enumerate(scores):
        for j, s in enumerate(row):
            if s is not None:
                parent[find(i)] = find(n + j)
                linked.update((i, n + j))
    groups: dict[int, tuple[list[int], list[int]]] = {}
    for x in sorted(linked):
        rows, cols = groups.setdefault(find(x), ([], []))
        (rows if x < n else cols).append(x if x < n else x - n)
    return list(groups.values())


def _solve(scores: Scores) -> list[tuple[int, int]]:
    n = len(scores)
    m = len(scores[0]) if n else 0
    if n == 0 or m == 0:
        return []
    # Every allowed pair weighs `big` + score with big > any number of pairs: one more pair always wins.
    big = float(min(n, m) + 1)
    transpose = n > m
    rows, cols = (m, n) if transpose else (n, m)
    cost = [[0.0] * cols for _ in range(rows)]
    for i in range(n):
        for j in range(m):
            s = scores[i][j]
            if s is not None:
                r, c = (j, i) if transpose else (i, j)
                cost[r][c] = -(big + s)
    assignment = _min_cost_assignment(cost)
    pairs = [((c, r) if transpose else (r, c)) for r, c in assignment]
    return [(i, j) for i, j in pairs if scores[i][j] is not None]


def greedy_matching(scores: Scores) -> list[tuple[int, int]]:
    """The baseline: take allowed pairs best score first while both sides are free."""
    ranked = sorted(
        ((s, i, j) for i, row in enumerate(scores) for j, s in enumerate(row) if s is not None),
        key=lambda x: (-x[0], x[1], x[2]),
    )
    used_rows: set[int] = set()
    used_cols: set[int] = set()
    pairs = []
    for _, i, j in ranked:
        if i not in used_rows and j not in used_cols:
            used_rows.add(i)
            used_cols.add(j)
            pairs.append((i, j))
    return sorted(pairs)


def _min_cost_assignment(cost: list[list[float]]) -> list[tuple[int, int]]:
    """Assign every row (rows <= columns) to a distinct column at minimum total cost.

    The shortest-augmenting-path form of the Hungarian method with row/column potentials, O(n^2 m).
    """
    n, m = len(cost), len(cost[0])
    inf = float("inf")
    u = [0.0] * (n + 1)
    v = [0.0] * (m + 1)
    owner = [0] * (m + 1)  # owner[j]: 1-based row holding column j; column 0 is the virtual start
    way = [0] * (m + 1)
    for i in range(1, n + 1):
        owner[0] = i
        j0 = 0
        minv = [inf] * (m + 1)
        used = [False] * (m + 1)
        while True:
            used[j0] = True
            i0 = owner[j0]
            delta = inf
            j1 = 0
            row = cost[i0 - 1]
            for j in range(1, m + 1):
                if not used[j]:
                    cur = row[j - 1] - u[i0] - v[j]
                    if cur < minv[j]:
                        minv[j] = cur
                        way[j] = j0
                    if minv[j] < delta:
                        delta = minv[j]
                        j1 = j
            for j in range(m + 1):
                if used[j]:
                    u[owner[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if owner[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            owner[j0] = owner[j1]
            j0 = j1
    return [(owner[j] - 1, j - 1) for j in range(1, m + 1) if owner[j]]
