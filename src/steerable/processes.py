"""Processes that end with the command that started them, however it is stopped.

- `interrupt_on_termination()`: the CLI's SIGTERM (and SIGHUP) become a Ctrl-C, so every clean-up
  path written for Ctrl-C runs (a pool is terminated, vLLM replicas stopped, Ray shut down, locks
  released); the block learns which signal it was (exit status 128 + signal).
- `worker_pool(n)`: a multiprocessing pool whose workers leave Ctrl-C to the parent (no traceback
  per worker), die at once on the SIGTERM of `Pool.terminate()`, and exit by themselves when the
  parent dies without ending them (SIGKILL). `init_worker` gives any other process pool the same.
- `server_preexec()`: for a server a command starts (`subprocess`/`asyncio` `preexec_fn`): SIGINT
  and SIGTERM handled again even when the starter ignores or blocks them (a Ray worker does), and
  on Linux a SIGTERM when the thread that started it dies (`PR_SET_PDEATHSIG`).
- `keep_termination_handlers()`: for a library that replaces SIGTERM's handler (`ray.init` does).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.pool import Pool

__all__ = [
    "Termination",
    "init_worker",
    "interrupt_on_termination",
    "keep_termination_handlers",
    "server_preexec",
    "worker_pool",
]

# Signals that ask a command to stop (Ctrl-C aside): `kill`, a closed terminal.
_TERMINATING = (signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_PARENT_POLL_S = 0.5


@dataclass
class Termination:
    """Which terminating signal arrived inside `interrupt_on_termination`, if any."""

    signum: int | None = None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""


@contextlib.contextmanager
def interrupt_on_termination() -> Iterator[Termination]:
    """Inside the block SIGTERM and SIGHUP act as Ctrl-C: they call the SIGINT handler of the moment
    (asyncio's cancels the main task; the default raises KeyboardInterrupt) and are recorded in the
    `Termination` yielded. A signal this process ignores (`nohup`) stays ignored. Main thread only;
    elsewhere it changes nothing."""
    seen = Termination()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        seen.signum = signum
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:  # Ctrl-C ignored here (a background job): a request to stop still stops
            raise KeyboardInterrupt

    previous = {}
    for sig in _TERMINATING:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            previous[sig] = signal.signal(sig, interrupt)
    try:
        yield seen
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def keep_termination_handlers() -> Iterator[None]:
    """Put back the Python handlers of SIGTERM and SIGHUP that the block replaced (`ray.init` sets
    one that exits at once, plus a C handler that dumps a stack trace). Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.getsignal(sig) for sig in _TERMINATING}
    try:
        yield
    finally:
        for sig, handler in before.items():
            if callable(handler):
                signal.signal(sig, handler)


def init_worker(parent: int) -> None:
    """Set up a pool worker (`initializer=init_worker, initargs=(os.getpid(),)`): Ctrl-C ignored (the
    parent stops the pool), SIGTERM and SIGHUP back to their default (a fork inherits the parent's
    Python handlers), and exit when `parent` is gone. Run it with those signals blocked until here,
    as `worker_pool` does, or a signal in between reaches the parent's handlers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in _TERMINATING:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT, *_TERMINATING])
    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=_exit_with_parent, args=(parent,), name="steerable-parent-watch", daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """Poll for the parent: a SIGKILLed parent cannot end its workers, and an orphan is re-parented.
    (Not PR_SET_PDEATHSIG: that follows the parent *thread*, and a pool may outlive the one that made it.)"""
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL_S)
    os._exit(1)


def _init_worker_then(parent: int, initializer: Callable[..., None] | None, initargs: tuple[Any, ...]) -> None:
    init_worker(parent)
    if initializer is not None:
        initializer(*initargs)


@contextlib.contextmanager
def worker_pool(processes: int, initializer: Callable[..., None] | None = None,
                initargs: tuple[Any, ...] = ()) -> Iterator[Pool]:
    """A `multiprocessing` pool (fork where the platform has it) set up by `init_worker`, then by
    `initializer(*initargs)` when given (shared memory passes there); leaving the block, by any
    exception or KeyboardInterrupt too, terminates the workers and waits for them."""
    import multiprocessing  # here: the CLI imports this module on every command

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    # Blocked while the pool starts: its workers, and the thread that replaces dead ones, inherit the
    # mask, so no Ctrl-C reaches a worker before init_worker ignores it.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT, *_TERMINATING])
    try:
        pool = multiprocessing.get_context(method).Pool(
            processes, initializer=_init_worker_then, initargs=(os.getpid(), initializer, initargs))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    try:
        yield pool
    finally:
        pool.terminate()
        pool.join()


def server_preexec() -> Callable[[], None]:
    """A `preexec_fn` for a server this process starts: SIGINT and SIGTERM default and unblocked
    (an ignored or blocked signal survives exec), and on Linux SIGTERM when the starting thread dies,
    so a SIGKILLed parent (a Ray actor) leaves no server holding its port. Only what is safe between
    fork and exec runs in the child: libc's prctl is looked up here, in the parent."""
    prctl = _prctl()
    parent = os.getpid()

    def preexec() -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT, signal.SIGTERM])
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
            if os.getppid() != parent:  # the parent died before prctl: no signal will come
                os._exit(1)

    return preexec


def _prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
