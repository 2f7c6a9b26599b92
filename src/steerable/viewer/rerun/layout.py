"""The Rerun blueprint of an episode: cameras on top, language and plots below."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from steerable.language.styles import CONTEXT_STYLES
from steerable.viewer.rerun.episode import FRAME_TIMELINE, camera_entity, camera_name

__all__ = ["episode_blueprint"]

_TEXT_STYLES = ("task", *CONTEXT_STYLES)


def episode_blueprint(cameras: Sequence[str], plots: Sequence[str], fps: float = 30.0) -> Any:
    """One 2D view per camera (with its VQA shapes), then text, language lanes and event log, then plots."""
    import rerun.blueprint as rrb

    camera_views = [
        rrb.Spatial2DView(
            origin=camera_entity(key),
            contents=["$origin/**", f"language/vqa/{camera_name(key)}/**"],
            name=camera_name(key),
        )
        for key in cameras
    ]
    text_views = [rrb.TextDocumentView(origin=f"language/{style}", name=style) for style in _TEXT_STYLES]
    lanes = rrb.StateTimelineView(
        origin="language",
        contents=[f"language/{style}" for style in ("subtask", "memory", "motion")],
        name="language over time",
    )
    events = rrb.TextLogView(origin="language", name="language events")
    plot_views = [rrb.TimeSeriesView(origin=f"plots/{key}", name=key) for key in plots]
    language = rrb.Horizontal(rrb.Vertical(*text_views), rrb.Vertical(lanes, events), column_shares=[2, 3])
    rows: list[Any] = []
    if camera_views:
        rows.append(rrb.Horizontal(*camera_views))
    rows.append(language)
    if plot_views:
        rows.append(rrb.Horizontal(*plot_views))
    shares = ([3.0] if camera_views else []) + [2.5] + ([1.5] if plot_views else [])
    return rrb.Blueprint(
        rrb.Vertical(*rows, row_shares=shares),
        rrb.BlueprintPanel(state="collapsed"),
        rrb.SelectionPanel(state="collapsed"),
        rrb.TimePanel(state="expanded", timeline=FRAME_TIMELINE, fps=fps),
    )
