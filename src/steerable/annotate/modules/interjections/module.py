"""The interjections module: user interjections with paired `say` replies, and plan refreshes.

Per episode: one spoken acknowledgement of the task at the first frame, then up to
`max_interjections_per_episode` interjections at subtask boundaries, each one Hi Robot scenario
(negative task, situated correction, specific constraint, preference) worded so that the recorded
next subtask satisfies it. Each interjection brings a `say` reply at the same frame and, where the
episode has plan rows, a refreshed `plan` row at that frame too: the plan from then on, as the robot
would restate it after hearing the person. One VLM call per interjection, all of an episode's calls
in flight together.
"""

from __future__ import annotations

import asyncio
import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, create_model

from steerable.annotate.context import EpisodeContext
from steerable.annotate.module import ModuleOutput
from steerable.annotate.modules.interjections.config import SCENARIOS, InterjectionsConfig, Scenario
from steerable.annotate.modules.interjections.scenarios import (
    Boundary,
    PlannedInterjection,
    choose_interjections,
    keystate_boundaries,
    subtask_boundaries,
    subtask_starts,
    window_times,
)
from steerable.annotate.modules.plan.rows import plan_text
from steerable.annotate.prompts import Prompt, PromptFolder
from steerable.errors import AnnotationError, VLMReplyError
from steerable.language.rows import speech_row
from steerable.vlm.protocol import VLMClient
from steerable.vlm.structured import ask

__all__ = [
    "PROMPTS",
    "AcknowledgeReply",
    "CueReply",
    "CueReplyWithPlan",
    "InterjectionsModule",
    "cue_reply",
    "validate_interjection_rows",
]

PROMPTS = PromptFolder("steerable.annotate.modules.interjections")

_TITLES: dict[Scenario, str] = {
    "negative_task": "negative task",
    "situated_correction": "situated correction",
    "specific_constraint": "specific constraint",
    "preference": "preference",
}

Text = Annotated[str, Field(min_length=1)]


class AcknowledgeReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reply: Text


class CueReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    interjection: Text
    reply: Text


class CueReplyWithPlan(CueReply):
    plan_steps: list[Text]


@functools.cache
def cue_reply(plan_steps: int | None) -> type[CueReply]:
    """The reply to an interjection cue; with a plan refresh, exactly `plan_steps` steps are required."""
    if plan_steps is None:
        return CueReply
    return create_model(
        f"CueReplyWithPlan{plan_steps}",
        __base__=CueReplyWithPlan,
        plan_steps=(Annotated[list[Text], Field(min_length=plan_steps, max_length=plan_steps)], ...),
    )




def _row(role: str, content: str, style: str, t: float) -> dict[str, Any]:
    return {
        "role": role,
        "content": content,
        "style": style,
        "timestamp": t,
        "camera": None,
        "tool_calls": None,
    }


def _say(text: str, t: float) -> dict[str, Any]:
    return {**speech_row(text), "timestamp": t}


