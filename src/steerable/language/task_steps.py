"""The steps a task string names, read by a small English grammar (no model).

A dataset's one task string per episode often names what its steps are about: "first put the red
cube in the yellow bin, then put the pink cube in the yellow bin", "pick up the cube and put it in the
box", "put both the alphabet soup and the tomato sauce in the basket". `parse_task` reads those steps;
`manipulations` groups them into the units a motion annotator can see (a grasp-to-release span is one
pick-and-place, a gripper-free sideways move one push), so the no-model annotator can name what its
segments do (`steerable.motion.subtasks`).

The grammar, in order (docs/annotate.md, "Names from the task"):

1. Lower case, final punctuation and "please" / "can you" / "could you" dropped.
2. Clauses: split at ";", ". ", "then", "after that", "next", "finally", "lastly", "and last",
   "afterwards" (with or without a comma or "and" before them), and at "and" or a comma followed by a
   verb of the lexicon (`VERBS`). A leading "first" or "to begin," goes. A clause that starts with an
   article ("..., then the blue cube in the tray") repeats the verb of the clause before it.
3. A clause: its verb (the longest entry of `VERBS` it starts with, particle included: "pick up",
   "turn on"), its object (up to the first preposition of `PREPOSITIONS`), its place (the preposition
   and what follows, "in the basket", "to the right of the plate"); a push keeps its direction as the
   place ("push the red cube left").
4. Objects joined by "and" where the second has its own article ("the soup and the sauce") make one
   step each with the same verb and place; "both" goes. An "and" inside one name stays ("the yellow
   and white mug").
5. "it" / "them" is what it refers to, with "the": for open / close / turn on / off, the place of the
   step before (its container); otherwise the object of the step before ("pick up a block and put it
   in the bin": the block), or, in a place, the object of the step before when that step moved
   something else ("turn on the stove and put the moka pot on it": the stove).

English only; a task whose first word is not a verb of the lexicon has no steps (`parse_task` returns
[]), and the annotator says so and keeps its unnamed texts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "PREPOSITIONS", "VERBS", "Manipulation", "Step", "manipulations", "memory_text", "parse_task", "plan_text",
]

StepKind = Literal["pick", "place", "push", "other"]

# Verb -> what it does to its object. Multi-word entries first matter only through longest match.
VERBS: dict[str, StepKind] = {
    **dict.fromkeys(("pick up", "pick", "grab", "grasp", "take", "lift", "pick out", "take out", "remove",
                     "retrieve", "get"), "pick"),
    **dict.fromkeys(("put", "place", "drop", "move", "stack", "set", "insert", "transfer", "bring", "carry",
                     "dunk", "hang", "pour", "throw", "toss", "pile", "put down", "place down", "return",
                     "store", "give", "hand"),
                    "place"),
    **dict.fromkeys(("push", "slide", "nudge", "sweep", "shove"), "push"),
    **dict.fromkeys(("open", "close", "shut", "turn on", "turn off", "switch on", "switch off", "press", "rotate",
                     "turn", "pull", "fold", "unfold", "wipe", "flip", "hammer", "lock", "unlock", "plug",
                     "unplug", "screw", "unscrew", "reach", "lift up", "stir", "cover", "uncover", "knock over",
                     "wrap", "hand over", "handover", "pass", "bypass", "dial", "empty", "fill", "sort",
                     "clean", "tidy", "tidy up", "assemble", "disassemble", "peg", "kick", "shoot", "play",
                     "rinse", "wash", "use", "water", "spray", "scoop", "cut", "slice", "peel", "stir"),
                    "other"),
}
# Longest first, so "on top of" wins over "on" and "to the left of" over "to".
PREPOSITIONS = tuple(sorted((
    "in", "into", "inside", "in front of", "on", "onto", "on top of", "to", "towards", "toward", "under",
    "underneath", "out of", "from", "at", "next to", "beside", "near", "to the left of", "to the right of",
    "behind", "over", "above", "below", "between", "off", "off of", "through", "with", "across", "along",
    "around", "against", "inside of", "within", "back to", "back in", "back into", "back on", "back onto",
), key=len, reverse=True))
_DIRECTIONS = ("left", "right", "forward", "forwards", "backward", "backwards", "back", "away", "up", "down",
               "aside", "sideways")
_CONTAINER_VERBS = ("open", "close", "shut", "turn on", "turn off", "switch on", "switch off", "lock", "unlock")
_ARTICLES = ("the", "a", "an", "some", "one", "another", "both", "each", "all", "every", "two", "three", "this",
             "that", "these", "those", "its", "his", "her", "their", "my", "your")
_LEADS = ("first of all,", "first,", "first", "to begin,", "to begin with,", "to start,", "start by",
          "and", "then", "please", "can you", "could you", "would you", "now", "also", "next,", "next", "go", "go and")
_PRONOUNS = ("it", "them")
# Where a pick takes its object from, or with what: not where it goes.
_SOURCES = ("from ", "out of ", "off ", "off of ", "with ", "using ", "at ")
# "the red cube belongs in the tray": a placement without a verb of its own.
_BELONGS = re.compile(r"^(?P<thing>.+?) (?:belongs|goes|should go) (?P<place>(?:in|into|on|onto|inside) .+)$")
_SEPARATORS = re.compile(
    r"\s*(?:;|\.\s+|,?\s*(?:and\s+)?(?:then|after that|afterwards|next|finally|lastly|last)\b,?)\s*")


@dataclass(frozen=True)
class Step:
    """One action the task names: `verb` as written ("pick up"), its `thing` ("the red cube"; None when
    the verb has no object), its `place` with the preposition ("in the yellow bin"; a push's direction)."""

    verb: str
    thing: str | None
    place: str | None

    @property
    def kind(self) -> StepKind:
        """What the step does; a pick verb sent somewhere places ("get the cube into the tray")."""
        kind = VERBS.get(self.verb, "other")
        if kind == "pick" and self.place is not None and not self.place.startswith(_SOURCES):
            return "place"
        return kind

    @property
    def text(self) -> str:
        """The canonical step: "put the red cube in the yellow bin"."""
        return " ".join(p for p in (self.verb, self.thing, self.place) if p)


@dataclass(frozen=True)
class Manipulation:
    """What one motion unit does: a pick-and-place of `thing` to `place` (a grasp-to-release span; `place`
    None for a pick that is never set down), or a push of `thing` (`place`: its direction or goal)."""

    kind: Literal["pick_place", "push"]
    thing: str
    place: str | None

    def subtasks(self) -> list[str]:
        """The unit's subtask texts, in the simulator's and a VLM's style: pick, then place (where it
        comes to rest: "into the bin" is said "in the bin"); or one push."""
        if self.kind == "push":
            return [" ".join(p for p in ("push", self.thing, self.place) if p)]
        return [f"pick up {self.thing}", *([f"place {self.thing} {_resting(self.place)}"] if self.place else [])]


def parse_task(task: str) -> list[Step]:
    """The steps of `task` in order; [] when a clause does not start with a known verb."""
    text = _normalise(task)
    steps: list[Step] = []
    verb: str | None = None
    clauses = _clauses(text)
    for k, clause in enumerate(clauses):
        found = _verb(clause)
        if found is not None and clause == found and k + 1 < len(clauses):
            # "pick and place a puck onto a shelf": the bare verb acts on the next clause's object.
            after = _verb(clauses[k + 1])
            thing = _split_place(after, clauses[k + 1][len(after):].strip())[0] if after else None
            if after is not None and thing is not None:
                steps.append(Step(found, thing, None))
                clauses[k + 1] = f"{after} {_definite(thing)}{clauses[k + 1][len(after) + 1 + len(thing):]}"
                verb = found
                continue
        if found is None:
            if verb is None or clause.split(" ", 1)[0] not in _ARTICLES:
                return []
            found, rest = verb, clause  # "..., then the blue cube in the tray": the verb before, again
        else:
            rest = clause[len(found):].strip()
        verb = found
        for thing, place in _objects(found, rest):
            steps.append(_resolve(Step(found, thing, place), steps))
    return steps


def manipulations(steps: list[Step]) -> list[Manipulation] | None:
    """The motion units `steps` make, or None when a step is none of pick, place or push.

    "pick up X" followed by "put X in Y" (the same thing) is one pick-and-place; "put X in Y" alone is
    one too; "pick up X" alone is a pick never set down (its unit has no place).
    """
    units: list[Manipulation] = []
    for step in steps:
        if step.thing is None or step.kind == "other":
            return None
        if step.kind == "push":
            units.append(Manipulation("push", step.thing, step.place))
        elif step.kind == "place" and step.place is not None:
            held = units[-1] if units and units[-1].kind == "pick_place" and units[-1].place is None else None
            if held is not None and _bare(held.thing) == _bare(step.thing):
                units[-1] = Manipulation("pick_place", step.thing, step.place)
            else:
                units.append(Manipulation("pick_place", step.thing, step.place))
        elif step.kind == "pick":
            units.append(Manipulation("pick_place", step.thing, None))
        else:  # a place verb with nowhere to put it ("put down the cup")
            return None
    return units or None


def plan_text(steps: list[str]) -> str:
    """Numbered lines, one per remaining step, the layout of every plan row."""
    return "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))


def memory_text(done: list[Manipulation], holding: str | None) -> str:
    """What the finished units leave behind, and what is in hand, as one sentence."""
    facts = [f"{u.thing} is {_resting(u.place)}" if u.kind == "pick_place" and u.place
             else f"{u.thing} was pushed{' ' + u.place if u.place else ''}" for u in done]
    if holding is not None:
        facts.append(f"holding {holding}")
    sentence = "; ".join(facts) or "nothing done yet"
    return sentence[0].upper() + sentence[1:] + "."


def _resting(place: str) -> str:
    """Where a placed thing is: "into the bin" -> "in the bin", "onto the plate" -> "on the plate"."""
    for said, state in (("into ", "in "), ("onto ", "on "), ("inside ", "in "), ("on top of ", "on ")):
        if place.startswith(said):
            return state + place[len(said):]
    return place


def _normalise(task: str) -> str:
    text = " ".join(task.strip().lower().replace("\u2019", "'").split())
    return text.rstrip(".!?").strip()


def _clauses(text: str) -> list[str]:
    parts = [p for p in _SEPARATORS.split(text) if p and p.strip(" ,")]
    out: list[str] = []
    for part in parts:
        part = _strip_leads(part.strip(" ,"))
        said = _BELONGS.match(part)
        out.extend([f"put {said['thing']} {said['place']}"] if said else _split_verbs(part))
    return [c for c in out if c]


def _strip_leads(clause: str) -> str:
    changed = True
    while changed:
        changed = False
        for lead in _LEADS:
            if clause.startswith(lead + " ") or clause == lead:
                clause = clause[len(lead):].strip(" ,")
                changed = True
    return clause


def _split_verbs(clause: str) -> list[str]:
    """Cut at "and" or a comma followed by a verb of the lexicon: two verbs, two steps."""
    words = clause.split(" ")
    cuts = [0]
    for i, word in enumerate(words):
        joined = word in ("and", "&") or word.endswith(",")
        if joined and i + 1 < len(words) and i > cuts[-1]:
            after = " ".join(words[i + 1:])
            if _verb(_strip_leads(after)) is not None:
                cuts.append(i + 1)
    pieces = []
    for a, b in zip(cuts, [*cuts[1:], len(words)], strict=True):
        piece = " ".join(words[a:b]).strip(" ,")
        piece = piece[:-4] if piece.endswith(" and") else piece
        pieces.append(_strip_leads(piece.strip(" ,")))
    return pieces


def _verb(clause: str) -> str | None:
    best = None
    for verb in VERBS:
        if (clause == verb or clause.startswith(verb + " ")) and (best is None or len(verb) > len(best)):
            best = verb
    return best


def _objects(verb: str, rest: str) -> list[tuple[str | None, str | None]]:
    """(object, place) pairs of one clause: one, or one per coordinated object."""
    thing, place = _split_place(verb, rest)
    if thing is None:
        return [(None, place)]
    things = [t.strip() for t in re.split(r"\s+and\s+(?=(?:" + "|".join(_ARTICLES) + r")\s)", thing)]
    things = [t[len("both "):] if t.startswith("both ") and len(things) > 1 else t for t in things]
    if len(things) == 1 and things[0].startswith("both ") and " and " in things[0]:
        things = [things[0][len("both "):]]
    return [(t, place) for t in things if t]


def _split_place(verb: str, rest: str) -> tuple[str | None, str | None]:
    if not rest:
        return None, None
    words = rest.split(" ")
    if VERBS.get(verb) == "push" and words[-1] in _DIRECTIONS and len(words) > 1:
        return " ".join(words[:-1]), words[-1]
    for i in range(1, len(words)):
        tail = " ".join(words[i:])
        for prep in PREPOSITIONS:
            if tail == prep or tail.startswith(prep + " "):
                return " ".join(words[:i]), tail
    if words[0] in PREPOSITIONS:
        return None, rest
    return rest, None


def _resolve(step: Step, before: list[Step]) -> Step:
    """Pronouns replaced by what they refer to, with "the" as their article."""
    prev = before[-1] if before else None
    thing, place = step.thing, step.place
    if thing is None and place is not None and VERBS.get(step.verb) == "place" and prev is not None and prev.thing:
        thing = _definite(prev.thing)  # "pick up the cube and put in the box": the cube
    if thing in _PRONOUNS and prev is not None:
        container = step.verb in _CONTAINER_VERBS and prev.place is not None
        target = _place_noun(prev.place) if container else prev.thing
        thing = _definite(target) if target else thing
    if place is not None and prev is not None and prev.thing is not None:
        words = place.split(" ")
        for i, word in enumerate(words):
            if word in _PRONOUNS and (i + 1 == len(words)):
                referent = prev.thing if prev.thing != thing else _place_noun(prev.place)
                if referent:
                    place = " ".join([*words[:i], _definite(referent)])
    return Step(step.verb, thing, place)


def _place_noun(place: str | None) -> str | None:
    if not place:
        return None
    for prep in PREPOSITIONS:
        if place.startswith(prep + " "):
            return place[len(prep) + 1:]
    return place


def _bare(phrase: str) -> str:
    """A noun phrase without its article: "a lego block" and "the lego block" name one thing."""
    first, _, rest = phrase.partition(" ")
    return rest if first in _ARTICLES and rest else phrase


def _definite(phrase: str) -> str:
    first, _, rest = phrase.partition(" ")
    if first in ("all", "both") and rest.startswith("the "):
        return rest
    if first in ("a", "an", "the", "one", "some", "another") and rest and not rest.startswith("of "):
        return f"the {rest}"
    return phrase if first in _ARTICLES else f"the {phrase}"
