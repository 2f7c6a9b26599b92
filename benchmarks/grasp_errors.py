"""Where a camera policy's grasps go wrong: the goal head's estimate, or the low level's own aim (issue 35).

Runs a checkpoint on the simulator as `steerable run --eval_episodes` does (the scripted planner over the
learned low level by default) and, at every grasp (the commanded closure crossing the simulator's grasp
threshold during a "pick up" command), records three distances in the table plane: gripper to the named
cube (what decides the grasp), the goal head's last estimate to the cube (the goal's error) and the gripper to
that estimate (the low level's own aim). With `--oracle pick` (or `both`) the estimate the action expert reads
is replaced by the simulator's true goal of each pick (and place): what the low level does with a perfect goal,
the ceiling of goal precision. At every release during a place it records whether the step took, the cube's
distance from the spot the demonstrations use, and, along the line from where the gripper stood when the place
command began to that spot, how far short of the spot (and how far across) the release came. The simulator's
truth is read here only to measure; the policy never sees it.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/grasp_errors.py --policy R --episodes 50 [--oracle pick]

Not part of `make test`: a trained camera checkpoint and minutes of CPU. Ends with a `RESULT` line.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import torch

import steerable.runtime.evaluation as evaluation
import steerable.synthetic.env as sim_env
from steerable.policy import goal as goal_module
from steerable.runtime.environments import EnvSpec
from steerable.runtime.stack import StackSpec
from steerable.synthetic import world
from steerable.synthetic.commands import Command, CommandError, parse_command
from steerable.synthetic.expert import place_position
from steerable.synthetic.replay import wilson_interval
from steerable.synthetic.tasks import Step, step_satisfied

# A place that starts this close to its spot (metres) has no direction to measure a release along.
MIN_PATH = 0.03


class Probe:
    """What the running episode is doing: its command, world, the goal estimate; the grasps seen."""

    def __init__(self, oracle: str) -> None:
        self.oracle = oracle
        self.env: Any = None
        self.command: str | None = None
        self.span: tuple[np.ndarray, np.ndarray] | None = None  # the policy's state range (normalisation)
        self.goal: np.ndarray | None = None  # the last estimate the expert read, metres
        self.grasps: list[dict[str, float]] = []
        self.releases: list[dict[str, float]] = []  # per release during a place: landed where it should, how far
        self.seed = 0
        self.began: tuple[str | None, float, float] = (None, 0.0, 0.0)  # a command and where the gripper stood then

    def track(self, gripper: world.Gripper) -> None:
        """Remember where the gripper stood when the running command began (called before every step)."""
        if self.command != self.began[0]:
            self.began = (self.command, gripper.x, gripper.y)

    def parsed(self, scene: world.Scene) -> Command | None:
        """The running command as the simulator's controller reads it (None: none, or not one it reads)."""
        try:
            return parse_command(self.command, scene) if self.command else None
        except CommandError:
            return None

    def true_goal(self) -> tuple[float, float] | None:
        """The simulator's own goal (x, y) of the running command, when `--oracle` asks for it."""
        if self.env is None or self.oracle == "none":
            return None
        state = self.env.world
        cmd = self.parsed(state.scene)
        if cmd is not None and cmd.kind == "pick" and cmd.cube is not None:
            x, y, _ = state.positions[state.scene.cube_index(cmd.cube)]
            return (x, y)
        held = state.scene.cubes[state.held].name if state.held is not None else None
        cube = cmd.cube or held if cmd is not None else None  # "place it ...": the held cube
        if cmd is not None and cmd.kind == "place" and self.oracle == "both" and cube and cmd.target is not None:
            index = state.scene.cube_index(cube)
            return place_position(state, Step(cube, cmd.target, stack=cmd.stack), exclude=index)
        return None

    def read(self, goal: torch.Tensor) -> torch.Tensor:
        """The goal the expert reads (B=1 at run time): the head's, or the true one; remembered in metres."""
        if goal.shape[0] != 1 or self.span is None:
            return goal
        lo, hi = self.span
        true = self.true_goal()
        if true is not None:
            goal = goal.clone()
            goal[0, :2] = torch.tensor((np.array(true) - lo[:2]) / (hi[:2] - lo[:2]) * 2 - 1, dtype=goal.dtype)
        self.goal = (goal[0, :2].detach().numpy() + 1) / 2 * (hi[:2] - lo[:2]) + lo[:2]
        return goal

    def grasp(self, state: world.WorldState, gripper: world.Gripper, held: bool) -> None:
        """The fingers closed during a pick: the distances between the gripper, the named cube and the goal read."""
        cmd = self.parsed(state.scene)
        if cmd is None or cmd.kind != "pick" or cmd.cube is None or self.goal is None:
            return
        cx, cy, _ = state.positions[state.scene.cube_index(cmd.cube)]
        gx, gy = self.goal
        self.grasps.append({"seed": self.seed, "grip_cube": float(np.hypot(gripper.x - cx, gripper.y - cy)),
                            "goal_cube": float(np.hypot(gx - cx, gy - cy)),
                            "grip_goal": float(np.hypot(gripper.x - gx, gripper.y - gy)), "held": float(held),
                            "dx": gripper.x - cx, "dy": gripper.y - cy})

    def release(self, before: world.WorldState, after: world.WorldState, cube: int) -> None:
        """A cube let go during a place command: whether the step holds, and the cube's distance from its spot."""
        cmd = self.parsed(after.scene)
        if cmd is None or cmd.kind != "place" or cmd.target is None:
            return
        name = after.scene.cubes[cube].name
        step = Step(name, cmd.target, stack=cmd.stack)
        x, y, _ = after.positions[cube]
        sx, sy = place_position(after, step, exclude=cube)
        found = {"seed": self.seed, "took": float(step_satisfied(after, step)),
                 "drop": before.positions[cube][2] - after.positions[cube][2],
                 "off": float(np.hypot(x - sx, y - sy)), "stack": float(cmd.stack)}
        path = np.array([sx - self.began[1], sy - self.began[2]])
        length = float(np.linalg.norm(path))
        if self.began[0] == self.command and length >= MIN_PATH:  # the release, on the line from the start to the spot
            along = path / length
            moved = np.array([after.gripper.x - self.began[1], after.gripper.y - self.began[2]])
            across = abs(float(moved @ np.array([-along[1], along[0]])))
            found.update(short=length - float(moved @ along), across=across, travelled=float(moved @ along) / length)
        self.releases.append(found)


