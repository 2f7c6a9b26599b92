"""`VLMConfig`: the `--vlm.*` settings tree, validated when it is built.

One model serves every backend and every command (`annotate`, and `run --high_level vlm`), so a YAML
file or flags written for one backend or command keep working with another. `run`'s old spellings are
aliases: `--vlm.timeout_s` is `--vlm.request_timeout_s`, and `base_url` may be one string (comma-separated
URLs). The API key is a `SecretStr`: it never shows in reprs, logs or summaries.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, ConfigDict, Field, SecretStr, field_validator

from steerable.settings import Settings
from steerable.vlm.backends import backend_names, check_backend_name

__all__ = ["VLMConfig"]

StructuredOutput = Literal["auto", "json_schema", "prompt"]


class VLMConfig(Settings):
    """Which vision-language model answers the annotation prompts, and how it is called."""

    model_config = ConfigDict(extra="forbid")
    section: ClassVar[str] = "vlm"
    doc: ClassVar[str | None] = "docs/vlm.md"

    backend: str = Field(
        "auto", description=f"{' | '.join(backend_names())} (auto: base_url > local vLLM on a GPU; see vlm/backends.py)"
    )
    model_id: str | None = Field(None, description="model name on the server, or HF id / local path")
    base_url: list[str] = Field(
        default_factory=list, description="OpenAI-compatible server URL(s), comma-separated"
    )
    api_key: SecretStr | None = Field(None, description="API key (default: env OPENAI_API_KEY)")
    client_concurrency: int = Field(16, ge=1, description="VLM requests in flight at once, all episodes")
    # With the defaults a call that gets no reply ends within 4 x 60 s + backoff (about 4 min), and a
    # server that answers nothing is given up after 2 x 60 s (docs/vlm.md, "When a server hangs").
    request_timeout_s: float = Field(
        60.0, gt=0, validation_alias=AliasChoices("request_timeout_s", "timeout_s"),
        description="seconds before one request is abandoned (a server silent for twice this is given up)",
    )
    max_retries: int = Field(3, ge=0, description="extra attempts per call (errors, bad or invalid JSON)")
    backoff_base_s: float = Field(0.5, ge=0, description="first retry delay; doubles on each retry")
    max_new_tokens: int = Field(512, ge=1, description="reply token budget per call")
    temperature: float = Field(0.2, ge=0, le=2, description="sampling temperature")
    structured_output: StructuredOutput = Field(
        "auto", description="auto | json_schema | prompt (auto: json_schema, prompt-only if refused)"
    )
    image_max_side: int = Field(768, ge=16, description="images are downscaled to this longest side")
    jpeg_quality: int = Field(85, ge=1, le=100, description="JPEG quality of images sent to the model")
    chat_template_kwargs: dict[str, Any] | None = Field(
        None, description='JSON passed to the chat template, e.g. {"enable_thinking": false}'
    )
    reasoning_effort: str | None = Field(None, description="reasoning effort hint for hosted models")
    parallel_servers: int | None = Field(
        None, ge=1, description="vLLM replicas to launch (default: one per GPU)"
    )
    num_gpus: int | None = Field(None, ge=1, description="GPUs the vLLM replicas share (default: all found)")
    serve_port: int = Field(
        8000, ge=1, le=65535, description="port of the first vLLM replica (+i for others)"
    )
    serve_command: str | None = Field(
        None, description="replica command template; {model} {port} {tp} are filled in"
    )
    serve_ready_timeout_s: float = Field(900.0, gt=0, description="seconds to wait for replicas to load")
    log_dir: Path | None = Field(None, description="folder for vLLM replica logs (default: a temp folder)")
    camera_key: str | None = Field(None, description="camera shown to the model (default: the first)")

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        return check_backend_name(value)

    @field_validator("base_url", mode="before")
    @classmethod
    def _split_urls(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            value = value.split(",")
        if isinstance(value, list | tuple):
            urls = [str(v).strip().rstrip("/") for v in value if str(v).strip()]
            for url in urls:
                if not url.startswith(("http://", "https://")):
                    raise ValueError(f"{url!r} is not an http(s) URL")
            return urls
        return value

    @field_validator("chat_template_kwargs", mode="before")
    @classmethod
    def _parse_json(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not valid JSON ({exc.msg})") from exc
        return value

    def resolved_api_key(self) -> str:
        """The key to send: the configured one, else env OPENAI_API_KEY, else a placeholder local servers accept."""
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        return os.environ.get("OPENAI_API_KEY") or "EMPTY"
