"""The `plan` module: effective task, task_aug, subtasks, plan and memory rows for one episode."""

from __future__ import annotations

import asyncio
from dataclasses import fields, replace
from typing import Any, ClassVar

from steerable.annotate.context import EpisodeContext
from steerable.annotate.module import ModuleOutput
from steerable.annotate.modules.plan.config import PlanConfig
from steerable.annotate.modules.plan.memory import memory_chain
from steerable.annotate.modules.plan.prompting import PROMPTS, REPLIES, SampledVideo
from steerable.annotate.modules.plan.rows import memory_rows, plan_rows, subtask_rows, task_aug_rows
from steerable.annotate.modules.plan.segment import segment_video
from steerable.annotate.modules.plan.spans import Span, SpanReport, finalize_spans
from steerable.annotate.modules.plan.task import derive_task, needs_derivation, rephrase_task
from steerable.errors import AnnotationError
from steerable.motion.keystates import Keystate
from steerable.motion.snap import snap_boundaries
from steerable.vlm.protocol import VLMClient
from steerable.vlm.structured import reply_schema

__all__ = ["KeystatePlanModule", "PlanModule", "make_plan_module"]

_ALGORITHM = 1  # bump when the span algebra changes, so staged episodes are redone


class PlanModule:
    """Segments an episode into subtasks with a VLM reading timestamped contact sheets.

    VLM calls per episode, one at a time: [task from video] + per window ([describe] + segment)
    + [rephrasings] + [memories]; bracketed calls depend on the config.
    """

    name: ClassVar[str] = "plan"
    requires: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: PlanConfig | None = None, *, vlm: VLMClient | None = None) -> None:
        self.config = config or PlanConfig()
        self._model_id = vlm.model_id if vlm is not None else None

    def prompt_ids(self) -> list[str]:
        """Ids of every prompt this configuration can send."""
        c = self.config
        names = ["plan_sheet_guide", "plan_event_rules", "plan_segment"]
        names += ["plan_describe", "plan_observation"] if c.subtask_describe_first else []
        names += ["plan_task_from_video"] if c.derive_task_from_video != "off" else []
        names += ["plan_task_rephrasings"] if c.n_task_rephrasings > 0 else []
        names += ["plan_memory"] if c.emit_memory else []
        return sorted(PROMPTS.load(n).id for n in names)

    def fingerprint(self) -> dict[str, Any]:
        schemas = [reply_schema(model) for model in REPLIES]
        return {
            "config": self.config.model_dump(mode="json", exclude={"enabled"}),
            "prompts": self.prompt_ids(),
            "schemas": schemas,
            "model": self._model_id,
            "algorithm": _ALGORITHM,
        }

    async def run(self, ctx: EpisodeContext) -> ModuleOutput:
        c = self.config
        vlm = ctx.vlm
        if vlm is None:
            raise AnnotationError(
                "the plan module needs a vision-language model: pass --vlm.base_url (or --vlm.backend), "
                "or turn it off with --plan.enabled=false"
            )
        if len(ctx.timestamps) == 0:
            raise AnnotationError(f"episode {ctx.episode_index} has no frames")
        affinity = f"episode-{ctx.episode_index}"
        first = float(ctx.timestamps[0])
        video = await self._sample(ctx, first)
        notes: list[str] = []
        task = await self._effective_task(ctx, vlm, video, affinity, notes)
        shown_task = task or "(no task given)"
        final = await self._subtasks(ctx, vlm, video, shown_task, affinity, notes)

        rows: list[dict[str, Any]] = []
        if c.n_task_rephrasings > 0 and task:
            variants = await rephrase_task(vlm, task, c.n_task_rephrasings, affinity)
            if variants is None:
                notes.append("no task rephrasings from the model: task_aug holds the task only")
            rows += task_aug_rows(first, task, variants or [])
        rows += subtask_rows(final)
        if c.emit_plan:
            rows += plan_rows(final)
        if c.emit_memory and len(final) > 1:
            memories, by_model = await memory_chain(vlm, shown_task, [s.text for s in final], affinity)
            if not by_model:
                notes.append("memories built from the subtask labels: the model gave none usable")
            rows += memory_rows(final, memories)
        return ModuleOutput(rows=rows, meta={"effective_task": task}, notes=notes)

    async def _effective_task(
        self, ctx: EpisodeContext, vlm: VLMClient, video: SampledVideo, affinity: str, notes: list[str]
    ) -> str:
        """The dataset's task, or one read from the video when `derive_task_from_video` asks for it."""
        task = ctx.task.strip()
        if not needs_derivation(task, self.config):
            return task
        derived = await derive_task(vlm, video, affinity)
        if not derived:
            notes.append("no task could be read from the video; kept the dataset's task")
            return task
        notes.append(f"task taken from the video: {derived!r} (dataset task: {task!r})")
        return derived

    async def _subtasks(
        self,
        ctx: EpisodeContext,
        vlm: VLMClient,
        video: SampledVideo,
        task: str,
        affinity: str,
        notes: list[str],
    ) -> list[Span]:
        """The final gap-free subtask cover; AnnotationError (with the reason) when nothing is usable."""
        c = self.config
        report = SpanReport()
        spans, windows = await segment_video(vlm, video, task, c, affinity, report)
        if windows > 1:
            notes.append(f"segmented in {windows} overlapping windows")
        spans = self._snap(ctx, spans, notes)
        final = finalize_spans(
            spans,
            ctx.timestamps,
            end=float(ctx.timestamps[-1]) + 1.0 / ctx.dataset.fps,
            min_seconds=c.min_subtask_seconds,
            max_steps=c.plan_max_steps,
            report=report,
        )
        notes += report.notes()
        if not final:
            detail = "; ".join(report.notes()) or "the replies listed none"
            raise AnnotationError(f"the model gave no usable subtasks for episode {ctx.episode_index} ({detail})")
        return final

    async def _sample(self, ctx: EpisodeContext, first: float) -> SampledVideo:
        """The episode's frames at `frames_per_second`, decoded once for every prompt that shows them."""
        camera = ctx.camera or next(iter(ctx.dataset.camera_keys), None)
        if camera is None:
            raise AnnotationError(
                f"{ctx.dataset.root} has no video camera: the plan module needs one "
                "(turn it off with --plan.enabled=false to annotate from proprioception only)"
            )
        times = ctx.sample_times(self.config.frames_per_second, start=first)
        if ctx.frames is not None:
            frames = await ctx.frames.get(camera, times)
        else:
            frames = await asyncio.to_thread(ctx.dataset.decode_frames, ctx.episode_index, camera, times)
        video = SampledVideo(times, frames, self.config)
        await video.prepare()
        return video

    def _snap(self, ctx: EpisodeContext, spans: list[Span], notes: list[str]) -> list[Span]:
        """Boundaries moved onto motion keystates when `snap_to_keystates` is on and keystates exist."""
        if not self.config.snap_to_keystates or len(spans) < 2:
            return spans
        raw = ctx.upstream_meta.get("motion", {}).get("keystates")
        if not raw:
            notes.append("snap_to_keystates: the motion module found no keystates; boundaries kept")
            return spans
        moved = snap_boundaries(
            [s.start for s in spans[1:]], _keystates(raw), self.config.snap_tolerance_s, ctx.timestamps
        )
        return [spans[0], *(replace(s, start=t) for s, t in zip(spans[1:], moved, strict=True))]


class KeystatePlanModule(PlanModule):
    """The plan module when boundaries snap to motion keystates: it reads the motion module's output."""

    requires: ClassVar[tuple[str, ...]] = ("motion",)


def _keystates(raw: list[dict[str, Any]]) -> list[Keystate]:
    """Keystates back from the motion module's staged meta (plain dicts; only `time` is required)."""
    names = {f.name for f in fields(Keystate)}
    out = []
    for item in raw:
        values: dict[str, Any] = {"frame_index": -1, "kind": "pause", "strength": 1.0, "start_index": -1,
                                  "end_index": -1}
        values.update({k: v for k, v in item.items() if k in names})
        out.append(Keystate(**values))
    return out


def make_plan_module(config: PlanConfig | None = None, *, vlm: VLMClient | None = None) -> PlanModule:
    """The plan module for `config`; with snapping on it declares its dependency on `motion`
    (so a change in motion settings re-runs it on resume)."""
    config = config or PlanConfig()
    cls = KeystatePlanModule if config.snap_to_keystates else PlanModule
    return cls(config, vlm=vlm)