def instrument(probe: Probe) -> None:
    """Wrap the goal head's reading, the simulator's step and the runtime's start (this process only)."""
    read = goal_module.GoalHead.read

    def reading(self: goal_module.GoalHead, images: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        goal, evidence = read(self, images, ids, mask)
        return probe.read(goal), evidence

    goal_module.GoalHead.read = reading  # type: ignore[method-assign]
    step = world.step

    def stepping(state: world.WorldState, gripper: world.Gripper) -> world.WorldState:
        probe.track(state.gripper)
        after = step(state, gripper)
        if gripper.closure >= world.GRASP_THRESHOLD > state.gripper.closure and state.held is None:
            probe.grasp(state, gripper, after.held is not None)
        if state.held is not None and after.held is None:
            probe.release(state, after, state.held)
        return after

    sim_env.step = stepping
    runtime_class = evaluation.Runtime
    start = runtime_class.__init__

    def starting(self: Any, environment: Any, low: Any, *args: Any, **kwargs: Any) -> None:
        start(self, environment, low, *args, **kwargs)
        normalizer = low.runner.processor.normalizer
        probe.env, probe.command = environment, None
        probe.span = (np.array(normalizer.state_min), np.array(normalizer.state_max))
        self.listeners.append(lambda e: setattr(probe, "command", e.text) if e.kind == "subtask" else None)

    runtime_class.__init__ = starting  # type: ignore[method-assign,assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", required=True, help="a camera checkpoint with a goal head (`steerable train`)")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--max_seconds", type=float, default=90.0, help="simulated seconds per episode at most")
    parser.add_argument("--high_level", default="scripted", choices=["scripted", "policy"])
    parser.add_argument("--oracle", default="none", choices=["none", "pick", "both"],
                        help="replace the goal head's estimate by the simulator's true goal of each pick (and place)")
    args = parser.parse_args()
    probe = Probe(args.oracle)
    instrument(probe)
    spec = StackSpec(high_level=args.high_level, low_level="policy", policy_path=args.policy)
    succeeded, first = 0, []
    for seed in range(args.seed, args.seed + args.episodes):
        probe.seed, before = seed, len(probe.grasps)
        result = evaluation.run_episode(spec, seed, env=EnvSpec(), max_seconds=args.max_seconds)
        succeeded += int(result.success)
        if len(probe.grasps) > before:
            first.append(probe.grasps[before]["held"])
        print(f"seed {seed}: {result.kind}, {'success' if result.success else 'failure'}, "
              f"{len(probe.grasps) - before} grasps", flush=True)
    table = np.array([[g["grip_cube"], g["goal_cube"], g["grip_goal"], g["held"]] for g in probe.grasps])
    low, high = wilson_interval(succeeded, args.episodes)
    bias = np.mean([[g["dx"], g["dy"]] for g in probe.grasps], axis=0) * 100 if probe.grasps else np.full(2, np.nan)
    medians = np.median(table[:, :3], axis=0) * 100 if len(table) else np.full(3, np.nan)
    for kind, stack in (("receptacle", 0.0), ("stack", 1.0)):
        done = [r for r in probe.releases if r["stack"] == stack]
        if done:
            print(f"releases on a {kind}: {int(sum(r['took'] for r in done))}/{len(done)} took, median "
                  f"{np.median([r['off'] for r in done]) * 100:.2f} cm from the spot, "
                  f"{sum(r['drop'] > 0.03 for r in done)} let go more than 3 cm above where the cube came to rest")
            measured = [r for r in done if "short" in r]
            if measured:
                short = np.array([r["short"] for r in measured]) * 100
                q1, q3 = np.percentile(short, [25, 75])
                print(f"  along the way from the place's start to the spot ({len(measured)} releases): short by "
                      f"{np.median(short):.2f} cm (quartiles {q1:.2f}-{q3:.2f}),"
                      f" across {np.median([r['across'] for r in measured]) * 100:.2f} cm, share of the way "
                      f"travelled {np.median([r['travelled'] for r in measured]):.2f}")
    print(f"RESULT oracle={args.oracle} success {succeeded}/{args.episodes} = {succeeded / args.episodes:.2f} "
          f"({low:.2f}-{high:.2f}); first grasps held {int(sum(first))}/{len(first)}; all grasps "
          f"{len(table)}, median cm: gripper-cube {medians[0]:.2f}, goal-cube {medians[1]:.2f}, "
          f"gripper-goal {medians[2]:.2f}; mean gripper-cube offset x {bias[0]:+.2f}, y {bias[1]:+.2f}")


if __name__ == "__main__":
    main()
