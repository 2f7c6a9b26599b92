"""Helpers for tests that start and stop processes."""

from __future__ import annotations

import os
import random
import socket
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

# A process is (pid, start time in clock ticks since boot): a pid the kernel hands out again is another one.
Proc = tuple[int, int]


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (signal 0 probes without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _stat(pid: int) -> tuple[str, int, int, int, int] | None:
    """(state, ppid, pgid, sid, start time) from /proc/PID/stat, None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])


def process_table() -> dict[int, tuple[str, int, int, int, int]]:
    """Every process now: pid -> (state, ppid, pgid, sid, start time)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            table[int(entry)] = stat
    return table


def descendants(pid: int, known: Iterable[Proc] = ()) -> set[Proc]:
    """The processes below `pid` now: its children by PPID, theirs, and so on, plus every process
    in a process group or session that one of them leads, so that an orphan re-parented to init is
    still found. `known` (processes found before, still running) extends the search the same way:
    their children and groups count even once `pid` itself is gone."""
    table = process_table()
    members = {pid} | {p for p, started in known if p in table and table[p][4] == started}
    grew = True
    while grew:
        grew = False
        for other, (_, ppid, pgid, sid, _) in table.items():
            if other not in members and (ppid in members or pgid in members or sid in members):
                members.add(other)
                grew = True
    members.discard(pid)
    return {(p, table[p][4]) for p in members}


def alive(procs: Iterable[Proc]) -> list[Proc]:
    """Those of `procs` still running (a zombie, dead but not yet reaped, does not count)."""
    left = []
    for pid, started in procs:
        stat = _stat(pid)
        if stat is not None and stat[4] == started and stat[0] not in ("Z", "X"):
            left.append((pid, started))
    return left


def describe(procs: Iterable[Proc]) -> str:
    """`pid: command line` of each process, for an assertion message."""
    lines = []
    for pid, _ in procs:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            cmd = "(gone)"
        lines.append(f"{pid}: {cmd.strip()[:200]}")
    return "\n".join(lines)


class TreeRecorder:
    """Records every process below `pid` while it runs (a poll every `interval_s`), so that after
    the command is stopped the test can check that none of them is left.

    Use as a context manager; `seen` is the union of every poll, `wait_for(n)` waits until `n`
    processes were seen, `left(within_s)` lists those still alive after waiting up to `within_s`.
    """

    def __init__(self, pid: int, interval_s: float = 0.05) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.seen: set[Proc] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> TreeRecorder:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def snapshot(self) -> set[Proc]:
        with self._lock:
            return set(self.seen)

    def _poll(self) -> None:
        while not self._stop.is_set():
            found = descendants(self.pid, self.snapshot())
            with self._lock:
                self.seen |= found
            self._stop.wait(self.interval_s)

    def wait_for(self, count: int, timeout_s: float, match: str = "") -> set[Proc]:
        """Wait until `count` processes (whose command line contains `match`) were seen; their set."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = {p for p in self.snapshot() if match in describe([p])}
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(self.interval_s)

    def left(self, within_s: float) -> list[Proc]:
        """The recorded processes still alive after waiting up to `within_s` for them to go."""
        self.stop()
        deadline = time.monotonic() + within_s
        while (still := alive(self.seen)) and time.monotonic() < deadline:
            time.sleep(0.05)
        return still


def free_port() -> int:
    """A port nothing listens on now, out of the range outgoing connections draw from."""
    return free_ports(1)


def free_ports(count: int) -> int:
    """The first of `count` consecutive free ports, below the kernel's ephemeral range.

    A kernel-picked port P says nothing about P + 1, and a port in the ephemeral range (32768 and up
    here) can be taken between the probe and its use by any outgoing connection (Ray opens many), so
    a run of ports is searched in 20000-32000, where neither the kernel nor Ray's workers
    (10002-19999) hand out ports.
    """
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(200):
        first = rng.randrange(20000, 32000 - count)
        if all(_is_free(first + k) for k in range(count)):
            return first
    raise RuntimeError(f"no {count} consecutive free ports in 20000-32000")


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
