"""The VLM client layer against a real local OpenAI-compatible HTTP server (steerable.testing.server)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema
import numpy as np
import pytest
from PIL import Image

from steerable.errors import ConfigError, VLMError, VLMReplyError, VLMUnavailableError
from steerable.testing import ScriptedVLM
from steerable.testing.server import FaultPlan, TestServer
from steerable.vlm import NO_MODEL_MESSAGE, VLMConfig, extract_json, make_vlm, resolve_backend
from steerable.vlm.jsonrepair import ReplyParseError
from steerable.vlm.openai_http import OpenAIHTTPVLM

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "minLength": 1},
        "start": {"type": "number", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    },
    "required": ["label", "start", "tags"],
    "additionalProperties": False,
}
GOOD = {"label": "pick up the cup", "start": 1.5, "tags": ["grasp"]}


def _ask(text: str = "Describe the episode.") -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": text}]}]


@pytest.fixture
def start_server() -> Iterator[Callable[..., TestServer]]:
    servers: list[TestServer] = []

    def start(**kwargs: Any) -> TestServer:
        server = TestServer(**kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def _client(*urls: str, **overrides: Any) -> OpenAIHTTPVLM:
    settings: dict[str, Any] = {
        "model_id": "test-model",
        "backoff_base_s": 0.0,
        "request_timeout_s": 5.0,
        **overrides,
    }
    return OpenAIHTTPVLM(VLMConfig(base_url=list(urls), **settings))


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _one(vlm: OpenAIHTTPVLM, messages: list[dict[str, Any]] | None = None, **kw: Any) -> Any:
    try:
        return await vlm.generate_json(messages or _ask(), SCHEMA, **kw)
    finally:
        await vlm.aclose()


# --- structured output and its fallback -------------------------------------------------------


def test_structured_output_returns_the_servers_schema_valid_reply(
    start_server: Callable[..., TestServer],
) -> None:
    server = start_server(responder=lambda messages, schema: GOOD)
    result = _run(_one(_client(server.url), purpose="segment subtasks"))
    assert result == GOOD
    assert server.stats.response_format_requests == 1


def test_server_without_response_format_gets_the_schema_in_the_prompt(
    start_server: Callable[..., TestServer],
) -> None:
    server = start_server(structured_output=False)  # replies wrap JSON in <think> + prose + fences

    async def two_calls() -> list[Any]:
        vlm = _client(server.url)
        try:
            return [await vlm.generate_json(_ask(), SCHEMA) for _ in range(2)]
        finally:
            await vlm.aclose()

    results = _run(two_calls())
    for result in results:
        jsonschema.validate(result, SCHEMA)
    # One refused request, then prompt-only for both calls: the fallback is remembered.
    assert server.stats.chat_requests == 3


def test_forcing_json_schema_on_a_server_without_it_fails_clearly(
    start_server: Callable[..., TestServer],
) -> None:
    server = start_server(structured_output=False)
    with pytest.raises(VLMReplyError, match="rejected the request.*response_format"):
        _run(_one(_client(server.url, structured_output="json_schema")))


def test_prompt_mode_never_sends_response_format(start_server: Callable[..., TestServer]) -> None:
    server = start_server()
    jsonschema.validate(_run(_one(_client(server.url, structured_output="prompt"))), SCHEMA)
    assert server.stats.response_format_requests == 0


# --- faults and retries -----------------------------------------------------------------------

FAULT_REASONS = {
    "timeout": "timeout",
    "http_500": "server_error",
    "truncated": "truncated",
    "invalid_json": "invalid_json",
    "schema_violation": "schema",
}


@pytest.mark.parametrize("fault", sorted(FAULT_REASONS))
def test_each_fault_kind_is_recovered_by_a_retry(fault: str, start_server: Callable[..., TestServer]) -> None:
    server = start_server(faults=FaultPlan(script=[fault], timeout_s=3.0))
    vlm = _client(server.url, request_timeout_s=0.5)
    result = _run(_one(vlm))
    jsonschema.validate(result, SCHEMA)
    assert vlm.stats.retries == 1
    assert vlm.stats.reasons == {FAULT_REASONS[fault]: 1}
    assert vlm.stats.succeeded == 1 and vlm.stats.failures == 0


def test_a_bad_reply_is_fed_back_with_the_validation_error(start_server: Callable[..., TestServer]) -> None:
    seen: list[list[dict[str, Any]]] = []

    def responder(messages: list[dict[str, Any]], schema: Any) -> Any:
        seen.append(messages)
        return {"label": "x", "start": -1, "tags": ["a"]} if len(seen) == 1 else GOOD

    server = start_server(responder=responder)
    assert _run(_one(_client(server.url))) == GOOD
    retry = seen[1]
    assert retry[-2] == {
        "role": "assistant",
        "content": json.dumps({"label": "x", "start": -1, "tags": ["a"]}),
    }
    assert "$.start" in retry[-1]["content"] and "minimum" in retry[-1]["content"]


def test_exhausted_retries_raise_with_the_reason(start_server: Callable[..., TestServer]) -> None:
    server = start_server(faults=FaultPlan(rate=1.0, kinds=["invalid_json"]))
    vlm = _client(server.url, max_retries=2)
    with pytest.raises(
        VLMReplyError, match="'plan' failed after 3 attempts: the reply is not valid JSON"
    ) as info:
        _run(_one(vlm, purpose="plan"))
    assert "not valid JSON" in info.value.reason and info.value.purpose == "plan"
    assert server.stats.chat_requests == 3
    assert (vlm.stats.calls, vlm.stats.failures, vlm.stats.retries) == (1, 1, 2)


def test_a_cut_off_reply_names_the_token_limit(start_server: Callable[..., TestServer]) -> None:
    server = start_server(faults=FaultPlan(rate=1.0, kinds=["truncated"]))
    with pytest.raises(VLMReplyError, match="max_new_tokens"):
        _run(_one(_client(server.url, max_retries=0)))


def test_an_invalid_schema_fails_before_any_request(start_server: Callable[..., TestServer]) -> None:
    server = start_server()

    async def call() -> None:
        vlm = _client(server.url)
        try:
            await vlm.generate_json(_ask(), {"type": "no-such-type"})
        finally:
            await vlm.aclose()

    with pytest.raises(VLMError, match="schema .* is invalid"):
        _run(call())
    assert server.stats.chat_requests == 0


# --- concurrency, affinity, failover ----------------------------------------------------------


def test_global_in_flight_limit_is_respected(start_server: Callable[..., TestServer]) -> None:
    server = start_server(latency_s=0.1, capacity=64)
    vlm = _client(server.url, client_concurrency=4)

    async def many() -> None:
        try:
            await asyncio.gather(*(vlm.generate_json(_ask(f"call {i}"), SCHEMA) for i in range(24)))
        finally:
            await vlm.aclose()

    _run(many())
    assert server.stats.completed == 24
    assert server.stats.max_in_flight == 4
    assert vlm.stats.max_in_flight == 4


def _recording_server(start_server: Callable[..., TestServer], seen: set[str]) -> TestServer:
    def responder(messages: list[dict[str, Any]], schema: Any) -> Any:
        seen.add(messages[0]["content"][0]["text"])
        return GOOD

    return start_server(responder=responder)


def test_calls_of_one_episode_go_to_one_endpoint(start_server: Callable[..., TestServer]) -> None:
    seen_a: set[str] = set()
    seen_b: set[str] = set()
    a, b = _recording_server(start_server, seen_a), _recording_server(start_server, seen_b)
    vlm = _client(a.url, b.url)

    async def episodes() -> None:
        try:
            calls = [
                vlm.generate_json(_ask(f"episode {ep}"), SCHEMA, affinity=f"episode-{ep}")
                for _ in range(3)
                for ep in range(24)
            ]
            await asyncio.gather(*calls)
        finally:
            await vlm.aclose()

    _run(episodes())
    assert not seen_a & seen_b  # no episode was split across servers
    assert len(seen_a | seen_b) == 24
    assert seen_a and seen_b  # and the episodes were spread over both
    assert a.stats.completed + b.stats.completed == 72


def test_failover_when_an_endpoint_dies(start_server: Callable[..., TestServer]) -> None:
    seen_a: set[str] = set()
    seen_b: set[str] = set()
    a, b = _recording_server(start_server, seen_a), _recording_server(start_server, seen_b)
    vlm = _client(a.url, b.url, max_retries=0)

    async def scenario() -> None:
        try:
            await vlm.generate_json(_ask("first"), SCHEMA, affinity="episode-7")
            home, other = (a, b) if seen_a else (b, a)
            home.stop()
            for i in range(5):
                assert await vlm.generate_json(_ask(f"after {i}"), SCHEMA, affinity="episode-7") == GOOD
            assert other.stats.completed == 5
        finally:
            await vlm.aclose()

    _run(scenario())
    assert vlm.stats.failures == 0


# --- bad input: unreachable server, wrong model -----------------------------------------------


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_unreachable_server_gives_a_clear_error() -> None:
    url = _dead_url()

    async def check() -> None:
        vlm = _client(url)
        try:
            await vlm.check()
        finally:
            await vlm.aclose()

    with pytest.raises(VLMUnavailableError, match=f"cannot reach the VLM server at {url}.*--vlm.base_url"):
        _run(check())
    with pytest.raises(VLMUnavailableError, match="cannot reach the VLM server"):
        _run(_one(_client(url, max_retries=1)))


def test_wrong_model_id_names_the_served_models(start_server: Callable[..., TestServer]) -> None:
    server = start_server(model_ids=["Qwen/Qwen2.5-VL-7B-Instruct"])

    async def check() -> None:
        vlm = _client(server.url, model_id="Qwen/Qwen3-VL-8B")
        try:
            await vlm.check()
        finally:
            await vlm.aclose()

    expected = "model 'Qwen/Qwen3-VL-8B' is not served at .*it serves: \\['Qwen/Qwen2.5-VL-7B-Instruct'\\]"
    with pytest.raises(VLMError, match=expected):
        _run(check())
    # Without check(), the first call's 404 says the same, and is not retried.
    with pytest.raises(VLMError, match="'Qwen/Qwen3-VL-8B' is not served"):
        _run(_one(_client(server.url, model_id="Qwen/Qwen3-VL-8B")))
    assert server.stats.chat_requests == 1


def test_unset_model_id_uses_the_only_served_model(start_server: Callable[..., TestServer]) -> None:
    server = start_server(model_ids=["local-vlm"])
    vlm = _client(server.url, model_id=None)
    jsonschema.validate(_run(_one(vlm)), SCHEMA)
    assert vlm.model_id == "local-vlm" and server.stats.models_asked == ["local-vlm"]


# --- images and request accounting ------------------------------------------------------------


def _image_blocks(messages: list[dict[str, Any]]) -> list[str]:
    return [
        b["image_url"]["url"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "image_url"
    ]


def test_images_are_sent_as_downscaled_jpeg_data_urls(start_server: Callable[..., TestServer]) -> None:
    captured: list[list[dict[str, Any]]] = []
    server = start_server(responder=lambda messages, schema: captured.append(messages) or GOOD)
    frame = np.zeros((500, 1000, 3), dtype=np.uint8)
    frame[:, :, 0] = 200  # red
    pil = Image.new("RGB", (64, 48), (0, 0, 255))
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "image", "image": frame},
                {"type": "video", "video": [pil, pil]},
                {"type": "text", "text": "What happens?"},
            ],
        }
    ]
    _run(_one(_client(server.url, image_max_side=256, jpeg_quality=80), messages))
    urls = _image_blocks(captured[0])
    assert len(urls) == 3 and all(u.startswith("data:image/jpeg;base64,") for u in urls)
    decoded = [Image.open(io.BytesIO(base64.b64decode(u.split(",", 1)[1]))) for u in urls]
    assert [d.format for d in decoded] == ["JPEG"] * 3
    assert decoded[0].size == (256, 128)  # longest side capped, aspect kept
    assert decoded[1].size == (64, 48)  # small images are not upscaled
    red = np.asarray(decoded[0].convert("RGB"))[64, 128]
    assert red[0] > 180 and red[1] < 30 and red[2] < 30


def test_request_bytes_are_counted(start_server: Callable[..., TestServer]) -> None:
    server = start_server(faults=FaultPlan(script=["http_500"]))
    image = Image.new("RGB", (320, 240), (10, 200, 10))
    vlm = _client(server.url)
    messages = [
        {"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": "hi"}]}
    ]
    _run(_one(vlm, messages))
    assert vlm.stats.request_bytes == server.stats.bytes_received > 1000
    assert vlm.stats.prompt_tokens > 0 and vlm.stats.completion_tokens > 0


# --- configuration and factory ----------------------------------------------------------------


def test_config_is_validated_with_the_flag_name() -> None:
    with pytest.raises(ConfigError, match="--vlm.client_concurrency"):
        VLMConfig(client_concurrency=0)
    with pytest.raises(ConfigError, match="--vlm.base_url.*not an http"):
        VLMConfig(base_url="localhost:8000")
    with pytest.raises(ConfigError, match="--vlm.structured_output"):
        VLMConfig(structured_output="grammar")
    config = VLMConfig(
        base_url="http://a:8000/v1/, http://b:8000/v1", chat_template_kwargs='{"enable_thinking": false}'
    )
    assert config.base_url == ["http://a:8000/v1", "http://b:8000/v1"]
    assert config.chat_template_kwargs == {"enable_thinking": False}


def test_api_key_never_shows_and_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    config = VLMConfig(api_key="sk-very-secret")
    assert "sk-very-secret" not in repr(config) and "sk-very-secret" not in str(config.model_dump())
    assert config.resolved_api_key() == "sk-very-secret"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert VLMConfig().resolved_api_key() == "sk-from-env"


def test_auto_backend_prefers_an_explicit_url_then_reports_no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_backend(VLMConfig(base_url="http://127.0.0.1:9/v1")) == "openai"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU here
    config = VLMConfig(model_id="Qwen/Qwen2.5-VL-7B-Instruct")
    assert resolve_backend(config) is None
    with pytest.raises(VLMError) as info:
        make_vlm(config)
    assert str(info.value) == NO_MODEL_MESSAGE and "proprioception" in NO_MODEL_MESSAGE
    with pytest.raises(ConfigError, match="--vlm.model_id"):
        make_vlm(VLMConfig(backend="transformers"))


# --- JSON extraction and the scripted double --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('<think>hmm {"no": 1}</think>\n{"a": 1}', {"a": 1}),
        ('Sure!\n```json\n{"a": [1, 2]}\n```\nDone.', {"a": [1, 2]}),
        ('The answer is {"a": "x}y"} as requested.', {"a": "x}y"}),
        ('{"a": [1, 2,], "b": True, "c": None,}', {"a": [1, 2], "b": True, "c": None}),
        ('[{"a": 1}]', [{"a": 1}]),
    ],
)
def test_extract_json_finds_and_repairs_the_value(text: str, expected: Any) -> None:
    assert extract_json(text) == expected


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("", "empty"),
        ('{"a": "unfinished', "truncated"),
        ("<think>still thinking", "truncated"),
        ("no", "invalid_json"),
    ],
)
def test_extract_json_reports_why_it_failed(text: str, kind: str) -> None:
    with pytest.raises(ReplyParseError) as info:
        extract_json(text)
    assert info.value.kind == kind


def test_scripted_double_validates_and_retries_its_replies() -> None:
    replies = iter(['Here you go: {"label": ""}', GOOD])
    vlm = ScriptedVLM(lambda messages, schema, purpose: next(replies))
    assert _run(vlm.generate_json(_ask(), SCHEMA, purpose="plan", affinity="episode-1")) == GOOD
    assert len(vlm.calls) == 2 and vlm.calls[1].purpose == "plan" and vlm.calls[1].affinity == "episode-1"
    assert "'start' is a required property" in vlm.calls[1].messages[-1]["content"]
    always_bad = ScriptedVLM(lambda messages, schema, purpose: {"label": "x"}, max_retries=1)
    with pytest.raises(VLMReplyError, match="does not match the schema"):
        _run(always_bad.generate_json(_ask(), SCHEMA))


# --- in-process transformers backend with a tiny random VLM -----------------------------------


def _tiny_llava() -> tuple[Any, Any]:
    """A randomly initialised Llava (CLIP vision + Llama text) and its processor, built offline."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    specials = ["<pad>", "<s>", "</s>", "<image>", "<|user|>", "<|assistant|>"]
    vocab = {token: i for i, token in enumerate(specials)}
    for char in [chr(c) for c in range(32, 127)] + ["\n"]:
        vocab.setdefault(char, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")  # one token per char
    backend.decoder = decoders.Fuse()
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        extra_special_tokens={"image_token": "<image>"},
    )
    template = (
        "{% for m in messages %}{{ '<|' + m.role + '|>' }}{% if m.content is string %}{{ m.content }}"
        "{% else %}{% for c in m.content %}{% if c.type == 'image' %}<image>{% elif c.type == 'text' %}"
        "{{ c.text }}{% endif %}{% endfor %}{% endif %}</s>{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    processor = transformers.LlavaProcessor(
        image_processor=CLIPImageProcessorPil(
            size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28}
        ),
        tokenizer=tokenizer,
        chat_template=template,
        patch_size=14,
        vision_feature_select_strategy="full",
        num_additional_image_tokens=1,
    )
    config = transformers.LlavaConfig(
        vision_config=transformers.CLIPVisionConfig(
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=28,
            patch_size=14,
            projection_dim=16,
        ),
        text_config=transformers.LlamaConfig(
            vocab_size=len(vocab),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=4096,
        ),
        image_token_id=vocab["<image>"],
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
    )
    torch.manual_seed(0)
    return transformers.LlavaForConditionalGeneration(config).eval(), processor


