"""The trained policy in the runtime (`steerable run --high_level policy --low_level policy
--policy.path CKPT`): loading a checkpoint as either level, and the low level.

It lives in the runtime, which imports the policy package (torch, transformers) only through this
module and the high level it loads (`steerable.runtime.policy_high_level`), and only when a run asks
for the policy (`runtime.stack` imports it lazily).

Loading: one model in memory per checkpoint and device, which both levels share; a run that cannot
give the policy every state feature it reads is refused (`observation.environment_state`, the
objects' true positions, only in the simulator with `--observation privileged`).
Low level: the subtask (or the task) -> an action chunk, of which `n_action_steps` are executed; a
policy with a done head reports a command complete (`DONE_THRESHOLD`). It reads the observation both
levels share (`steerable.runtime.policy_observation`); a policy trained without cameras does not make the
environment render them (`wants_images`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from steerable.control import ENVIRONMENT_STATE_FEATURE, ActionChunk, ChunkPrefix, Observation, ObservationKind
from steerable.errors import ConfigError
from steerable.policy.checkpoint import load_policy
from steerable.policy.inference import PolicyRunner
from steerable.policy.rtc import guided_chunk
from steerable.runtime.policy_high_level import PolicyHighLevel
from steerable.runtime.policy_observation import STATE_SOURCES, no_environment_state, policy_observation, reads_cameras

__all__ = ["DONE_THRESHOLD", "PolicyHighLevel", "PolicyLowLevel", "load_high_level", "load_low_level",
           "low_level_reports_done"]

_RUNNERS: dict[tuple[str, str], PolicyRunner] = {}
# The done head's probability above which the low level reports its command complete.
DONE_THRESHOLD = 0.5


def _runner(path: str | Path, device: str) -> PolicyRunner:
    """One loaded policy per (path, device): both levels of `--high_level policy --low_level policy` share it."""
    key = (str(Path(path).expanduser().resolve()), device)
    if key not in _RUNNERS:
        _RUNNERS[key] = PolicyRunner(load_policy(path, device), device)
    return _RUNNERS[key]


def _check_observation(runner: PolicyRunner, observation: ObservationKind) -> PolicyRunner:
    """`runner`, after checking that the run gives it every state feature its policy reads: the
    environment state (object positions) only with `--observation privileged`."""
    for key in runner.cfg.read_state_keys:
        if key == ENVIRONMENT_STATE_FEATURE and observation != "privileged":
            raise no_environment_state()
        if key not in STATE_SOURCES:
            raise ConfigError(f"this policy reads state feature {key!r}, which the runtime cannot build "
                              f"(it builds {', '.join(STATE_SOURCES)})")
    return runner


class PolicyLowLevel:
    """`LowLevelController` over a trained policy's action expert.

    For a policy that reads the last commanded motion (`motion_input`) it keeps the actions it handed
    out: the robot stands where the last one it executed took it, so the motion is the step into the
    action of the last chunk nearest the observed pose (the whole chunk ran, or the loop dropped the
    rest when the context changed).
    """

    name = "policy"

    def __init__(self, runner: PolicyRunner, n_action_steps: int | None = None) -> None:
        self.runner = runner
        self.n_action_steps = n_action_steps or runner.cfg.n_action_steps
        self._sent: np.ndarray | None = None  # the action before the last chunk, then that chunk

    @property
    def wants_images(self) -> bool:
        return reads_cameras(self.runner)

    def reset(self) -> None:
        """Forget the actions handed out (a new episode starts at rest)."""
        self._sent = None

    @property
    def reports_done(self) -> bool:
        """Whether the policy learned when a command is complete (its done head): then a chunk asked
        for a finished command comes back empty and `done`, as from the scripted controller."""
        return self.runner.cfg.done_head

    def act(self, observation: Observation, command: str, prefix: ChunkPrefix | None = None) -> ActionChunk:
        obs = policy_observation(observation, self.runner)
        state = np.asarray(obs["state"], dtype=np.float32)
        motion = self._motion(state)
        if motion is not None:
            obs["motion"] = motion
        done: np.ndarray | None = None
        if prefix is not None:
            # A guided chunk (rtc) asks the done head too: without it a command continued chunk after
            # chunk would never be reported complete, and a learned high level would wait on it forever.
            probability: list[torch.Tensor] = []
            sampled = guided_chunk(self.runner, command, obs, prefix, done=probability if self.reports_done else None)
            done = probability[0].cpu().numpy() if probability else None
        elif self.reports_done:
            chunks, done = self.runner.act_and_done([command], obs)
            sampled = chunks[0]
        else:
            sampled = self.runner.act([command], obs)[0]
        if done is not None and float(done[0]) > DONE_THRESHOLD:
            return ActionChunk(np.zeros((0, sampled.shape[-1]), np.float32), done=True)
        chunk = sampled[: self.n_action_steps].astype(np.float32)
        if self._motion_pairs():
            before = self._executed(state)
            self._sent = np.concatenate([chunk[:1] if before is None else before[None], chunk])
        return ActionChunk(chunk)

    def act_continuing(self, observation: Observation, command: str, prefix: ChunkPrefix) -> ActionChunk:
        """`act`, the chunk's start guided onto `prefix` (real-time chunking: `steerable.policy.rtc`)."""
        return self.act(observation, command, prefix)

    def _motion_pairs(self) -> list[tuple[int, int]]:
        """The pose dimensions whose last motion the policy reads (none without `motion_input`)."""
        cfg = self.runner.cfg
        return cfg.pose_pairs if cfg.motion_dim else []

    def _executed(self, state: np.ndarray) -> np.ndarray | None:
        """The last action of `_sent` the robot executed: the one nearest the observed pose (its index)."""
        k = self._nearest(state)
        return None if k is None or self._sent is None else self._sent[k]

    def _nearest(self, state: np.ndarray) -> int | None:
        pairs = self._motion_pairs()
        if self._sent is None or not pairs:
            return None
        pose = self._sent[1:, [a for a, _ in pairs]]
        here = np.asarray(state, dtype=np.float32).reshape(-1)[[s for _, s in pairs]]
        return 1 + int(np.argmin(np.linalg.norm(pose - here, axis=1)))

    def _motion(self, state: np.ndarray) -> np.ndarray | None:
        """The last commanded motion of the pose dimensions (None at the start of an episode: at rest)."""
        k = self._nearest(state)
        if k is None or self._sent is None:
            return None
        pairs = [a for a, _ in self._motion_pairs()]
        return (self._sent[k, pairs] - self._sent[k - 1, pairs]).astype(np.float32)


