"""The language runtime: steer a robot (or the simulator) with a task, interjections and questions.

`steerable.runtime.protocols` holds the adapter contracts (high-level model, low-level controller,
environment); the rest of the package builds the control loop, the simulator, the REPL, recording
and evaluation on them.
"""

from steerable.runtime.protocols import (
    ActionChunk,
    Environment,
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
