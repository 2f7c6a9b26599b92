"""Record a rollout as a LeRobot v3 dataset whose language columns hold what happened live.

One episode per task (a new `/task` or `/reset` starts the next one). Frames are the control ticks:
the observation's state and camera frames, and the action dispatched (the current state when the
robot held still). Language: the task (a `task_aug` row), every subtask / plan / memory at the
frame it took effect (persistent rows), every interjection (an event row of style `interjection`)
and every spoken reply (an event row whose `tool_calls` holds a `say` call) on the exact frame; a
question (`/ask`) and its answer become a `vqa` pair on `camera` at the question's frame (the last
exchange of a frame), however many ticks later the answer came.

The hooks run on the control loop's thread and only keep what they are given: an episode that ends
is handed to a writer thread (a queue of at most `QUEUED_EPISODES`; past that the loop waits for the
writer, which bounds the memory) that encodes its videos and writes its files, so a `/task` never
stalls the loop. With `wait` (a run on the virtual clock, which has no real time to keep) the loop
waits for each episode's write, so a failed write stops the session where it happened; otherwise the
failure is raised at the next hook call. `close()` waits for the writer, finishes the videos and
metadata (info.json last) and then writes the language columns, so an interrupted run still leaves
a dataset that loads. Each episode has its own files, so a write that fails (a full disk) loses only
what was not finished: the episodes before it are kept (on a full disk the newest are dropped until
the rest fit), and one `WriteError` names the folder and says how many were kept. A simulator
recording of an environment that `RecordsGroundTruth` (the simulator) also gets its ground-truth
sidecar (the subtasks the controller executed, gripper events, object boxes), so `steerable eval`
can score an annotator on recorded rollouts.
"""

from __future__ import annotations

import errno
import logging
import queue
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from steerable.control import Observation, RecordedEpisode, RecordsGroundTruth
from steerable.dataset.atomic import check_writable
from steerable.dataset.build import DatasetBuilder, frame_timestamps
from steerable.dataset.lerobot import LeRobotDataset
from steerable.dataset.writer import EpisodeLanguage, write_language
from steerable.errors import DatasetError, WriteError, explain_os_error, os_cause
from steerable.language import EventRow, event_row, persistent_row, speech_row
from steerable.language.styles import CONTEXT_STYLES
from steerable.runtime.events import RuntimeEvent

__all__ = ["QUEUED_EPISODES", "Recorder"]

logger = logging.getLogger(__name__)

# Finished episodes waiting for the writer before the loop waits too (each holds its frames in memory).
QUEUED_EPISODES = 2


@dataclass
class _Episode:
    task: str
    start_frame: int
    states: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    images: dict[str, list[np.ndarray]] = field(default_factory=dict)
    persistent: dict[tuple[str, int], str] = field(default_factory=dict)  # (style, frame) -> text
    events: list[tuple[int, EventRow]] = field(default_factory=list)
    truths: list[object] = field(default_factory=list)  # the environment's ground truth, frame by frame
    vqa: dict[int, dict[str, str]] = field(default_factory=dict)  # frame -> {"question", "answer"}


