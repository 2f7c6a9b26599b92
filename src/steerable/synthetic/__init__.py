"""A simulated tabletop with a scripted expert: a LeRobot v3 dataset whose ground truth is known."""

from steerable.synthetic.generate import generate_synthetic, simulate_episode
from steerable.synthetic.ground_truth import EpisodeTruth, GripperEvent, Subtask, read_ground_truth
from steerable.synthetic.render import object_boxes, render_frame
from steerable.synthetic.world import WorldState

__all__ = [
    "EpisodeTruth",
    "GripperEvent",
    "Subtask",
    "WorldState",
    "generate_synthetic",
    "object_boxes",
    "read_ground_truth",
    "render_frame",
    "simulate_episode",
]
