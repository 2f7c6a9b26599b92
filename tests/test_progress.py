"""The live progress line: what a user watching a run sees."""

from __future__ import annotations

import time

from rich.console import Console

from steerable.annotate.engine import Progress
from steerable.annotate.progress import ProgressDisplay, vlm_counters
from steerable.vlm.protocol import VLMStats


class _Client:
    def __init__(self) -> None:
        self.stats = VLMStats(calls=120, in_flight=7, retries=3, prompt_tokens=9000, completion_tokens=1000)


def _render(display: ProgressDisplay) -> str:
    console = Console(width=200, record=True)
    console.print(display._table())
    return console.export_text()


def test_progress_shows_episodes_calls_rates_and_eta() -> None:
    progress = Progress(total=10, done=3, failed=1, resumed=1, running=4, started_at=time.monotonic() - 10)
    text = _render(ProgressDisplay(progress, _Client(), enabled=False))
    for part in ("episodes 4/10", "done 3", "failed 1", "resumed 1", "running 4", "VLM calls 120",
                 "in flight 7", "calls/s", "tok/s", "retries 3"):
        assert part in text
    assert "ETA" in text and "ETA -" not in text  # 3 worked episodes in 10 s: an estimate exists


def test_without_a_model_only_episodes_show() -> None:
    progress = Progress(total=2)
    text = _render(ProgressDisplay(progress, None, enabled=False))
    assert "episodes 0/2" in text and "VLM calls" not in text
    assert vlm_counters(None) == {}
