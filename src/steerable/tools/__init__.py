"""Runtime tools a model can call: the `Tool` protocol, a validating registry, and `say` with TTS backends."""

from steerable.tools.base import Tool
from steerable.tools.registry import TOOL_FACTORIES, ToolOutcome, ToolRegistry, load_tools
from steerable.tools.say import TTS_BACKENDS, SayTool, Speech, make_backend

__all__ = [
    "TOOL_FACTORIES",
    "TTS_BACKENDS",
    "SayTool",
    "Speech",
    "Tool",
    "ToolOutcome",
    "ToolRegistry",
    "load_tools",
    "make_backend",
]