class InterjectionsModule:
    """Hi Robot-style interjections with their spoken replies; needs a VLM."""

    name: ClassVar[str] = "interjections"
    # Plan rows give the boundaries and the plan to refresh; motion keystates stand in without them.
    requires: ClassVar[tuple[str, ...]] = ("plan", "motion")

    def __init__(self, config: InterjectionsConfig, *, vlm: VLMClient | None = None) -> None:
        self.config = config
        self._model_id = vlm.model_id if vlm is not None else None
        self._initial = PROMPTS.load("interjection_initial")
        self._cue = PROMPTS.load("interjection_cue")
        self._refresh = PROMPTS.load("interjection_plan_refresh")
        self._guides: dict[Scenario, Prompt] = {s: PROMPTS.load(f"interjection_{s}") for s in SCENARIOS}

    def fingerprint(self) -> dict[str, Any]:
        prompts = [self._initial, self._cue, self._refresh, *(self._guides[s] for s in self.config.scenarios)]
        return {
            "config": self.config.model_dump(mode="json", exclude={"enabled"}),
            "prompts": [p.id for p in prompts],
            "model": self._model_id,
            "algorithm": 1,
        }

    async def run(self, ctx: EpisodeContext) -> ModuleOutput:
        vlm: VLMClient | None = ctx.vlm
        if vlm is None:
            raise AnnotationError(
                "the interjections module needs a VLM: configure --vlm.* or --interjections.enabled=false"
            )
        if len(ctx.timestamps) == 0:
            return ModuleOutput(notes=["episode has no frames: no interjections"])
        notes: list[str] = []
        plan_rows = ctx.upstream.get("plan") or []
        spans = subtask_starts(plan_rows)
        has_plan = any(r.get("style") == "plan" for r in plan_rows)
        if spans:
            candidates = subtask_boundaries(spans, self.config.interjection_min_t)
        else:
            keystates = ctx.upstream_meta.get("motion", {}).get("keystates")
            candidates = keystate_boundaries(keystates, ctx.timestamps, ctx.frame_time, self.config)
            notes.append(
                "no subtask rows: interjections at "
                + ("motion keystates" if keystates else "even splits of the episode")
                + ", without plan refresh"
            )
        planned = choose_interjections(candidates, self.config, ctx.rng("interjections"))
        if not planned and self.config.max_interjections_per_episode > 0:
            notes.append(f"no boundary at or after {self.config.interjection_min_t:g}s: no interjections")
        refresh = self.config.plan_refresh and has_plan and bool(spans)
        camera = ctx.camera or next(iter(ctx.dataset.camera_keys), None)
        if camera is None or ctx.frames is None:
            notes.append("no camera to show: interjections are written from the subtask labels alone")
        jobs = [self._interjection(ctx, vlm, p, camera, refresh) for p in planned]
        if self.config.initial_acknowledgement:
            jobs.append(self._acknowledge(ctx, vlm))
        results = await asyncio.gather(*jobs)
        rows: list[dict[str, Any]] = []
        for result_rows, result_notes in results:
            rows.extend(result_rows)
            notes.extend(result_notes)
        if jobs and not rows:  # every call failed: a failed module, never staged as done
            raise AnnotationError(f"every one of its {len(jobs)} VLM calls failed ({notes[-1]})")
        meta = {
            "interjections": [{"time": p.boundary.time, "scenario": p.scenario} for p in planned],
            "plan_refresh": refresh,
        }
        return ModuleOutput(rows=rows, meta=meta, notes=notes)

    async def _acknowledge(
        self, ctx: EpisodeContext, vlm: VLMClient
    ) -> tuple[list[dict[str, Any]], list[str]]:
        prompt = self._initial.render(task=ctx.effective_task)
        try:
            reply = await ask(
                vlm,
                [{"role": "user", "content": prompt}],
                AcknowledgeReply,
                affinity=f"episode-{ctx.episode_index}",
                purpose="interjections.acknowledge",
            )
        except VLMReplyError as error:  # costs only the acknowledgement row
            return [], [f"no initial `say` row: the acknowledgement call failed ({error.reason or error})"]
        text = reply.reply.strip()
        if not text:
            return [], ["empty acknowledgement from the VLM: no initial `say` row"]
        return [_say(text, float(ctx.timestamps[0]))], []

    async def _interjection(
        self,
        ctx: EpisodeContext,
        vlm: VLMClient,
        planned: PlannedInterjection,
        camera: str | None,
        refresh: bool,
    ) -> tuple[list[dict[str, Any]], list[str]]:
        b = planned.boundary
        steps = len(b.remaining) if refresh else None
        prompt = self._cue.render(**self._cue_values(ctx, b, planned.scenario, steps))
        content: list[dict[str, Any]] = []
        if camera is not None and ctx.frames is not None:
            times = window_times(b.time, ctx.timestamps, ctx.frame_time, self.config)
            content = [{"type": "image", "image": f} for f in await ctx.frames.get(camera, times)]
        content.append({"type": "text", "text": prompt})
        try:
            reply = await ask(
                vlm,
                [{"role": "user", "content": content}],
                cue_reply(steps),
                affinity=f"episode-{ctx.episode_index}",
                purpose=f"interjections.{planned.scenario}",
            )
        except VLMReplyError as error:  # costs only this interjection's rows
            return [], [f"an interjection was dropped: its call failed ({error.reason or error})"]
        said = reply.interjection.strip()
        answer = reply.reply.strip()
        if not said or not answer:
            return [], ["an interjection was dropped: the VLM gave an empty interjection or reply"]
        rows = [_row("user", said, "interjection", b.time), _say(answer, b.time)]
        notes: list[str] = []
        if refresh:
            proposed = [step.strip() for step in reply.plan_steps] if isinstance(reply, CueReplyWithPlan) else []
            if len(proposed) != len(b.remaining) or not all(proposed):
                # The recording fixes what happens next, so a plan of another length cannot be right.
                notes.append("a refreshed plan had the wrong number of steps; kept the subtask labels")
                proposed = list(b.remaining)
            rows.append(_row("assistant", plan_text(proposed), "plan", b.time))
        return rows, notes

    def _cue_values(
        self, ctx: EpisodeContext, b: Boundary, scenario: Scenario, steps: int | None
    ) -> dict[str, str]:
        shape = '{"interjection": "<what the person says>", "reply": "<what the robot says>"'
        shape += ', "plan_steps": ["<step>", ...]}' if steps is not None else "}"
        done = "; ".join(b.done) or "(nothing yet)"
        if b.next_step is None:
            done = "(not labelled)"
        return {
            "time": f"{b.time:.2f}",
            "task": ctx.effective_task,
            "done": done,
            "next_step": b.next_step or "(not labelled: judge it from the frames after the middle one)",
            "remaining": "; ".join(b.remaining) if b.remaining else "(not labelled)",
            "scenario_title": _TITLES[scenario],
            "scenario_guide": self._guides[scenario].render().strip(),
            "plan_rule": self._refresh.render(count=steps).rstrip() if steps is not None else "",
            "answer_shape": shape,
        }


