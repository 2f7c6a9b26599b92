"""Runtime tools a model can call: the `Tool` protocol, a validating registry, and `say` with TTS backends.

The names load on first use (`steerable.lazy`): the run settings read the voices' names
(`steerable.tools.voices`) without numpy or pyarrow.
"""

from typing import TYPE_CHECKING

from steerable.lazy import lazy_exports
from steerable.tools.voices import TTS_BACKENDS

if TYPE_CHECKING:
    from steerable.tools.base import Tool
    from steerable.tools.registry import TOOL_FACTORIES, ToolOutcome, ToolRegistry, load_tools
    from steerable.tools.say import SayTool, Speech, make_backend

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

__getattr__ = lazy_exports(
    __name__,
    {
        "Tool": "base",
        **dict.fromkeys(("TOOL_FACTORIES", "ToolOutcome", "ToolRegistry", "load_tools"), "registry"),
        **dict.fromkeys(("SayTool", "Speech", "make_backend"), "say"),
    },
)
