"""One episode's actions and subtask timeline as the policy trains on them.

With `skip_pauses` the actions are read from the episode without its pauses: frames whose command
repeats the previous one (the demonstrator holding still, for a random time) train no actions, and
a chunk is the next `chunk_size` commands that move; the stillness that ends an episode stays. A still pose
otherwise maps to "wait" on some
frames and "go" on others, which nothing in the observation tells apart; the averaged prediction
creeps, and a creeping rollout leaves the demonstrations' states (benchmarks/README.md,
"bc_baseline.py"). The world follows each command, so what remains is still a valid trajectory.

The subtask timeline (`EpisodeSubtasks`) labels the done head: where each command of the episode's
`subtask` rows is done, not done, or unknown.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from steerable.dataset import LeRobotDataset
from steerable.dataset.frames import feature_matrix
from steerable.policy.config import PolicyConfig

__all__ = ["EpisodeActions", "EpisodeSubtasks", "episode_actions", "episode_subtasks"]


class EpisodeActions:
    """One episode's actions as the policy trains on them: per frame, the chunk that starts there,
    its mask, and the last commanded motion before it (see the module docstring)."""

    def __init__(self, actions: np.ndarray, cfg: PolicyConfig) -> None:
        self.actions = actions
        self.cfg = cfg
        moving = np.ones(len(actions), dtype=bool)
        if cfg.skip_pauses and len(actions) > 1:
            moving[1:] = np.any(actions[1:] != actions[:-1], axis=1)
            # The stillness that ends the episode stays: holding at the end of the task is what the
            # robot should do there, and that end state is no other frame's.
            last = int(np.flatnonzero(moving)[-1])
            moving[last:] = True
        # Where the episode's last command is done: its final stillness (the last frame without one).
        change = np.flatnonzero(np.any(actions[1:] != actions[:-1], axis=1)) if len(actions) > 1 else np.zeros(0, int)
        self.final_still = int(change[-1]) + 2 if len(change) else len(actions) - 1
        self.kept = np.flatnonzero(moving)  # the frames that train actions, in order
        self.rank = np.full(len(actions), -1)
        self.rank[self.kept] = np.arange(len(self.kept))
        self.pose = [a for a, _ in cfg.pose_pairs]

    def chunk(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        """(chunk_size, A) actions from frame `row` and their mask (False past the end, or everywhere
        on a pause frame)."""
        size = self.cfg.chunk_size
        rank = int(self.rank[row])
        if rank < 0:
            return np.repeat(self.actions[row: row + 1], size, axis=0), np.zeros((size, self.actions.shape[1]), bool)
        chunk = self.actions[self.kept[rank: rank + size]]
        # Past the episode's end the robot holds its last action: a sensible input for the expert's
        # attention, and masked out of the loss.
        padded = np.repeat(chunk[-1:], size, axis=0)
        padded[: len(chunk)] = chunk
        mask = np.zeros(padded.shape, dtype=bool)
        mask[: len(chunk)] = True
        return padded, mask

    def motion(self, row: int) -> np.ndarray:
        """The last commanded motion of the pose dimensions before frame `row` (the step between the
        two moving commands before it; zero at the start)."""
        out = np.zeros(self.cfg.motion_dim, dtype=np.float32)
        if not self.cfg.motion_dim:
            return out
        rank = int(self.rank[row]) if self.rank[row] >= 0 else int(np.searchsorted(self.kept, row))
        if rank >= 2:
            before, last = self.actions[self.kept[rank - 2]], self.actions[self.kept[rank - 1]]
            out[:] = (last - before)[self.pose]
        return out


class EpisodeSubtasks:
    """Where one episode's subtasks start (its `subtask` rows), for the done head: is a command done
    at a frame? The active subtask is not done on its frames (up to `margin` frames before the next
    one starts: the boundary is not exact); the one before it is done on the first `after` frames of
    the next (unless an interjection started the next: a redirected command was not finished); the
    last one is done on the episode's final stillness."""

    def __init__(self, starts: Sequence[tuple[int, str]], event_frames: Sequence[int], final_still: int,
                 length: int, fps: float, margin: int = 3) -> None:
        self.starts = sorted(starts)
        self.events = set(event_frames)
        self.final_still = final_still
        self.length = length
        self.after = max(1, int(round(fps)))
        self.margin = margin

    def active(self, row: int) -> tuple[int, str] | None:
        """(index, text) of the subtask active at `row`."""
        found = None
        for k, (start, text) in enumerate(self.starts):
            if start <= row:
                found = (k, text)
        return found

    def label(self, row: int, command: str) -> float:
        """1 done, 0 not done, -1 unknown (not the active command, or too near a boundary)."""
        found = self.active(row)
        if found is None or found[1] != command:
            return -1.0
        k = found[0]
        if k == len(self.starts) - 1:
            return 1.0 if row >= self.final_still else 0.0
        nxt = self.starts[k + 1][0]
        return 0.0 if row < nxt - self.margin else -1.0

    def end_row(self, row: int, command: str) -> int | None:
        """The last frame of `command`'s segment when `command` is active at `row` (or finished less
        than `after` frames before it): where the robot was sent, the goal head's hindsight label. None
        for a segment an interjection cut short (it did not end where its command sends the robot)."""
        for k, (start, text) in enumerate(self.starts):
            if text != command or start > row:
                continue
            if k == len(self.starts) - 1:
                return self.final_still
            nxt = self.starts[k + 1][0]
            if nxt in self.events:
                return None
            if row < nxt + self.after:
                return max(start, nxt - 1)
        return None

    def final(self) -> list[tuple[int, str]]:
        """(row, command) pairs of the last command on the first `after` frames of the final stillness."""
        if not self.starts:
            return []
        end = min(self.final_still + self.after, self.length)
        return [(r, self.starts[-1][1]) for r in range(self.final_still, end)]

    def beginnings(self) -> list[tuple[int, str]]:
        """(row, command) pairs on each command's first `after` frames, where it has not taken yet: the camera
        step check's counter-examples (`PolicyDataset`)."""
        ends = [start for start, _ in self.starts[1:]] + [self.length]
        return [(r, text) for (start, text), end in zip(self.starts, ends, strict=True)
                for r in range(start, min(start + self.after, end))]

    def positives(self) -> list[tuple[int, str]]:
        """(row, command) pairs where `command` is done: the previous subtask on the next one's first frames."""
        out = []
        for (_, text), (start, _) in zip(self.starts, self.starts[1:], strict=False):
            if start in self.events:
                continue
            out += [(r, text) for r in range(start, min(start + self.after, self.length))]
        return out


