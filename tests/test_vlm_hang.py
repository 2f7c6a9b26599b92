"""A VLM server that takes requests and never answers them (#34, item 12): the defaults bound the
wait, a server silent for twice the request timeout is given up so every call fails at once with the
reason, and the progress display says which server has kept requests waiting and for how long."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from rich.console import Console

from annotate_helpers import make_synthetic, steerable, summary_of
from steerable.annotate.engine import Progress
from steerable.annotate.executor import merge_stats
from steerable.annotate.progress import ProgressDisplay, Snapshot
from steerable.errors import VLMUnavailableError
from steerable.testing.server import TestServer
from steerable.vlm.config import VLMConfig
from steerable.vlm.openai_http import OpenAIHTTPVLM
from steerable.vlm.protocol import VLMStats
from steerable.vlm.retry import _MAX_BACKOFF_S

MODEL = "test-model"
URL = "http://127.0.0.1:9/v1"
SCHEMA = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}


class _Client:
    def __init__(self, stats: VLMStats) -> None:
        self.stats = stats


def _waiting(seconds: float) -> VLMStats:
    """Counters of a client with one request on the wire to URL, which has said nothing for `seconds`."""
    stats = VLMStats(calls=0, in_flight=1)
    stats.request_sent(URL)
    stats.silent_since[URL] = time.monotonic() - seconds
    return stats


def test_the_default_settings_end_a_call_to_a_silent_server_within_a_few_minutes() -> None:
    cfg = VLMConfig()
    backoff = sum(min(_MAX_BACKOFF_S, cfg.backoff_base_s * 2**k) for k in range(cfg.max_retries))
    worst_call_s = cfg.request_timeout_s * (cfg.max_retries + 1) + backoff
    assert worst_call_s <= 5 * 60, worst_call_s  # docs/vlm.md states it: 4 x 60 s + 3.5 s
    assert 2 * cfg.request_timeout_s <= 3 * 60  # when a server that answers nothing is given up


def test_the_display_names_a_server_that_has_kept_requests_waiting() -> None:
    progress = Progress(total=2, running=2, started_at=time.monotonic() - 130)
    line = Snapshot.of(progress, _Client(_waiting(125.0))).line()
    assert line.endswith(f"; no reply from {URL} for 125 s"), line
    console = Console(width=200, record=True)
    console.print(ProgressDisplay(progress, _Client(_waiting(125.0)), enabled=False)._table())
    assert f"no reply from {URL} for 125 s" in console.export_text()
    # A few seconds is a server at work, and a server nobody is waiting on says nothing.
    assert "no reply" not in Snapshot.of(progress, _Client(_waiting(5.0))).line()
    idle = _waiting(125.0)
    idle.request_ended(URL)
    assert "no reply" not in Snapshot.of(progress, _Client(idle)).line()


def test_a_reply_ends_the_silence_and_workers_silences_merge() -> None:
    stats = _waiting(125.0)
    stats.request_sent(URL)
    stats.reply_received(URL)  # another request is still on the wire: it waits from now
    assert stats.silent_for(URL) < 1.0 and URL in stats.no_reply()
    merged = merge_stats([_waiting(40.0).snapshot(), _waiting(125.0).snapshot(), {}])
    assert merged.no_reply().keys() == {URL} and merged.no_reply()[URL] == pytest.approx(125.0, abs=1.0)


def test_a_server_that_never_answers_is_given_up_and_later_calls_fail_at_once() -> None:
    cfg = VLMConfig(base_url=[], model_id=MODEL, request_timeout_s=0.3, max_retries=3, backoff_base_s=0.01,
                    client_concurrency=4)
    with TestServer(model_ids=[MODEL], latency_s=30.0) as server:  # lists its model, answers no chat call
        vlm = OpenAIHTTPVLM(cfg, urls=[server.url])

        async def calls() -> tuple[list[BaseException | object], float]:
            try:
                started = time.monotonic()
                first = await asyncio.gather(
                    *(vlm.generate_json([{"role": "user", "content": "hi"}], SCHEMA) for _ in range(8)),
                    return_exceptions=True,
                )
                later = time.monotonic()
                with pytest.raises(VLMUnavailableError, match="no reply from"):
                    await vlm.generate_json([{"role": "user", "content": "hi"}], SCHEMA)
                assert time.monotonic() - later < 0.2  # not a single request more
                return first, later - started
            finally:
                await vlm.aclose()

        results, took = asyncio.run(calls())
        sent = server.stats.chat_requests
    assert all(isinstance(r, VLMUnavailableError) for r in results), results
    reason = str(results[0])
    assert reason.startswith(f"no reply from {server.url} for ") and "requests timed out after 0.3 s each" in reason
    assert "--vlm.request_timeout_s" in reason
    # Without giving up, 8 calls x 4 attempts in slots of 4 take about 2.4 s and 32 requests.
    assert took < 2.0 and sent < 32, (took, sent)


def test_annotate_against_a_server_that_never_answers_ends_with_the_server_named(tmp_path: Path) -> None:
    root = make_synthetic(tmp_path / "ds", episodes=2)
    with TestServer(model_ids=[MODEL], latency_s=30.0) as server:
        started = time.monotonic()
        run = steerable(
            "annotate", "--root", str(root), "--vlm.base_url", server.url, "--vlm.model_id", MODEL,
            "--vlm.request_timeout_s", "0.5", "--vlm.backoff_base_s", "0.01", timeout=60,
        )
        took = time.monotonic() - started
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"no reply from {server.url} for " in run.stderr  # logged once, as it is given up
    failures = summary_of(root)["failures"]
    assert [f["episode_index"] for f in failures] == [0, 1]
    for failure in failures:
        for module in ("plan", "vqa"):
            assert failure["failed_modules"][module].startswith(f"no reply from {server.url} for "), failure
        assert failure["permanent"] == {}  # the server may be back: a re-run is the way on
    assert run.stdout.splitlines()[-1].endswith("re-run the same command to retry them (finished work is resumed)")
    assert took < 30, took
