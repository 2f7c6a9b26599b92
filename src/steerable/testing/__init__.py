"""Test doubles that users may use too: a scripted VLM and a local OpenAI-compatible test server.

Nothing here is a model: replies come from Python functions or from placeholders that match the
requested JSON schema. Production code never picks these; tests, benchmarks and the demo do.
"""

from steerable.testing.scripted import ScriptedCall, ScriptedVLM

__all__ = ["ScriptedCall", "ScriptedVLM"]