def episode_subtasks(dataset: LeRobotDataset, episode: int, actions: EpisodeActions) -> EpisodeSubtasks:
    from steerable.language.styles import LANGUAGE_EVENTS, LANGUAGE_PERSISTENT

    columns = [c for c in (LANGUAGE_PERSISTENT, LANGUAGE_EVENTS) if c in dataset.features]
    starts: list[tuple[int, str]] = []
    events: list[int] = []
    if columns:
        table = dataset.read_episode(episode, columns)
        if LANGUAGE_PERSISTENT in columns and table.num_rows:
            for r in table.column(LANGUAGE_PERSISTENT)[0].as_py() or ():
                if r.get("style") == "subtask" and r.get("content"):
                    starts.append((int(round(float(r.get("timestamp") or 0.0) * dataset.fps)), str(r["content"])))
        if LANGUAGE_EVENTS in columns:
            events = [i for i, rows in enumerate(table.column(LANGUAGE_EVENTS).to_pylist()) if rows]
    return EpisodeSubtasks(starts, events, actions.final_still, len(actions.actions), dataset.fps)


def episode_actions(dataset: LeRobotDataset, cfg: PolicyConfig, episode: int) -> EpisodeActions:
    table = dataset.read_episode(episode, [cfg.action_key])
    return EpisodeActions(feature_matrix(table, cfg.action_key).astype(np.float32), cfg)
