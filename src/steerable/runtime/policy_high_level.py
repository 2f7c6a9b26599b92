"""The trained policy as the runtime's high level (`steerable run --high_level policy --policy.path
CKPT`): the `hierarchical` recipe's components. `steerable.runtime.policy_adapter` loads it and
imports this module, never the reverse.

Without a plan it writes one from the task and the memory; when the controller reports its command
done, it writes the memory and the remaining plan after that subtask; then the subtask is the plan's
first step (a numbered plan lists the remaining steps), or, for a plan in other words, written from
task + plan + memory (a periodic update with none of them changed keeps it). A step reported done
that the policy's step check says did not take (`--policy.step_check`, docs/policy.md "Checking a
step") is done again with the step it was planned to follow (`_redo_steps`). An interjection gets the
revised plan and a spoken reply (`say`); a question about the scene gets an answer. Over a low level
that never reports a command done (a policy trained without a done head) the high level reads
progress from the observation (the `progress` question).

Every prompt is rendered from the checkpoint's recipe (`PolicyRunner.prompts`,
`steerable.recipes.live`) as training rendered it, token for token; a question the recipe does not
train is not asked: no memory without a memory component, no reply to an interjection or a question
without theirs (the update is empty, and the log says why). A recipe that gives no way to the next
subtask (no plan or subtask question; no `progress` question over a low level that never reports
done) is refused when the high level is built.

What a call costs is bounded whatever the model writes: each kind of text has a token budget
(`TOKEN_BUDGETS`: a subtask is one short line, a plan or an interjection's reply a few lines), so a
weak model's garbage stops there. A text its budget cut is not taken as an answer: the call fails,
the robot holds still, and the loop asks again less and less often while the model keeps failing
(`runtime.loop`), so a weak policy's evaluation costs what a good one's does.

The policy's observation, which both levels read, is built by `steerable.runtime.policy_observation`.
A policy trained without cameras does not make the environment render them (`wants_images`).
"""

from __future__ import annotations

import dataclasses
import logging
import re

from steerable.control import HighLevelRequest, HighLevelUpdate, LanguageContext, ToolCall
from steerable.errors import ConfigError
from steerable.policy.generation import GenerationConfig, ParsedReply
from steerable.policy.inference import PolicyObservation
from steerable.policy.names import SLOT_COMPONENTS
from steerable.recipes.live import LivePrompt, LivePrompts, Question
from steerable.runtime.policy_observation import ChecksSteps, TextPolicy, policy_observation, reads_cameras

__all__ = ["MAX_REDO", "STEP_CHECK_THRESHOLD", "TOKEN_BUDGETS", "PolicyHighLevel"]

logger = logging.getLogger(__name__)

# New tokens per generated text, by what it is. The training targets of the synthetic data need at
# most 8 tokens for a subtask, 23 for a memory and 56 for a four-step plan (tiny tokenizer, 20
# realistic episodes); an interjection's reply is a revised plan plus a `say` call. Decoding stops
# earlier at the end of the text (and a subtask at the end of its line); the budget only bounds
# what a model that never stops can cost.
TOKEN_BUDGETS: dict[str, int] = {"subtask": 24, "memory": 48, "plan": 96, "interjection": 128, "answer": 64}

# How often one step reported done is done again because the scene shows it did not take (`_redo_steps`).
MAX_REDO = 5
# The step check's probability below which a step reported done is taken as not done.
STEP_CHECK_THRESHOLD = 0.5
_NUMBER = re.compile(r"^\s*\d+[.)]\s*")


def _step(text: str) -> str:
    return _NUMBER.sub("", text).strip().lower()


def _plan_steps(plan: str) -> list[str]:
    """The steps of a numbered plan ("1. pick up the cube" lines), normalised for comparison."""
    return [_step(line) for line in plan.splitlines() if line.strip()]


