"""The language runtime: steer a robot (or the simulator) with a task, interjections and questions.

The contracts it drives live in `steerable.control` (environment, high-level model, low-level
controller; re-exported here); environments are built by name through `steerable.runtime.environments`.
The rest of the package builds the control loop, the REPL, recording and evaluation on them. The
names below load on first use, so `steerable.runtime.environments` can be read without numpy.
"""

from typing import TYPE_CHECKING

from steerable.lazy import lazy_exports

if TYPE_CHECKING:
    from steerable.control.environment import Environment
    from steerable.control.types import (
        ActionChunk,
        HighLevelModel,
        HighLevelRequest,
        HighLevelUpdate,
        LanguageContext,
        LowLevelController,
        Observation,
        ToolCall,
    )

__all__ = [
    "ActionChunk",
    "Environment",
    "HighLevelModel",
    "HighLevelRequest",
    "HighLevelUpdate",
    "LanguageContext",
    "LowLevelController",
    "Observation",
    "ToolCall",
]

__getattr__ = lazy_exports(
    "steerable.control",
    {
        "Environment": "environment",
        **dict.fromkeys(
            ("ActionChunk", "HighLevelModel", "HighLevelRequest", "HighLevelUpdate", "LanguageContext",
             "LowLevelController", "Observation", "ToolCall"),
            "types",
        ),
    },
)
