"""The interjections module: Hi Robot-style interjections, `say` replies and plan refreshes."""

from typing import TYPE_CHECKING

from steerable.annotate.modules.interjections.config import SCENARIOS, InterjectionsConfig, Scenario
from steerable.annotate.modules.interjections.stage import InterjectionsStage
from steerable.lazy import lazy_exports

if TYPE_CHECKING:
    from steerable.annotate.modules.interjections.module import (
        InterjectionsModule,
        validate_interjection_rows,
    )

__all__ = [
    "SCENARIOS",
    "InterjectionsConfig",
    "InterjectionsModule",
    "InterjectionsStage",
    "Scenario",
    "validate_interjection_rows",
]

__getattr__ = lazy_exports(
    __name__, {"InterjectionsModule": "module", "validate_interjection_rows": "module"}
)