class _GenerateSpy:
    """Wraps model.generate to record what reached the model."""

    def __init__(self, model: Any) -> None:
        self.inputs: list[dict[str, Any]] = []
        self.threads: list[threading.Thread] = []
        self._generate = model.generate
        model.generate = self

    def __call__(self, **kwargs: Any) -> Any:
        self.inputs.append(kwargs)
        self.threads.append(threading.current_thread())
        return self._generate(**kwargs)


_IMAGE_PROMPT = [
    {
        "role": "user",
        "content": [
            {"type": "image", "image": np.full((60, 80, 3), 128, np.uint8)},
            {"type": "text", "text": "Go"},
        ],
    }
]


def test_transformers_backend_retries_a_random_models_garbage_then_fails_honestly() -> None:
    from steerable.vlm.transformers_local import TransformersVLM

    model, processor = _tiny_llava()
    spy = _GenerateSpy(model)
    vlm = TransformersVLM(
        VLMConfig(backend="transformers", max_new_tokens=12, temperature=0, max_retries=1),
        model=model,
        processor=processor,
    )
    with pytest.raises(VLMReplyError, match="failed after 2 attempts"):
        _run(vlm.generate_json(_IMAGE_PROMPT, SCHEMA))
    assert len(spy.inputs) == 2
    first = spy.inputs[0]
    assert first["pixel_values"].shape == (1, 3, 28, 28)  # the image went through the chat template
    prompt = processor.tokenizer.decode(first["input_ids"][0])
    assert prompt.startswith("<|user|>" + "<image>" * 5 + "Go") and '"required"' in prompt
    retry = processor.tokenizer.decode(spy.inputs[1]["input_ids"][0])
    assert "That reply could not be used" in retry  # the bad reply was fed back
    assert vlm.stats.failures == 1 and vlm.stats.completion_tokens > 0


