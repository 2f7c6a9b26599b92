"""A simulated tabletop with a scripted expert: a LeRobot v3 dataset whose ground truth is known."""

from steerable.synthetic.commands import PHRASINGS, Command, parse_command
from steerable.synthetic.difficulty import DIFFICULTIES, Difficulty, get_difficulty
from steerable.synthetic.generate import generate_synthetic, record_episode, simulate_episode
from steerable.synthetic.ground_truth import (
    EpisodeTruth,
    GripperEvent,
    Interjection,
    Subtask,
    read_ground_truth,
)
from steerable.synthetic.render import object_boxes, render_frame
from steerable.synthetic.world import WorldState

__all__ = [
    "DIFFICULTIES",
    "PHRASINGS",
    "Command",
    "Difficulty",
    "EpisodeTruth",
    "GripperEvent",
    "Interjection",
    "Subtask",
    "WorldState",
    "generate_synthetic",
    "get_difficulty",
    "object_boxes",
    "parse_command",
    "read_ground_truth",
    "record_episode",
    "render_frame",
    "simulate_episode",
]
