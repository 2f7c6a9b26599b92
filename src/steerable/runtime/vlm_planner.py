"""A high-level model served by any OpenAI-compatible VLM (vLLM, SGLang, a hosted API).

Prompts come from the recipe (`RecipePrompts`), so a VLM fine-tuned on `steerable export` output
sees the layout it was trained on; each request asks for a reply model of `runtime.parsing` (its
JSON schema constrains the server, `vlm.structured.ask` reads the reply into it). The
reference cascade: an update asks for the subtask, and when it changed, for a memory note. The
async client runs on a private event loop thread; every call has a deadline. Garbage or a timeout
raises, and the runtime holds the robot still and tells the operator.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any, TypeVar

from steerable.control import HighLevelRequest, HighLevelUpdate
from steerable.errors import VLMUnavailableError
from steerable.runtime.parsing import REPLIES
from steerable.runtime.prompts import Purpose, RecipePrompts
from steerable.vlm import VLMClient, VLMConfig, make_vlm
from steerable.vlm.structured import ask

__all__ = ["VLMPlanner"]

T = TypeVar("T")

_PURPOSE = {"update": "subtask", "interjection": "speech", "ask": "vqa"}


class VLMPlanner:
    """`HighLevelModel` over a `VLMClient`; `timeout_s` bounds each call, retries included."""

    wants_images = True

    def __init__(self, client: VLMClient, prompts: RecipePrompts, *, timeout_s: float = 30.0,
                 model_id: str = "vlm") -> None:
        self.client = client
        self.prompts = prompts
        self.timeout_s = timeout_s
        self.name = f"VLM planner ({model_id})"
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vlm-planner", daemon=True)
        self._thread.start()

    @classmethod
    def from_config(cls, config: VLMConfig, *, recipe: str | None = None) -> VLMPlanner:
        """Build from the `--vlm.*` settings plus `recipe`; a reply's deadline is `--vlm.timeout_s`
        (`request_timeout_s`)."""
        planner = cls(make_vlm(config), RecipePrompts.load(recipe), timeout_s=config.request_timeout_s,
                      model_id=config.model_id or "vlm")
        planner.check(", ".join(config.base_url))
        return planner

    def check(self, where: str | None = None) -> None:
        """Ask the server once before the robot moves: a wrong URL or model id, or a server that
        never answers, is a `VLMError` (one line), not a session of failed updates."""
        try:
            self._run(self.client.check())
        except BaseException as exc:
            with contextlib.suppress(Exception):
                self.close()
            if isinstance(exc, TimeoutError):
                raise VLMUnavailableError(
                    f"the VLM server at {where or 'the configured URL'} did not answer within {self.timeout_s:g} s; "
                    "start it, wait for it, or raise --vlm.timeout_s"
                ) from None
            raise
        self.name = f"VLM planner ({self.client.model_id or 'vlm'})"

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout=self.timeout_s)
        except TimeoutError:
            future.cancel()
            raise TimeoutError(f"no reply within {self.timeout_s:g} s") from None

    def _ask(self, purpose: Purpose, messages: list[dict[str, Any]]) -> HighLevelUpdate:
        reply = self._run(ask(self.client, messages, REPLIES[purpose], purpose=f"runtime:{purpose}"))
        return reply.update()

    def update(self, request: HighLevelRequest) -> HighLevelUpdate:
        purpose: Purpose = _PURPOSE[request.kind]  # type: ignore[assignment]
        if not self.prompts.has(purpose):
            purpose = "subtask"
        ctx, obs = request.context, request.observation
        messages = self.prompts.render(purpose, ctx, obs, user_text=request.user_text)
        update = self._ask(purpose, messages)
        changed = purpose == "subtask" and update.subtask and update.subtask != ctx.subtask and ctx.subtask
        if changed and self.prompts.has("memory"):
            memory_prompt = self.prompts.render("memory", ctx, obs, new_subtask=update.subtask)
            memory = self._ask("memory", memory_prompt).memory
            update = replace(update, memory=memory)
        return update

    def reset(self) -> None:
        return None

    def close(self) -> None:
        self._run(self.client.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