class PolicyHighLevel:
    """`HighLevelModel` over a trained policy's text head; `prompts`: the runner's (its checkpoint's
    recipe) unless given."""

    name = "policy"

    def __init__(self, runner: TextPolicy, generation: GenerationConfig | None = None, *,
                 progress_from_observation: bool = False, step_check: bool = True,
                 prompts: LivePrompts | None = None) -> None:
        self.runner = runner
        self.prompts = prompts or runner.prompts
        _check_questions(self.prompts, progress_from_observation)
        # Decoding settings; `max_new_tokens` is replaced by each text's `TOKEN_BUDGETS` entry.
        self.generation = generation or GenerationConfig()
        self.last_subtask: str | None = None
        # The (task, plan, memory) the last subtask was written from: asked again with the same
        # context, the answer would only differ by the model's noise, so the subtask is kept.
        self._written_from: tuple[str, str | None, str | None] | None = None
        # Under a low level that never reports a command done (the policy's own action expert),
        # progress is read from the observation: each update asks which step the scene is at.
        self.progress_from_observation = progress_from_observation
        # A step reported done is checked against the scene (the policy's step check, when it has one):
        # the step finished before it under the same plan, whether the check confirmed that one, and
        # how often each step was done again (`_redo_steps`).
        self.step_check = step_check
        self._before: str | None = None
        self._before_confirmed = False
        self._redone: dict[str, int] = {}

    def reset(self) -> None:
        self.last_subtask = None
        self._written_from = None
        self._before = None
        self._before_confirmed = False
        self._redone = {}

    @property
    def wants_images(self) -> bool:
        return reads_cameras(self.runner)

    def _one(self, kind: str, prompt: LivePrompt, observation: PolicyObservation) -> ParsedReply:
        """One reply of `kind` (a `TOKEN_BUDGETS` key), at most that many new tokens."""
        gen = dataclasses.replace(self.generation, max_new_tokens=TOKEN_BUDGETS[kind])
        return _ended(kind, self.runner.generate([prompt.messages], observation, gen, canonical=_renamed(prompt))[0])

    def _subtask(self, prompt: LivePrompt, observation: PolicyObservation) -> str:
        """A subtask is one command line (as the recipe writes them): decoding stops at a line break."""
        single = dataclasses.replace(self.generation, stop=(*self.generation.stop, "\n"),
                                     max_new_tokens=TOKEN_BUDGETS["subtask"])
        reply = self.runner.generate([prompt.messages], observation, single, canonical=_renamed(prompt))[0]
        text = str(_ended("subtask", reply).text or "").strip()
        if not text:
            raise ValueError("the policy generated an empty subtask")
        return text

    def _unasked(self, question: Question, what: str) -> HighLevelUpdate:
        logger.warning("the policy's recipe (%s) trains no %r question: %s is not asked", self.prompts.origin,
                       question, what)
        return HighLevelUpdate()

    def update(self, request: HighLevelRequest) -> HighLevelUpdate:
        ctx = request.context
        obs = policy_observation(request.observation, self.runner)
        if request.kind == "interjection":
            if not self.prompts.has("interjection"):
                return self._unasked("interjection", "a reply to the interjection")
            prompt = self.prompts.render("interjection", ctx, user_text=request.user_text or "")
            reply = self._one("interjection", prompt, obs)
            calls = tuple(ToolCall(c["function"]["name"], c["function"]["arguments"]) for c in reply.tool_calls
                          if c["function"]["name"] != "say")
            return HighLevelUpdate(plan=reply.text or None, speech=" ".join(reply.say) or None, tool_calls=calls)
        if request.kind == "ask":
            if not self.prompts.has("vqa"):
                return self._unasked("vqa", "the question about the scene")
            prompt = self.prompts.render("vqa", ctx, images=obs.get("images"), user_text=request.user_text or "")
            return HighLevelUpdate(answer=self._one("answer", prompt, obs).text)
        if self.progress_from_observation:
            return self._observed_update(ctx, obs)
        finished = ctx.subtask if request.controller_done else None
        if not finished and ctx.subtask and ctx.subtask == self.last_subtask and \
                self._written_from == (ctx.task, ctx.plan, ctx.memory):
            return HighLevelUpdate()  # a periodic update with nothing new: the subtask stands
        took = self._took(finished, obs) if finished else None
        if finished and took is not None and took < STEP_CHECK_THRESHOLD:
            return self._redo(ctx, finished)
        if finished and ctx.plan and _plan_steps(ctx.plan) == [_step(finished)]:
            # The plan lists the remaining steps: finishing the only one left finishes the task.
            return HighLevelUpdate(task_done=True)
        new_plan, new_memory = self._rewrite(ctx, finished, obs)
        plan = new_plan or ctx.plan
        memory = new_memory if finished and ctx.plan else ctx.memory
        subtask = _first_step(plan) or self._subtask(self._ask_subtask(ctx, plan, memory), obs)
        # The next step is planned to follow `finished` (None: the plan changed, nothing finished).
        self._before, self._before_confirmed = finished, took is not None
        self.last_subtask = subtask
        self._written_from = (ctx.task, plan, memory)
        return HighLevelUpdate(subtask=subtask, plan=new_plan, memory=new_memory)

    def _ask_subtask(self, ctx: LanguageContext, plan: str | None, memory: str | None) -> LivePrompt:
        """The prompt for the subtask from task + plan + memory (a plan that is not a numbered list)."""
        if not self.prompts.has("subtask"):
            raise ValueError(f"the policy's plan is not a numbered list and its recipe ({self.prompts.origin}) "
                             "trains no subtask from the plan")
        return self.prompts.render("subtask", dataclasses.replace(ctx, plan=plan, memory=memory))

    def _took(self, finished: str, obs: PolicyObservation) -> float | None:
        """The step check's probability that `finished`, reported done, took; None when it is not
        asked: no check (`--policy.step_check`, or a policy without one), or `MAX_REDO` redos of it
        already. A first step is checked too (a pick the cameras' check sees missed is done again)."""
        if not (self.step_check and isinstance(self.runner, ChecksSteps)):
            return None
        if self._redone.get(_step(finished), 0) >= MAX_REDO:
            return None
        took = self.runner.step_took(finished, obs)
        return None if took is None else float(took)

    def _redo_steps(self, finished: str) -> list[str]:
        """What to do again when `finished` did not take: the step finished before it under the same
        plan (the step it was planned to follow, whose result it starts from), unless the check
        confirmed that one, then `finished` itself, word for word as they were asked. No word of a step
        is read: which steps the check can judge is the policy's business (`PolicyRunner.step_took`)."""
        before = [] if self._before_confirmed or self._before is None else [self._before]
        return [*before, finished]

    def _redo(self, ctx: LanguageContext, finished: str) -> HighLevelUpdate:
        """The steps of `_redo_steps` put back at the head of the remaining plan; the memory stays as it was."""
        self._redone[_step(finished)] = self._redone.get(_step(finished), 0) + 1
        again = self._redo_steps(finished)
        rest = _after_first(ctx.plan, finished) if ctx.plan else None
        steps = [*again, *(_NUMBER.sub("", line).strip() for line in (rest or "").splitlines() if line.strip())]
        plan = "\n".join(f"{i}. {line}" for i, line in enumerate(steps, 1))
        self._before, self._before_confirmed = None, False
        self.last_subtask = again[0]
        self._written_from = (ctx.task, plan, ctx.memory)
        return HighLevelUpdate(subtask=again[0], plan=plan)

    def _observed_update(self, ctx: LanguageContext, obs: PolicyObservation) -> HighLevelUpdate:
        """The step the observation shows (the `progress` question); when it moves on, the one before
        is finished: memory and plan are updated as after a reported "done"."""
        subtask = self._subtask(self.prompts.render("progress", ctx), obs)
        finished = ctx.subtask if ctx.subtask and _step(subtask) != _step(ctx.subtask) else None
        new_plan, new_memory = self._rewrite(ctx, finished, obs)
        self.last_subtask = subtask
        return HighLevelUpdate(subtask=subtask, plan=new_plan, memory=new_memory)

    def _rewrite(self, ctx: LanguageContext, finished: str | None, obs: PolicyObservation
                 ) -> tuple[str | None, str | None]:
        """(plan, memory) newly written, None where nothing was (or the recipe trains no such question):
        without a plan, one from task + memory; after the subtask `finished`, the memory and the plan
        that remains."""
        if not ctx.plan:
            if not self.prompts.has("plan"):
                return None, None
            return self._one("plan", self.prompts.render("plan", ctx), obs).text or None, None
        if not finished:
            return None, None
        memory = None
        if self.prompts.has("memory"):
            memory = self._one("memory", self.prompts.render("memory", ctx, finished=finished), obs).text or None
        remaining = _after_first(ctx.plan, finished)
        if remaining is not None or not self.prompts.has("plan_update"):
            return remaining, memory
        prompt = self.prompts.render("plan_update", ctx, finished=finished)
        return self._one("plan", prompt, obs).text or None, memory


