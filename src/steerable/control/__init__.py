"""The control contract: what an environment, a high-level model and a low-level controller provide.

Plain data and `typing.Protocol`s over numpy only, low in the layers, so the simulator
(`steerable.synthetic`), the runtime and the policy adapters all build on the same types.
"""

from steerable.control.environment import (
    Body,
    DescribesScene,
    Environment,
    EpisodeSpec,
    ObservationKind,
    ProvidesEnvironmentState,
    RecordedEpisode,
    RecordsGroundTruth,
    ScriptsController,
    ScriptsPlanner,
    SeedsForTask,
    TakesInterjections,
)
from steerable.control.types import (
    ENVIRONMENT_STATE_FEATURE,
    ActionChunk,
    ChunkPrefix,
    ContinuesChunks,
    HighLevelModel,
    HighLevelRequest,
    HighLevelUpdate,
    LanguageContext,
    LowLevelController,
    Observation,
    RequestKind,
    ToolCall,
)

__all__ = [
    "ENVIRONMENT_STATE_FEATURE",
    "ActionChunk",
    "Body",
    "ChunkPrefix",
    "ContinuesChunks",
    "DescribesScene",
    "Environment",
    "EpisodeSpec",
    "HighLevelModel",
    "HighLevelRequest",
    "HighLevelUpdate",
    "LanguageContext",
    "LowLevelController",
    "Observation",
    "ObservationKind",
    "ProvidesEnvironmentState",
    "RecordedEpisode",
    "RecordsGroundTruth",
    "RequestKind",
    "ScriptsController",
    "ScriptsPlanner",
    "SeedsForTask",
    "TakesInterjections",
    "ToolCall",
]
