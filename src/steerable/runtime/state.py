"""The runtime's shared state: task, language context, mode, action queue and the revision counter.

Every change of task, context or mode bumps `revision`. An action chunk carries the revision it was
computed against; a chunk whose revision is no longer current is discarded, never executed, so a new
prompt (or a pause) can never run actions planned for the old one. The state is shared between the
control loop and the operator's input thread, hence the lock.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from steerable.control import LanguageContext
from steerable.language.styles import CONTEXT_STYLES

__all__ = ["Mode", "RuntimeState"]

Mode = Literal["action", "paused"]


@dataclass
class RuntimeState:
    """See the module docstring; mutate through the methods (they hold the lock and bump revision)."""

    task: str = ""
    context: dict[str, str] = field(default_factory=dict)
    mode: Mode = "paused"
    revision: int = 0
    queue: deque[np.ndarray] = field(default_factory=deque)
    queue_revision: int = -1
    done: bool = False  # the high-level declared the task complete
    hold: bool = False  # after a failed high-level call: no motion until an update succeeds
    controller_done: bool = False
    controller_error: str | None = None
    last_speech: str | None = None
    last_answer: str | None = None
    actions_dispatched: int = 0
    chunks_discarded: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def _bump(self) -> None:
        self.revision += 1
        self.queue.clear()
        self.controller_done = False
        self.controller_error = None

    def set_task(self, task: str) -> None:
        """A new task: the context, queue and completion flag start over."""
        with self.lock:
            self.task = task
            self.context.clear()
            self.done = False
            self.hold = False
            self._bump()

    def set_context(self, key: str, value: str | None) -> bool:
        """Set (None or "" removes) one context entry; returns whether it changed."""
        if key not in CONTEXT_STYLES:
            raise KeyError(f"unknown context key {key!r}; one of {CONTEXT_STYLES}")
        with self.lock:
            if (value or None) == self.context.get(key):
                return False
            if value:
                self.context[key] = value
            else:
                self.context.pop(key, None)
            self._bump()
            return True

    def set_mode(self, mode: Mode) -> bool:
        with self.lock:
            if mode == self.mode:
                return False
            self.mode = mode
            self._bump()
            return True

    def invalidate(self) -> None:
        """Bump the revision without changing anything (e.g. an interjection): what is queued or in
        flight for the old revision is discarded."""
        with self.lock:
            self._bump()

    def snapshot(self) -> LanguageContext:
        with self.lock:
            return LanguageContext(
                task=self.task,
                subtask=self.context.get("subtask"),
                plan=self.context.get("plan"),
                memory=self.context.get("memory"),
                revision=self.revision,
            )

    def enqueue(self, actions: np.ndarray, revision: int) -> bool:
        """Queue a chunk computed against `revision`; False (and counted) when that revision is stale."""
        with self.lock:
            if revision != self.revision or self.mode != "action":
                self.chunks_discarded += 1
                return False
            self.queue.clear()
            self.queue.extend(np.asarray(a, dtype=np.float32) for a in actions)
            self.queue_revision = revision
            return True

    def pop_action(self) -> np.ndarray | None:
        """The next action to dispatch, or None (queue empty, paused, or queued for an old revision)."""
        with self.lock:
            if self.mode != "action" or not self.queue or self.queue_revision != self.revision:
                return None
            self.actions_dispatched += 1
            return self.queue.popleft()

    @property
    def busy(self) -> bool:
        """Whether the robot has work: in action mode with a task that is neither done nor failed."""
        with self.lock:
            return self.mode == "action" and bool(self.task) and not self.done and self.controller_error is None
