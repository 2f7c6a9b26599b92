"""The subtask text of each branch of a Meta-World scripted policy's `_desired_pos`, in source order.

Written by reading each policy's branches in `metaworld` 3.0.0 (its comments and the target each
branch returns; `steerable.synthetic.metaworld.phases` says how a step's branch is found). A task
is listed only where its branches are phases a person would name; a recording checks the count of
`return` statements against its entry and writes the task alone where they differ (another
`metaworld`) or where the task is not listed (`reach-v3` and `drawer-open-v3` have no branches;
policies whose branches alternate while they work, e.g. `handle-pull-v3`, are left out).
"""

from __future__ import annotations

__all__ = ["PHASE_TEXTS"]

_ABOVE, _LOWER = "move above the {}", "lower the gripper to the {}"
_PRESS_TOP = (_ABOVE.format("button"), "press the button down")
_HANDLE = (_ABOVE.format("handle"), "press the handle down")


def _approach(thing: str, last: str) -> tuple[str, str, str]:
    """Above the thing, down to it, then the task's own motion: the three branches many policies share."""
    return _ABOVE.format(thing), _LOWER.format(thing), last


PHASE_TEXTS: dict[str, tuple[str, ...]] = {
    "assembly-v3": ("move above the nut", "lower the nut onto the peg", "lower the gripper onto the nut",
                    "lift the nut", "carry the nut above the peg"),
    "basketball-v3": (*_approach("ball", "lift the ball to the hoop's height"), "move the ball over the hoop"),
    "button-press-topdown-v3": _PRESS_TOP,
    "button-press-topdown-wall-v3": _PRESS_TOP,
    "button-press-v3": ("line up with the button", "press the button"),
    "button-press-wall-v3": ("line up with the button", "reach over the wall", _LOWER.format("button"),
                             "press the button"),
    "coffee-button-v3": ("line up with the coffee machine's button", "push the button"),
    "coffee-pull-v3": _approach("mug", "pull the mug from the coffee machine"),
    "coffee-push-v3": _approach("mug", "push the mug under the coffee machine"),
    "door-open-v3": _approach("door handle", "pull the door open"),
    "drawer-close-v3": ("raise the gripper", "move in front of the drawer handle", _LOWER.format("drawer handle"),
                        "push the drawer closed"),
    "hammer-v3": ("move above the hammer", "lower the gripper onto the hammer", "line the hammer up with the nail",
                  "hammer the nail in"),
    "handle-press-side-v3": _HANDLE,
    "handle-press-v3": _HANDLE,
    "pick-place-v3": ("move above the puck", "lower the gripper onto the puck", "grasp the puck",
                      "carry the puck to the goal"),
    "pick-place-wall-v3": ("move above the puck", "lower the gripper onto the puck", "lift the puck over the wall",
                           "carry the puck above the goal", "lower the puck to the goal's height",
                           "move the puck to the goal"),
    "plate-slide-v3": _approach("plate", "slide the plate into the goal"),
    "push-v3": _approach("puck", "push the puck to the goal"),
    "sweep-into-v3": _approach("cube", "sweep the cube into the hole"),
    "sweep-v3": _approach("cube", "sweep the cube to the goal"),
    "window-close-v3": _approach("window handle", "slide the window closed"),
    "window-open-v3": _approach("window handle", "slide the window open"),
}