def _check_questions(prompts: LivePrompts, progress_from_observation: bool) -> None:
    """Refuse, in one line, a recipe that gives this high level no way to the next subtask."""
    if progress_from_observation and not prompts.has("progress"):
        raise ConfigError(f"the policy's recipe ({prompts.origin}) trains no `progress` question (the step "
                          "from the task and the observation), which the high level needs over a low level "
                          "that never reports a command done; use --high_level scripted")
    if not progress_from_observation and not (prompts.has("plan") or prompts.has("subtask")):
        raise ConfigError(f"the policy's recipe ({prompts.origin}) trains neither a plan nor a subtask: it "
                          "cannot be the high level; use --high_level scripted")


def _renamed(prompt: LivePrompt) -> bool:
    """Whether training renamed this component's samples (`name_slots`): then so does the runtime."""
    return prompt.component in SLOT_COMPONENTS


def _first_step(plan: str | None) -> str | None:
    """The first step of a numbered plan ("1. pick up the red cube" lines), or None for any other text.

    A plan lists the remaining steps, so its first step is the subtask (the recipe's plans, and the
    subtasks it trains on, say so). Taken as written rather than copied out again by the model: the
    copy is where a small model went wrong (stacking: "place the green cube on the green cube"
    under a plan that says "on the cyan cube").
    """
    lines = [line for line in (plan or "").splitlines() if line.strip()]
    if not lines or not all(_NUMBER.match(line) for line in lines):
        return None
    return _NUMBER.sub("", lines[0]).strip() or None


def _ended(kind: str, reply: ParsedReply) -> ParsedReply:
    """`reply`, unless its token budget cut it: a text longer than every one the recipe trains on is
    not an answer (a weak policy's run-on text), and is a failed call (the loop holds and backs off)."""
    if reply.truncated:
        raise ValueError(f"the policy's {kind} did not end within {TOKEN_BUDGETS[kind]} tokens "
                         f"({str(reply.text)[:40]!r}...)")
    return reply


def _after_first(plan: str, finished: str) -> str | None:
    """The plan without its first step when that step is `finished`, renumbered (None otherwise).

    A plan lists the remaining steps (the recipe's plans, and the plan updates it trains on, do), so
    finishing its first step leaves the rest: kept as written rather than copied out again by the
    model, whose copy was where a small model went wrong (a finished step kept, a name changed).
    """
    steps = [line for line in plan.splitlines() if line.strip()]
    if len(steps) < 2 or _step(steps[0]) != _step(finished):
        return None
    rest = [_NUMBER.sub("", line).strip() for line in steps[1:]]
    return "\n".join(f"{i}. {line}" for i, line in enumerate(rest, 1))