def test_transformers_backend_generates_on_one_worker_thread_bounded_in_tokens_and_time() -> None:
    from steerable.vlm.transformers_local import TransformersVLM

    model, processor = _tiny_llava()
    spy = _GenerateSpy(model)
    config = VLMConfig(backend="transformers", max_new_tokens=4, temperature=0, max_retries=0, request_timeout_s=30)
    vlm = TransformersVLM(config, model=model, processor=processor)
    for _ in range(2):  # two event loops, as two `asyncio.run` calls in a row
        with pytest.raises(VLMReplyError):
            _run(vlm.generate_json(_IMAGE_PROMPT, SCHEMA))
    worker = spy.threads[0]
    assert set(spy.threads) == {worker} and worker.name.startswith("steerable-transformers")
    assert all(k["max_new_tokens"] == 4 and k["max_time"] == 30 for k in spy.inputs)
    _run(vlm.aclose())
    worker.join(timeout=10)
    assert not worker.is_alive(), "the worker thread outlived aclose()"


@pytest.mark.timeout(60)
def test_a_cancelled_transformers_call_does_not_hold_up_the_event_loop_shutdown() -> None:
    """A generation stuck in its thread: the caller's timeout ends the call and asyncio.run returns.

    With `asyncio.to_thread` the stuck thread belonged to the loop's default executor, which
    asyncio.run joins on shutdown: the run hung as long as the generation did.
    """
    from steerable.vlm.transformers_local import TransformersVLM

    model, processor = _tiny_llava()
    release = threading.Event()
    model.generate = lambda **kwargs: release.wait()  # stuck until released
    vlm = TransformersVLM(VLMConfig(backend="transformers", max_retries=0), model=model, processor=processor)

    async def call() -> None:
        await asyncio.wait_for(vlm.generate_json(_IMAGE_PROMPT, SCHEMA), timeout=0.5)

    try:
        with pytest.raises(TimeoutError):
            _run(call())
    finally:
        release.set()
        _run(vlm.aclose())


def test_transformers_backend_returns_json_from_a_constrained_decoder() -> None:
    import torch

    from steerable.vlm.transformers_local import TransformersVLM

    model, processor = _tiny_llava()

    class ForceText:
        """A stand-in for a grammar-constrained logits processor: it forces one JSON text."""

        def __init__(self, text: str, tokenizer: Any) -> None:
            self.ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            self.start: int | None = None

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            self.start = input_ids.shape[1] if self.start is None else self.start
            step = min(input_ids.shape[1] - self.start, len(self.ids) - 1)
            forced = torch.full_like(scores, float("-inf"))
            forced[:, self.ids[step]] = 0.0
            return forced

    text = json.dumps(GOOD)
    vlm = TransformersVLM(
        VLMConfig(backend="transformers", max_new_tokens=len(text) + 4, temperature=0),
        model=model,
        processor=processor,
        logits_processor_factory=lambda schema, tokenizer: ForceText(text, tokenizer),
    )
    assert _run(vlm.generate_json(_IMAGE_PROMPT, SCHEMA)) == GOOD
    assert vlm.stats.retries == 0 and vlm.stats.prompt_tokens > 5
