"""The generator's phrasings in two shares: seen (what datasets are made of) and held out (evaluation only).

`steerable make-dataset synthetic` writes tasks and interjections in the seen phrasings only (the
templates of `steerable.synthetic.tasks` and `steerable.synthetic.oracle`, every one the generator
has ever used, so datasets made before and the figures measured on them stay as they are). The
held-out share below is paraphrases no dataset contains: `steerable run --eval_phrasings unseen|both`
words the simulator's tasks and interjections in them (`SimEnv(phrasings="unseen")`), so success on
them, beside success on the seen ones, tells how far language rather than memorised strings steers
a policy. The split is fixed, per kind:

| kind                      | seen                | held out                                              |
|---------------------------|---------------------|-------------------------------------------------------|
| one placement             | 3 templates         | drop ... into, ... belongs in, could you get ... into |
| two placements            | 2 templates         | ... and then ..., ...; after that, ...                |
| stacking                  | 2 templates         | set ... onto, pile ... on top of                      |
| longer tasks (clauses)    | put / stack / push  | drop ... into / set ... onto / slide                  |
| longer tasks (joining)    | ", then", "first"   | "; after that,", "to begin, ..., next ..., and last"  |
| redirect to a receptacle  | 4 phrasings         | 3 phrasings                                           |
| redirect onto a cube      | 4 phrasings         | 3 phrasings                                           |

A held-out task names the same steps as the seen one drawn for the same seed (`parse_task` reads
them back, and the scripted planner and controller execute them), and no held-out rendering equals a
seen one for the same objects.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from steerable.errors import ConfigError
from steerable.synthetic.oracle import INTERJECTION_PHRASES, STACK_INTERJECTION_PHRASES
from steerable.synthetic.tasks import Step

__all__ = [
    "HELD_OUT_CLAUSE",
    "HELD_OUT_INTERJECTIONS",
    "HELD_OUT_MULTI",
    "HELD_OUT_SINGLE",
    "HELD_OUT_STACK",
    "HELD_OUT_STACK_INTERJECTIONS",
    "PHRASING_SHARES",
    "check_phrasings",
    "held_out_task",
    "interjection_phrases",
]

PHRASING_SHARES = ("seen", "unseen")

HELD_OUT_SINGLE = (
    "drop the {c} into the {t}",
    "the {c} belongs in the {t}",
    "could you get the {c} into the {t}",
)
HELD_OUT_MULTI = (
    "drop the {c} into the {t} and then the {c2} into the {t2}",
    "get the {c} into the {t}; after that, the {c2} into the {t2}",
)
HELD_OUT_STACK = ("set the {c} onto the {t}", "pile the {c} on top of the {t}")
# Clauses of the longer tasks (realistic/hard), joined with "; after that, " (or "to begin, ..., next
# ..., and last ..." for three or four).
HELD_OUT_CLAUSE = {"place": "drop the {c} into the {t}", "stack": "set the {c} onto the {t}",
                   "push": "slide the {c} {t}"}
HELD_OUT_INTERJECTIONS = (
    "Hold on, drop it into the {new}.",
    "Sorry, I meant the {new}.",
    "Make it the {new} instead of the {old}.",
)
HELD_OUT_STACK_INTERJECTIONS = (
    "Hold on, set it onto the {new}.",
    "Sorry, I meant on top of the {new}.",
    "Use the {new} as the base rather than the {old}.",
)


def check_phrasings(share: str) -> str:
    """`share` when it names one (seen, unseen); ConfigError otherwise."""
    if share not in PHRASING_SHARES:
        raise ConfigError(f"unknown phrasings {share!r}: choose {' or '.join(PHRASING_SHARES)}")
    return share


def _pick(templates: Sequence[str], rng: np.random.Generator) -> str:
    return templates[int(rng.integers(len(templates)))]


def held_out_task(steps: Sequence[Step], rng: np.random.Generator) -> str:
    """The task of `steps` in held-out phrasings (a drawn task's steps: no redirect)."""
    plain = all(not s.push and not s.stack for s in steps)
    if len(steps) == 1 and steps[0].stack:
        return _pick(HELD_OUT_STACK, rng).format(c=steps[0].cube, t=steps[0].target)
    if len(steps) == 1 and plain:
        return _pick(HELD_OUT_SINGLE, rng).format(c=steps[0].cube, t=steps[0].target)
    if len(steps) == 2 and plain:
        first, second = steps
        return _pick(HELD_OUT_MULTI, rng).format(c=first.cube, t=first.target, c2=second.cube, t2=second.target)
    clauses = [
        HELD_OUT_CLAUSE["push" if s.push else "stack" if s.stack else "place"].format(c=s.cube, t=s.target)
        for s in steps
    ]
    if len(clauses) > 2 and rng.random() < 0.5:
        return "to begin, " + ", next ".join(clauses[:-1]) + ", and last " + clauses[-1]
    return "; after that, ".join(clauses)


def interjection_phrases(stack: bool, share: str = "seen") -> tuple[str, ...]:
    """The operator's corrections of a placement (`stack`: of a stacking) in the `share` phrasings;
    each takes {cube}, {old} and {new}."""
    if check_phrasings(share) == "seen":
        return STACK_INTERJECTION_PHRASES if stack else INTERJECTION_PHRASES
    return HELD_OUT_STACK_INTERJECTIONS if stack else HELD_OUT_INTERJECTIONS