class Recorder:
    """Listener + frame hook of a `Runtime` that writes a dataset to `root` (a new folder)."""

    def __init__(
        self,
        root: Path,
        *,
        fps: int,
        robot_type: str | None = None,
        state_names: tuple[str, ...] = (),
        camera: str | None = None,
        wait: bool = False,
        truth: RecordsGroundTruth | None = None,
    ) -> None:
        self.root = Path(root)
        # Now, not when the first episode is written: a session must not be recorded into nowhere.
        check_writable(self.root, inside=True, hint="record into a folder you can write")
        if self.root.exists() and any(self.root.iterdir()):
            raise DatasetError(f"--record {self.root}: the folder is not empty; record into a new folder")
        self.fps = fps
        self.robot_type = robot_type
        self.state_names = state_names
        self.camera = camera  # the camera `/ask` exchanges are recorded on (None: not recorded)
        self._builder: DatasetBuilder | None = None
        self._episode: _Episode | None = None
        self._language: dict[int, EpisodeLanguage] = {}
        self.truth = truth  # the environment that keeps each frame's ground truth (None: none is recorded)
        self._truths: list[RecordedEpisode] = []
        self._frame = 0  # frames seen (the runtime's frame index of the next hook call)
        self._ended = 0  # episodes the session ended (written or not)
        self.wait = wait  # the loop waits for each episode's write (see the module docstring)
        self._queue: queue.Queue[_Episode | None] = queue.Queue(maxsize=QUEUED_EPISODES)
        self._writer: threading.Thread | None = None  # started with the first episode to write
        self._failure: Exception | None = None  # the writer's, raised on the loop's thread
        self.closed = False
        self.written: Path | None = None  # the dataset, once closed with at least one episode kept
        self.producers: dict[str, str] = {}  # style -> who wrote it (meta/info.json, `steerable info`)

    # -- runtime hooks -----------------------------------------------------------------------------
    def on_event(self, event: RuntimeEvent) -> None:
        if self.closed:  # after a failed write, nothing more is recorded
            return
        self._raise_failure()
        if event.kind == "task":
            self._finish_episode()
            self._episode = _Episode(event.text, event.frame)
            return
        ep = self._episode
        if ep is None:
            return
        frame = event.frame - ep.start_frame
        if event.kind in CONTEXT_STYLES and event.text:
            ep.persistent[(event.kind, frame)] = event.text
        elif event.kind == "interjection":
            ep.events.append((frame, event_row(role="user", content=event.text, style="interjection")))
        elif event.kind == "speech":
            ep.events.append((frame, speech_row(event.text)))
        elif event.kind == "question" and self.camera is not None:
            ep.vqa[frame] = {"question": event.text}
        elif event.kind == "answer":
            # On the frame of the question it answers: a model called beside the loop (the REPL) answers
            # ticks later, one called in the tick (a commands file) at once; both are recorded alike.
            asked = (event.question_frame if event.question_frame is not None else event.frame) - ep.start_frame
            if asked in ep.vqa:
                ep.vqa[asked]["answer"] = event.text

    def on_frame(self, observation: Observation, action: np.ndarray) -> None:
        ep = self._episode
        self._frame += 1
        if ep is None or self.closed:
            return
        self._raise_failure()
        ep.states.append(np.asarray(observation.state, dtype=np.float32))
        ep.actions.append(np.asarray(action, dtype=np.float32))
        for key, image in observation.images.items():
            ep.images.setdefault(key, []).append(image)
        if self.truth is not None and (truth := self.truth.frame_truth(observation)) is not None:
            ep.truths.append(truth)

    def end_episode(self) -> None:
        """Close the current episode (a new scene follows); the next task starts another."""
        self._finish_episode()

    # -- writing ----------------------------------------------------------------------------------------
    def _features(self, ep: _Episode) -> dict[str, dict[str, Any]]:
        dims, adims = ep.states[0].shape[0], ep.actions[0].shape[0]
        names = list(self.state_names) if len(self.state_names) == dims else None
        features: dict[str, dict[str, Any]] = {
            "observation.state": {"dtype": "float32", "shape": [dims], "names": names},
            "action": {"dtype": "float32", "shape": [adims], "names": names if adims == dims else None},
        }
        for key, frames in ep.images.items():
            features[key] = {"dtype": "video", "shape": list(frames[0].shape)}
        return features

    def _finish_episode(self) -> None:
        """Hand the episode that ended to the writer (see the module docstring)."""
        ep = self._episode
        if ep is None or not ep.states:
            self._episode = None
            return
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_episodes, name="steerable-recorder", daemon=True)
            self._writer.start()
        self._queue.put(ep)  # a Ctrl-C while it waits leaves the episode for close() to hand over
        self._episode = None
        self._ended += 1
        if self.wait:
            self._queue.join()
            self._raise_failure()

    def _write_episodes(self) -> None:
        """The writer thread: each episode in turn, until `None`; after a failure the rest are dropped."""
        while True:
            ep = self._queue.get()
            try:
                if ep is None:
                    return
                if self._failure is None:
                    self._write(ep)
            except Exception as exc:  # raised on the loop's thread (`_raise_failure`)
                self._failure = exc
            finally:
                self._queue.task_done()

    def _stop_writer(self) -> None:
        if self._writer is not None:
            self._queue.put(None)
            self._writer.join()
            self._writer = None

    def _raise_failure(self) -> None:
        """After a failed write: keep the episodes before it, and raise the one line that says so."""
        failure = self._failure
        if failure is None or self.closed:
            return
        self._stop_writer()
        if self._builder is None:  # the dataset could not even be started: nothing to keep
            self.closed = True
            raise failure
        self._save(failure)  # raises the WriteError that says which episodes were kept

    def _write(self, ep: _Episode) -> None:
        """One episode's videos and data files (the writer thread)."""
        if self._builder is None:  # one file group per episode: a failed write loses that episode only
            self._builder = DatasetBuilder(self.root, fps=self.fps, features=self._features(ep),
                                           robot_type=self.robot_type, episodes_per_file=1)
        n = len(ep.states)
        index = self._builder.add_episode(
            ep.task,
            {"observation.state": np.stack(ep.states), "action": np.stack(ep.actions)},
            {key: iter(frames) for key, frames in ep.images.items()},
        )
        times = frame_timestamps(n, self.fps).tolist()
        persistent = [persistent_row(role="user", content=ep.task, style="task_aug", timestamp=times[0])]
        latest: dict[tuple[str, int], str] = {}  # one row per style and frame (past the end: the last)
        for (style, frame), text in sorted(ep.persistent.items(), key=lambda kv: kv[0][1]):
            latest[(style, min(frame, n - 1))] = text
        for (style, frame), text in latest.items():
            persistent.append(persistent_row(role="assistant", content=text, style=style, timestamp=times[frame]))
        events = [(times[min(frame, n - 1)], row) for frame, row in ep.events]
        vqa_frames = {min(frame, n - 1): pair for frame, pair in ep.vqa.items() if pair.get("answer")}
        for frame, pair in vqa_frames.items():
            for role, text in (("user", pair["question"]), ("assistant", pair["answer"])):
                events.append((times[frame], event_row(role=role, content=text, style="vqa", camera=self.camera)))
        self._language[index] = EpisodeLanguage(persistent, events)
        if len(ep.truths) == n:
            self._truths.append(self._truth(index, ep, np.asarray(times, dtype=np.float32)))
        logger.info("recorded episode %d: %d frames, %d language rows", index, n, len(persistent) + len(events))

    def _truth(self, index: int, ep: _Episode, times: np.ndarray) -> RecordedEpisode:
        last = len(ep.truths) - 1  # an event of an interrupted last tick may lie past the last frame
        starts: list[tuple[int, str]] = []
        for (style, frame), text in sorted(ep.persistent.items(), key=lambda kv: kv[0][1]):
            if style == "subtask":
                starts = [s for s in starts if s[0] != min(frame, last)] + [(min(frame, last), text)]
        if not starts or starts[0][0] != 0:
            starts.insert(0, (0, starts[0][1] if starts else ep.task))
        sizes = {key: (frames[0].shape[1], frames[0].shape[0]) for key, frames in ep.images.items()}
        return RecordedEpisode(index, ep.task, list(ep.truths), times, starts, sizes)

    def close(self) -> Path | None:
        """Finish the dataset (idempotent); None when nothing was recorded.

        Raises `WriteError` when an episode could not be written, after keeping those finished before it.
        """
        if self.closed:
            return self.written
        self._finish_episode()
        self._stop_writer()
        self._raise_failure()
        self.closed = True
        if self._builder is not None:
            self._save(None)
        return self.written

    def _save(self, failure: Exception | None) -> None:
        """Finalize the episodes written; after `failure` (or one here) keep the finished ones and raise.

        On a full disk the newest episodes are dropped until the metadata of the others fits.
        """
        self.closed = True
        builder = self._builder
        assert builder is not None
        keep = builder.truncate(len(self._language)) if failure is not None else len(self._language)
        try:
            while keep:
                try:
                    truths = self._truths[:keep]
                    if truths and self.truth is not None and len(self._truths) == len(self._language):
                        self.truth.write_ground_truth(builder.build_dir, self.fps, truths)
                    builder.finalize(keep_on_error=True)
                    break
                except Exception as exc:
                    failure = failure or exc
                    keep = builder.truncate(keep - 1) if _out_of_space(exc) else 0
        except BaseException:  # Ctrl-C: nothing half-built is left beside the folder
            builder.abort()
            raise
        if not keep:
            builder.abort()
            raise WriteError(f"--record {self.root}: {_reason(failure)}; none of the {self._ended} episode(s) "
                             "could be written, so nothing was recorded") from failure
        self.written = self.root
        language = {i: lang for i, lang in self._language.items() if i < keep}
        try:
            write_language(LeRobotDataset(self.root), language, producers=self.producers or None)
        except Exception as exc:
            if failure is None and os_cause(exc) is None:
                raise
            failure = failure or exc
            self._fail(failure, keep, " (without their language rows: writing those failed too)")
        if failure is not None:
            self._fail(failure, keep, "")

    def _fail(self, failure: Exception, keep: int, note: str) -> NoReturn:
        kept = (f"the first {keep} of the {self._ended} episodes are" if keep > 1
                else f"the first of the {self._ended} episodes is")
        raise WriteError(
            f"--record {self.root}: {_reason(failure)}; {kept} kept there{note} and can be read, "
            "the rest could not be written"
        ) from failure


def _out_of_space(exc: BaseException) -> bool:
    cause = os_cause(exc)
    return cause is not None and cause.errno in (errno.ENOSPC, errno.EDQUOT)


def _reason(exc: BaseException | None) -> str:
    """What went wrong, without the paths of the hidden folder the dataset was being built in."""
    cause = os_cause(exc) if exc is not None else None
    return explain_os_error(cause, paths=False) if cause is not None else str(exc)
