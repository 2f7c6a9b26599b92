"""How much real-teleoperation mess the synthetic episodes carry: `easy`, `realistic` or `hard`.

`easy` is the clean scripted expert (smooth moves, one grasp per pick, perfect sensors and
cameras). The other levels add, each with its own rate or size: speed variation and hesitations
inside a move, idle stretches between subtasks, reaching toward a wrong cube first, failed grasps
followed by a re-grasp, corrections during a placement, push steps (no gripper event), three- and
four-step tasks, sensor noise on `observation.state`, dropped camera frames (the previous image
repeats) and recording-loop stalls (a control tick is missing: the state jumps, timestamps stay
regular, as in a LeRobot recording that overran), a hand passing over the table in the top
camera, camera jitter and lighting changes. None of them moves a true subtask boundary: a
re-grasp stays inside "pick up X", a correction inside "place X ...".

`hard` adds what proprioception alone cannot fully tell apart: a re-grip while carrying (the
gripper loosens and closes again inside "place X ..."), a long stop mid-transport, a nudge after
the release (re-grasp, slide into place, release again: two more gripper events inside the
place), subtasks chained with no pause (the release or grasp flows into one smooth arc toward the
next target), and a gripper sensor that sticks at its last reading or drops out to 0 for a
stretch (the true events come from the real closure).
"""

from __future__ import annotations

from dataclasses import dataclass

from steerable.errors import ConfigError

__all__ = ["DIFFICULTIES", "EASY", "HARD", "REALISTIC", "Difficulty", "get_difficulty"]


@dataclass(frozen=True)
class Difficulty:
    """Rates are per opportunity (per move, per pick, per episode...); 0 turns a nuisance off."""

    name: str
    # Task mix: probabilities of 1, 2, 3, 4 pick-and-place/push steps (None: the easy mix).
    step_probs: tuple[float, float, float, float] | None = None
    push_rate: float = 0.0  # per step: a push (no gripper event) instead of a pick-and-place
    # Expert behaviour.
    speed_sigma: float = 0.0  # log-normal spread of each move's duration
    hesitation_rate: float = 0.0  # per move: stop part way for a moment
    idle_rate: float = 0.0  # per subtask boundary: an idle stretch of `idle_seconds`
    idle_seconds: tuple[float, float] = (1.5, 3.0)
    wrong_reach_rate: float = 0.0  # per pick: head toward another cube first, then turn
    failed_grasp_rate: float = 0.0  # per pick: close beside the cube, open, re-align, grasp
    correction_rate: float = 0.0  # per place: stop above a wrong spot, shift, then lower
    # Only `hard` sets these (they are what proprioception alone cannot fully tell apart).
    regrip_rate: float = 0.0  # per place: loosen the grip part way (stays held) and close again
    transport_pause_rate: float = 0.0  # per place: stop part way for `transport_pause_seconds`
    transport_pause_seconds: tuple[float, float] = (2.5, 5.0)
    nudge_rate: float = 0.0  # per place in a receptacle: release off the spot, re-grasp, slide, release
    chain_rate: float = 0.0  # per boundary: no pause, one smooth arc into the next subtask
    # Recording.
    state_noise: tuple[float, float] = (0.0, 0.0)  # std on ee.x/y/z (m) and on gripper.closure
    dropped_frame_rate: float = 0.0  # per frame and camera: the previous image is repeated
    stall_rate: float = 0.0  # per frame: the tick is not recorded (state jumps; time stays regular)
    gripper_glitch_rate: float = 0.0  # mean stretches per episode of a stuck or dropped-out gripper reading
    gripper_glitch_seconds: tuple[float, float] = (0.5, 2.0)
    # Cameras.
    distractor_rate: float = 0.0  # per episode: a hand passes over the table in the top camera
    jitter_px: int = 0  # camera shake: image shift up to this many pixels
    lighting: float = 0.0  # brightness swings up to +-this fraction

    @property
    def is_easy(self) -> bool:
        return self == EASY


EASY = Difficulty("easy")
REALISTIC = Difficulty(
    "realistic",
    step_probs=(0.3, 0.35, 0.25, 0.1),
    push_rate=0.15,
    speed_sigma=0.25,
    hesitation_rate=0.15,
    idle_rate=0.25,
    idle_seconds=(1.0, 2.5),
    wrong_reach_rate=0.1,
    failed_grasp_rate=0.2,
    correction_rate=0.2,
    state_noise=(0.0015, 0.01),
    dropped_frame_rate=0.01,
    stall_rate=0.01,
    distractor_rate=0.3,
    jitter_px=1,
    lighting=0.1,
)
HARD = Difficulty(
    "hard",
    step_probs=(0.1, 0.3, 0.35, 0.25),
    push_rate=0.25,
    speed_sigma=0.45,
    hesitation_rate=0.3,
    idle_rate=0.45,
    idle_seconds=(1.5, 4.0),
    wrong_reach_rate=0.25,
    failed_grasp_rate=0.4,
    correction_rate=0.4,
    regrip_rate=0.35,
    transport_pause_rate=0.3,
    nudge_rate=0.3,
    chain_rate=0.4,
    state_noise=(0.003, 0.03),
    dropped_frame_rate=0.03,
    stall_rate=0.03,
    gripper_glitch_rate=1.0,
    distractor_rate=0.7,
    jitter_px=3,
    lighting=0.25,
)
DIFFICULTIES: dict[str, Difficulty] = {d.name: d for d in (EASY, REALISTIC, HARD)}


def get_difficulty(difficulty: str | Difficulty) -> Difficulty:
    """The level called `difficulty` (or `difficulty` itself when it already is one)."""
    if isinstance(difficulty, Difficulty):
        return difficulty
    try:
        return DIFFICULTIES[difficulty]
    except KeyError:
        raise ConfigError(
            f"unknown difficulty {difficulty!r}: choose from {', '.join(DIFFICULTIES)}"
        ) from None
