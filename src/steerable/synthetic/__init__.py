"""A simulated tabletop with a scripted expert: a LeRobot v3 dataset whose ground truth is known,
and the same world as an environment (`SimEnv`) with a scripted planner and controller (test doubles)."""

from steerable.synthetic.commands import PHRASINGS, Command, CommandError, parse_command
from steerable.synthetic.controller import ScriptedController
from steerable.synthetic.difficulty import DIFFICULTIES, Difficulty, get_difficulty
from steerable.synthetic.env import SimEnv, seed_for_task
from steerable.synthetic.generate import generate_synthetic, record_episode, simulate_episode
from steerable.synthetic.ground_truth import (
    EpisodeTruth,
    GripperEvent,
    Interjection,
    Subtask,
    read_ground_truth,
)
from steerable.synthetic.planner import ScriptedPlanner
from steerable.synthetic.render import CAMERA_SHAPES, object_boxes, render_frame
from steerable.synthetic.world import WorldState

__all__ = [
    "CAMERA_SHAPES",
    "DIFFICULTIES",
    "PHRASINGS",
    "Command",
    "CommandError",
    "Difficulty",
    "EpisodeTruth",
    "GripperEvent",
    "Interjection",
    "ScriptedController",
    "ScriptedPlanner",
    "SimEnv",
    "Subtask",
    "WorldState",
    "generate_synthetic",
    "get_difficulty",
    "object_boxes",
    "parse_command",
    "read_ground_truth",
    "record_episode",
    "render_frame",
    "seed_for_task",
    "simulate_episode",
]