def load_high_level(path: str | Path, device: str = "cpu", observation: ObservationKind = "standard", *,
                    progress_from_observation: bool = False, step_check: bool = True) -> PolicyHighLevel:
    """The policy at `path` (a checkpoint, or a `steerable train` output folder) as the high level;
    `observation` is the run's `--observation` (standard, or privileged in the simulator);
    `progress_from_observation` for a low level that never reports a command done; `step_check`: use
    the policy's step check, when it has one (`--policy.step_check`)."""
    return PolicyHighLevel(_check_observation(_runner(path, device), observation),
                           progress_from_observation=progress_from_observation, step_check=step_check)


def low_level_reports_done(path: str | Path, device: str = "cpu") -> bool:
    """Whether the policy at `path`, as the low level, reports its commands done (a done head)."""
    return _runner(path, device).cfg.done_head


def load_low_level(path: str | Path, device: str = "cpu", observation: ObservationKind = "standard", *,
                   flow_noise: float | None = None) -> PolicyLowLevel:
    """The policy at `path` as the low-level controller (`observation` as for `load_high_level`);
    `flow_noise` replaces the checkpoint's scale of the noise its chunks are integrated from."""
    runner = _check_observation(_runner(path, device), observation)
    if not runner.prompts.has("action"):
        raise ConfigError(f"the policy's recipe ({runner.prompts.origin}) trains no actions conditioned on the "
                          "command alone (a low_level turn that reads the subtask): it cannot be the low level")
    if flow_noise is not None:  # checked (>= 0) by its settings field, `--policy.flow_noise`
        runner.model.cfg.flow_noise = float(flow_noise)
    return PolicyLowLevel(runner)
