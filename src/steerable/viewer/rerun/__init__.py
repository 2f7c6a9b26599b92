"""Log LeRobot v3 episodes with their language annotations to Rerun (`steerable view DATASET --rerun`).

One Rerun recording per episode (recording id `episode_NNNNNN`), on two timelines: `frame_index`
(sequence) and `time` (episode seconds, as stored in the parquet). Entity layout:

- `cameras/<name>`: the episode's mp4 as an `AssetVideo` with one `VideoFrameReference` per frame;
- `plots/<feature>`: every state/action feature as `Scalars`, one named series per dimension;
- `language/<style>`: persistent rows (`subtask`, `plan`, `memory`, `motion`, `task_aug`) as a
  `TextDocument` plus a `StateChange` at the row's time (latest-at: the value holds until the next row);
- `language/interjection`, `language/speech`, `language/tool`: event rows as `TextLog` at their frame;
- `language/vqa/<camera>`: the question and answer as `TextLog`, and under it `boxes` / `points`
  in the pixels of that camera's frame, labelled with the question and answer, cleared after 1 s.

The `rerun-sdk` package is the `[rerun]` extra; every entry point imports it lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from steerable.lazy import lazy_exports

if TYPE_CHECKING:
    from steerable.viewer.rerun.episode import VideoMode, log_episode
    from steerable.viewer.rerun.layout import episode_blueprint
    from steerable.viewer.rerun.sinks import RerunTarget, import_rerun, log_dataset, parse_target

__all__ = [
    "RerunTarget",
    "VideoMode",
    "episode_blueprint",
    "import_rerun",
    "log_dataset",
    "log_episode",
    "parse_target",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "VideoMode": "episode",
        "log_episode": "episode",
        "episode_blueprint": "layout",
        "RerunTarget": "sinks",
        "import_rerun": "sinks",
        "log_dataset": "sinks",
        "parse_target": "sinks",
    },
)
