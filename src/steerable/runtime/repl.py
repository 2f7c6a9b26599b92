"""The interactive REPL: a live status panel (rich) above a prompt; the robot runs at the control rate.

The control loop runs in a background thread at `ctrl_hz`; the terminal is read key by key (cbreak
mode, so the panel keeps updating while you type). Ctrl-C stops the robot and closes the recording.
"""

from __future__ import annotations

import os
import select
import sys
import termios
import threading
import tty
from collections import deque
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from steerable.errors import ConfigError
from steerable.runtime.loop import RuntimeEvent
from steerable.runtime.session import Session, ctrl_c_deferred, format_event, parse_line

__all__ = ["StatusView", "run_repl"]

_STYLES = {"warn": "bold red", "speech": "bold cyan", "interjection": "yellow", "answer": "green", "done": "bold green"}


class StatusView:
    """What the live display shows: the status panel, recent events, and the line being typed."""

    def __init__(self, session: Session, console: Console) -> None:
        self.session = session
        self.console = console
        self.events: deque[tuple[str, str]] = deque(maxlen=14)
        self.typed = ""
        self.lock = threading.Lock()

    def on_event(self, event: RuntimeEvent) -> None:
        with self.lock:
            self.events.append((format_event(event), _STYLES.get(event.kind, "")))

    def note(self, text: str) -> None:
        """Front-end output (/help, /status, refusals), one log line per line."""
        with self.lock:
            for line in text.splitlines():
                self.events.append((line, "bold red" if line.startswith("!") else "dim"))

    def __rich__(self) -> Any:
        rt = self.session.runtime
        ctx = rt.state.snapshot()
        rates = rt.measured_rates()
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column()
        unset = Text("(not set)", style="dim")
        grid.add_row("scene", self.session.scene.removeprefix("scene "))  # the last /reset's, not the first
        grid.add_row("task", ctx.task or unset)
        grid.add_row("subtask", ctx.subtask or unset)
        grid.add_row("plan", ctx.plan or unset)
        grid.add_row("memory", ctx.memory or unset)
        grid.add_row("last speech", rt.state.last_speech or unset)
        grid.add_row("rates", f"control {rates['ctrl_hz']:.0f} Hz · chunks {rates['chunk_hz']:.1f} Hz · "
                              f"high level {rates['high_level_hz']:.2f} Hz · t={rt.clock.now():.1f}s")
        high = rt.high.name if rt.high is not None else "none (direct task)"
        waiting = rt.high_level_waiting_s
        if waiting is not None and waiting >= 0.5:  # a slow model's call in flight (no flicker for fast ones)
            high += f" (thinking {waiting:.0f} s)"
        grid.add_row("models", f"{high} / {rt.low.name}")
        mode = "done" if rt.state.done else rt.state.mode
        color = {"action": "green", "paused": "yellow", "done": "cyan"}[mode]
        env = self.session.options.env.name
        panel = Panel(grid, title=f"steerable run · {env} · [{color}]{mode}[/{color}]", title_align="left")
        hint = Text("plain text = interjection · /task /ask /pause /resume /reset /status /help /quit", style="dim")
        with self.lock:
            events = list(self.events)
            typed = self.typed
        prompt = Text(f"> {typed}", style="bold")
        return Group(panel, self._log_tail(events, [panel, hint, prompt]), hint, prompt)

    def _log_tail(self, events: list[tuple[str, str]], fixed: list[Any]) -> Text:
        """The newest event lines that fit beside `fixed` in the terminal, counted as wrapped rows.

        Live crops a display taller than the terminal at the bottom (the newest events, the prompt),
        so the log gives way: its oldest rows are dropped first.
        """
        console = self.console
        options = console.options
        room = console.size.height - 1 - sum(len(console.render_lines(part, options)) for part in fixed)
        rows: list[Text] = []
        for line, style in reversed(events):
            if len(rows) >= room:
                break
            rows[:0] = Text(line, style=style).wrap(console, options.max_width)
        return Text("\n").join(rows[-room:] if room > 0 else [])


def _keys(fd: int, stop: threading.Event) -> Any:
    """Yield typed characters (escape sequences dropped) until `stop` is set."""
    while not stop.is_set():
        ready, _, _ = select.select([fd], [], [], 0.1)
        if not ready:
            continue
        data = os.read(fd, 1024).decode(errors="ignore")
        if not data:
            yield "\x04"
            return
        i = 0
        while i < len(data):
            if data[i] == "\x1b":  # arrow keys and friends: skip the sequence
                i += 1
                while i < len(data) and not data[i].isalpha() and data[i] != "~":
                    i += 1
                i += 1
                continue
            yield data[i]
            i += 1


def _drop_word(text: str) -> str:
    """The line without its last word (Ctrl-W), keeping the space before it."""
    head = text.rstrip()
    return head[: head.rfind(" ") + 1]


def run_repl(session: Session) -> int:
    """Run the interactive session until /quit, Ctrl-D or Ctrl-C; returns the exit status."""
    console = Console(highlight=False)
    rt = session.runtime
    view = StatusView(session, console)
    rt.listeners.append(view.on_event)
    session.out = view.note
    stop = threading.Event()
    failure: list[BaseException] = []

    def control() -> None:
        try:
            rt.run(until=lambda: stop.is_set() or session.quit)
        except BaseException as exc:  # surfaced on the main thread, which stops reading keys
            failure.append(exc)
            stop.set()

    thread = threading.Thread(target=control, name="runtime-loop", daemon=True)
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    code = 0
    try:
        tty.setcbreak(fd)
        thread.start()
        with Live(view, console=console, refresh_per_second=8, transient=False):
            for key in _keys(fd, stop):
                if session.quit or failure:
                    break
                if key == "\x04":
                    session.quit = True
                elif key in "\r\n":
                    with view.lock:
                        line, view.typed = view.typed, ""
                    try:
                        session.handle(parse_line(line))
                    except ConfigError as exc:
                        session.out(f"! {exc}")
                elif key in "\x7f\b":
                    with view.lock:
                        view.typed = view.typed[:-1]
                elif key in "\x15\x17":  # Ctrl-U: the whole line; Ctrl-W: the last word
                    with view.lock:
                        view.typed = "" if key == "\x15" else _drop_word(view.typed)
                elif key.isprintable():
                    with view.lock:
                        view.typed += key
                if session.quit:
                    break
    except KeyboardInterrupt:
        console.print("interrupted: robot stopped")
        code = 130
    finally:
        with ctrl_c_deferred():
            stop.set()
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
            thread.join(5)
            written = session.close()
    console.print(session.final_report())
    if written is not None:
        console.print(f"recorded: {written}")
    if failure:
        raise failure[0]
    return code
