"""The simulated tabletop as a runtime environment, with scripted (test-double) planner and controller."""

from steerable.runtime.sim.controller import ScriptedController
from steerable.runtime.sim.env import SimEnv, step_satisfied, task_kind
from steerable.runtime.sim.grammar import Command, CommandError, parse_command, parse_task
from steerable.runtime.sim.planner import ScriptedPlanner

__all__ = [
    "Command",
    "CommandError",
    "ScriptedController",
    "ScriptedPlanner",
    "SimEnv",
    "parse_command",
    "parse_task",
    "step_satisfied",
    "task_kind",
]
