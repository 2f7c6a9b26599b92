"""One async client for vision-language models, whatever serves them.

`make_vlm(config)` / `open_vlm(config)` build the configured backend: an OpenAI-compatible HTTP
server (vLLM, SGLang, Ollama, hosted), vLLM replicas launched here, or an in-process transformers
model. Test doubles (`ScriptedVLM`, the local test server) live in `steerable.testing`.
Heavy dependencies are imported only by the backend using them; the names below load on first use.
"""

from typing import TYPE_CHECKING

from steerable.lazy import lazy_exports
from steerable.vlm.config import VLMConfig
from steerable.vlm.protocol import Message, VLMClient, VLMStats

if TYPE_CHECKING:
    from steerable.vlm.factory import NO_MODEL_MESSAGE, make_vlm, open_vlm, resolve_backend
    from steerable.vlm.images import image_data_url
    from steerable.vlm.jsonrepair import extract_json

__all__ = [
    "NO_MODEL_MESSAGE",
    "Message",
    "VLMClient",
    "VLMConfig",
    "VLMStats",
    "extract_json",
    "image_data_url",
    "make_vlm",
    "open_vlm",
    "resolve_backend",
]

__getattr__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(("NO_MODEL_MESSAGE", "make_vlm", "open_vlm", "resolve_backend"), "factory"),
        "image_data_url": "images",
        "extract_json": "jsonrepair",
    },
)