def validate_interjection_rows(rows: Iterable[Mapping[str, Any]], has_plan: bool) -> list[str]:
    """Problems with an episode's interjection rows (`rows`: the episode's merged staged rows).

    Every interjection needs a `say` atom at its frame; when the episode has plan rows, exactly one
    plan row must stand at each interjection's frame, so the plan in force there has heard it.
    """
    interjections: list[float] = []
    says: set[float] = set()
    plans: dict[float, int] = defaultdict(int)
    problems: list[str] = []
    for r in rows:
        t = r.get("timestamp")
        if r.get("style") == "interjection":
            if t is None or not str(r.get("content") or "").strip():
                what = "without a timestamp" if t is None else "with empty content"
                problems.append(f"interjection row {what}: {dict(r)!r}")
            else:
                interjections.append(float(t))
        elif r.get("style") is None and r.get("role") == "assistant" and _is_say(r) and t is not None:
            says.add(float(t))
        elif r.get("style") == "plan" and t is not None:
            plans[float(t)] += 1
    for t in sorted(interjections):
        if t not in says:
            problems.append(f"interjection at t={t:.4f}s has no `say` reply at the same frame")
        if has_plan and plans.get(t, 0) == 0:
            problems.append(f"interjection at t={t:.4f}s has no plan row at the same frame (plan refresh)")
        elif plans.get(t, 0) > 1:
            problems.append(
                f"interjection at t={t:.4f}s has {plans[t]} plan rows at its frame; "
                "`${plan}` would be ambiguous there"
            )
    return problems


def _is_say(row: Mapping[str, Any]) -> bool:
    calls = row.get("tool_calls") or []
    return any(
        isinstance(c, Mapping)
        and isinstance(c.get("function"), Mapping)
        and c["function"].get("name") == "say"
        for c in calls
    )
