"""The interjections module: Hi Robot-style user interjections, `say` replies and plan refreshes."""

from steerable.annotate.modules.interjections.config import SCENARIOS, InterjectionsConfig, Scenario
from steerable.annotate.modules.interjections.module import (
    InterjectionsModule,
    validate_interjection_rows,
)

__all__ = [
    "SCENARIOS",
    "InterjectionsConfig",
    "InterjectionsModule",
    "Scenario",
    "validate_interjection_rows",
]
