"""Whether a training run learns anything: a loss that is exactly zero, or not a number, because
nothing was trained is an error, never a result.

A run whose batches reached the model without their action chunks once logged `flow_loss: 0.0` at
every step and a held-out flow loss of nan, and exited 0 (issue 34). The checks here stop such a run
with one line: at once for a loss that is not finite; once enough samples in a row trained nothing
(a batch can hold only pause frames, whose actions are masked out, so a single step proves
nothing); at the end of a run too short for that; and on a held-out loss that is not a number for
something the run trains.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from steerable.errors import ConfigError

__all__ = ["QUIET_SAMPLES", "LossChecks"]

# Samples in a row that may train nothing (or ask for actions and train none) before the run is
# stopped: far more than the pause frames a batch draws by chance.
QUIET_SAMPLES = 64


class LossChecks:
    """Fed every step's loss dict; raises ConfigError when the run is not learning (see the module
    docstring). `teaches_text`: the recipe has text targets."""

    def __init__(self, teaches_text: bool, quiet_samples: int = QUIET_SAMPLES) -> None:
        self.teaches_text = teaches_text
        self.quiet_samples = quiet_samples
        self.idle = 0  # samples since a step last trained text or actions
        self.unanswered = 0  # samples asking for actions since a step last trained some
        self.text_tokens = self.action_values = self.asked = 0

    def step(self, step: int, out: Mapping[str, Any], samples: int, asked: int, *, last: bool) -> None:
        """Step `step`'s losses `out` over `samples` samples, `asked` of them asking for actions (a
        low-level turn); `last`: the run's final step."""
        loss = float(out["loss"])
        if not math.isfinite(loss):
            raise ConfigError(f"step {step}: the training loss is {loss} (text {float(out['text_loss']):.4g}, flow "
                              f"{float(out['flow_loss']):.4g}): a run that diverged (try a lower --lr) or a "
                              "non-finite value in the data; the last checkpoint is as it was")
        text, actions = int(out["text_tokens"]), int(out["action_values"])
        self.text_tokens += text
        self.action_values += actions
        self.asked += asked
        self.idle = 0 if text or actions else self.idle + samples
        self.unanswered = 0 if actions else self.unanswered + asked
        if self.idle >= self.quiet_samples:
            raise ConfigError(f"step {step}: the last {self.idle} samples trained nothing (no text target, no "
                              "action): every loss is exactly 0; the recipe renders nothing to learn on this dataset")
        if self.unanswered >= self.quiet_samples:
            raise ConfigError(self._no_actions(step, self.unanswered))
        if last:
            if self.asked and not self.action_values:
                raise ConfigError(self._no_actions(step, self.asked))
            if self.teaches_text and not self.text_tokens:
                raise ConfigError(f"step {step}: no sample of this run trained text (the text loss was exactly 0 "
                                  "at every step), though the recipe has text targets")

    def heldout(self, metrics: Mapping[str, Any]) -> None:
        """A held-out evaluation's `eval_*` metrics: a loss that is not a number for what the run trains
        (text, actions) means the held-out episodes gave nothing to score, or the run diverged."""
        for kind, trained, what in (("text", self.text_tokens, "text target"), ("flow", self.action_values, "action")):
            value = metrics.get(f"eval_{kind}_loss")
            if value is not None and trained and not math.isfinite(float(value)):
                raise ConfigError(f"step {metrics['step']}: the held-out {kind} loss is {value}: the held-out "
                                  f"episodes gave no {what} to score, or the run diverged; hold out other episodes "
                                  "(--seed, --eval_fraction, --episodes) or none (--eval_fraction 0)")

    @staticmethod
    def _no_actions(step: int, asked: int) -> str:
        return (f"step {step}: {asked} samples asked for actions and none carried an action chunk to learn: the flow "
                "loss is exactly 0 (is --policy.action_key the dataset's action feature?)")
