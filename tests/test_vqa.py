"""The vqa module: grounded answers stored in frame pixels, shape checks, camera handling.

A scripted VLM (a test double) answers from the synthetic dataset's ground truth, the way a
grounding model would: it recognises the frame it is shown and reads the true boxes off it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from steerable.annotate.context import EpisodeContext
from steerable.annotate.module import ModuleOutput
from steerable.annotate.modules.vqa import (
    QUESTION_TYPES,
    VqaConfig,
    VqaModule,
    answer_type,
    camera_frame_sizes,
    check_answer,
    detect_coordinate_format,
    resolve_cameras,
    validate_vqa_rows,
)
from steerable.dataset import LeRobotDataset, open_dataset
from steerable.errors import AnnotationError, ConfigError
from steerable.synthetic.generate import generate_synthetic
from steerable.synthetic.ground_truth import read_ground_truth
from steerable.testing.scripted import ScriptedVLM

TOP, WRIST = "observation.images.top", "observation.images.wrist"
EPISODES = 3


def digest(frame: np.ndarray) -> str:
    return hashlib.sha1(np.ascontiguousarray(frame).tobytes()).hexdigest()


class Truth:
    """The synthetic dataset with, for every frame a question can be about, its true boxes."""

    def __init__(self, root: Path) -> None:
        self.ds = open_dataset(root)
        self.sizes = camera_frame_sizes(self.ds.features)
        truths = read_ground_truth(root)
        self.boxes: dict[str, tuple[str, list[dict[str, Any]]]] = {}  # frame digest -> (camera, boxes)
        self.at: dict[tuple[int, str, float], list[dict[str, Any]]] = {}  # (episode, camera, t) -> boxes
        for i in range(EPISODES):
            ctx = context(self.ds, i, None)
            times = ctx.sample_times(1.0)
            index = {float(t): k for k, t in enumerate(ctx.timestamps)}
            for camera in self.ds.camera_keys:
                for t, frame in zip(times, self.ds.decode_frames(i, camera, times), strict=True):
                    self.boxes[digest(frame)] = (camera, truths[i].boxes[camera][index[t]])
                    self.at[(i, camera, t)] = truths[i].boxes[camera][index[t]]

    def lookup(self, messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]], int, int]:
        frame = next(b["image"] for b in messages[0]["content"] if b["type"] == "image")
        camera, boxes = self.boxes[digest(frame)]
        width, height = self.sizes[camera]
        return camera, boxes, width, height


@pytest.fixture(scope="module")
def truth(tmp_path_factory: pytest.TempPathFactory) -> Truth:
    # Legacy camera shapes: the cameras differ in size, so prompts and boxes must each use their own.
    root = generate_synthetic(
        tmp_path_factory.mktemp("syn") / "ds", episodes=EPISODES, cameras=("top", "wrist"), seed=11,
        camera_shapes="legacy",
    )
    return Truth(root)


def context(
    ds: LeRobotDataset, episode: int, vlm: Any, *, seed: int = 0, camera: str | None = TOP
) -> EpisodeContext:
    return EpisodeContext.for_episode(ds, episode, seed=seed, vlm=vlm, camera=camera)


def run(config: VqaConfig, ctx: EpisodeContext) -> ModuleOutput:
    return asyncio.run(VqaModule(config).run(ctx))


def grounded_responder(truth: Truth, scale: str = "relative_1000"):
    """Answers every question type from the true boxes, coordinates written in `scale`."""

    def convert(box: list[int], width: int, height: int) -> list[float]:
        if scale == "relative_1000":
            return [round(v * 1000 / (width if k % 2 == 0 else height)) for k, v in enumerate(box)]
        return list(box)

    def respond(messages: list[dict[str, Any]], schema: dict[str, Any], purpose: str) -> dict[str, Any]:
        _, boxes, width, height = truth.lookup(messages)
        qtype = purpose.split(".")[1]
        first = boxes[0]
        x0, y0, x1, y1 = convert(first["box"], width, height)
        answers = {
            "bbox": {
                "detections": [{"label": b["name"], "bbox": convert(b["box"], width, height)} for b in boxes]
            },
            "keypoint": {"label": first["name"], "point": [(x0 + x1) / 2, (y0 + y1) / 2]},
            "count": {"label": "cubes", "count": sum(b["name"].endswith("cube") for b in boxes)},
            "attribute": {"label": first["name"], "attribute": "color", "value": first["name"].split()[0]},
            "spatial": {"subject": first["name"], "relation": "left_of", "object": boxes[-1]["name"]},
        }
        return {"question": f"a {qtype} question?", "answer": answers[qtype]}

    return respond


def stored_boxes(out: ModuleOutput) -> list[tuple[str, dict[str, Any]]]:
    answers = [r for r in out.rows if r["role"] == "assistant"]
    return [(r["camera"], d) for r in answers for d in json.loads(r["content"])["detections"]]


@pytest.mark.parametrize("coordinate_format", ["auto", "relative_1000"])
def test_relative_1000_boxes_are_stored_as_the_true_pixel_boxes(truth: Truth, coordinate_format: str) -> None:
    config = VqaConfig(question_types=["bbox"], coordinate_format=coordinate_format)
    vlm = ScriptedVLM(grounded_responder(truth))
    checked = 0
    for i in range(EPISODES):
        out = run(config, context(truth.ds, i, vlm))
        assert out.meta["dropped"] == 0 and out.notes == []
        assert out.meta["coordinate_scales"] == {"relative_1000": out.meta["answered"]}
        for row in (r for r in out.rows if r["role"] == "assistant"):
            boxes = truth.at[(i, row["camera"], row["timestamp"])]
            stored = json.loads(row["content"])["detections"]
            assert [d["label"] for d in stored] == [b["name"] for b in boxes]
            for d, b in zip(stored, boxes, strict=True):
                assert d["bbox_format"] == "xyxy" and all(isinstance(v, int) for v in d["bbox"])
                assert np.abs(np.array(d["bbox"]) - np.array(b["box"])).max() <= 1
                checked += 1
    assert checked > 50


def test_pixel_answers_are_stored_exactly(truth: Truth) -> None:
    config = VqaConfig(question_types=["bbox"], coordinate_format="pixels")
    vlm = ScriptedVLM(grounded_responder(truth, "pixels"))
    out = run(config, context(truth.ds, 0, vlm))
    assert out.meta["answered"] == out.meta["asked"] > 0
    for row in (r for r in out.rows if r["role"] == "assistant"):
        true = [b["box"] for b in truth.at[(0, row["camera"], row["timestamp"])]]
        assert [d["bbox"] for d in json.loads(row["content"])["detections"]] == true
    # The prompt names the real frame size of the camera it shows.
    prompts = {c.messages[0]["content"][-1]["text"] for c in vlm.calls}
    assert any("pixels of the 224x160 image" in p for p in prompts)
    assert any("pixels of the 128x128 image" in p for p in prompts)


def test_every_question_type_is_asked_per_camera_per_tick_and_validates(truth: Truth) -> None:
    vlm = ScriptedVLM(grounded_responder(truth))
    ctx = context(truth.ds, 1, vlm)
    out = run(VqaConfig(), ctx)
    ticks = ctx.sample_times(1.0)
    stamps = {float(t) for t in ctx.timestamps}
    assert out.meta["asked"] == len(ticks) * 2 == out.meta["answered"]
    assert {r["camera"] for r in out.rows} == set(truth.ds.camera_keys) == {TOP, WRIST}
    assert {r["timestamp"] for r in out.rows} == set(ticks) and set(ticks) <= stamps
    assert all(r["style"] == "vqa" and r["tool_calls"] is None for r in out.rows)
    asked = {c.purpose.split(".")[1] for c in vlm.calls}
    stored = {answer_type(json.loads(r["content"])) for r in out.rows if r["role"] == "assistant"}
    assert asked == stored == set(QUESTION_TYPES)
    assert validate_vqa_rows(out.rows, truth.ds.camera_keys, truth.sizes) == []
    # Per-type prompts: a bbox question spells out the coordinate scale.
    bbox_call = next(c for c in vlm.calls if c.purpose == "vqa.bbox")
    assert "0-1000 scale" in bbox_call.messages[0]["content"][-1]["text"]


def test_question_draws_are_deterministic_and_capped(truth: Truth) -> None:
    vlm = ScriptedVLM(grounded_responder(truth))
    a = run(VqaConfig(), context(truth.ds, 0, vlm, seed=3))
    b = run(VqaConfig(), context(truth.ds, 0, vlm, seed=3))
    c = run(VqaConfig(), context(truth.ds, 0, vlm, seed=4))
    assert a.rows == b.rows and a.rows != c.rows
    capped = run(VqaConfig(max_questions_per_episode=3), context(truth.ds, 0, vlm, seed=3))
    assert capped.meta["asked"] == 3 and len(capped.rows) == 6


def test_an_answer_of_the_wrong_shape_drops_that_question_only(truth: Truth) -> None:
    good = grounded_responder(truth)

    def confused(messages: list[dict[str, Any]], schema: dict[str, Any], purpose: str) -> Any:
        if purpose == "vqa.bbox":  # answers a bbox question with a keypoint
            return {"question": "where?", "answer": {"label": "cube", "point": [10, 10]}}
        return good(messages, schema, purpose)

    out = run(VqaConfig(), context(truth.ds, 1, ScriptedVLM(confused, max_retries=1)))
    bbox_notes = [n for n in out.notes if "bbox question" in n and "was dropped" in n]
    assert bbox_notes and out.meta["dropped"] == len(bbox_notes)
    assert out.meta["answered"] == out.meta["asked"] - len(bbox_notes) > 0
    assert validate_vqa_rows(out.rows, truth.ds.camera_keys, truth.sizes) == []


class LooseVLM:
    """A fake client without schema validation, replying from a list (the module's own checks decide)."""

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.messages: list[list[dict[str, Any]]] = []

    async def generate_json(
        self, messages: Any, schema: Any, *, affinity: Any = None, purpose: str = ""
    ) -> Any:
        self.messages.append(messages)
        return self.replies[min(len(self.messages), len(self.replies)) - 1]


def one_question(truth: Truth, vlm: Any, **settings: Any) -> ModuleOutput:
    config = VqaConfig(question_types=["bbox"], cameras=["top"], max_questions_per_episode=1, **settings)
    return run(config, context(truth.ds, 0, vlm))


def test_a_wrong_shape_is_re_asked_with_the_reason(truth: Truth) -> None:
    wrong = {"question": "where is it?", "answer": {"label": "cube", "count": 2}}
    right = {
        "question": "where is it?",
        "answer": {"detections": [{"label": "cube", "bbox": [10, 20, 30, 40]}]},
    }
    vlm = LooseVLM(wrong, right)
    out = one_question(truth, vlm, coordinate_format="pixels")
    assert out.meta["answered"] == 1 and out.notes == []
    retry = vlm.messages[1][-1]["content"]
    assert "a bbox answer needs keys ['detections']" in retry and "that is a count answer" in retry
    assert json.loads(out.rows[1]["content"])["detections"][0]["bbox"] == [10, 20, 30, 40]


def test_out_of_frame_coordinates_are_clipped_or_rejected_by_rule(truth: Truth) -> None:
    reply = {
        "question": "where?",
        "answer": {
            "detections": [
                {"label": "red cube", "bbox": [-20, 10, 100, 400]},
                {"label": "ghost", "bbox": [300, 10, 320, 20]},  # wholly outside the 224x160 frame
            ]
        },
    }
    clipped = one_question(truth, LooseVLM(reply), coordinate_format="pixels", out_of_range="clip")
    assert [d["bbox"] for _, d in stored_boxes(clipped)] == [[0, 10, 100, 160]]
    # The episode's only question rejected: no usable answer at all, so the module has failed.
    with pytest.raises(AnnotationError, match=r"none of its 1 questions got a usable answer .*outside the 224x160"):
        one_question(truth, LooseVLM(reply), coordinate_format="pixels", out_of_range="reject", max_retries=0)
    # Above 1000 cannot be a 0-1000 value: rejected under an explicit relative scale.
    relative = {"question": "q", "answer": {"detections": [{"label": "a", "bbox": [0, 0, 1200, 500]}]}}
    with pytest.raises(AnnotationError, match="relative_1000"):
        one_question(truth, LooseVLM(relative), coordinate_format="relative_1000", out_of_range="reject")


def test_auto_detection_rule() -> None:
    w, h = 224, 160
    assert detect_coordinate_format([10, 1500], [5, 9], w, h, "relative_1000") == "pixels"
    assert detect_coordinate_format([10, 800], [5, 9], w, h, "pixels") == "relative_1000"
    assert detect_coordinate_format([0.1, 0.5], [0.2, 0.9], w, h, "pixels") == "normalized_0_1"
    assert detect_coordinate_format([10, 100], [5, 90], w, h, "relative_1000") == "relative_1000"
    assert detect_coordinate_format([10, 100], [5, 90], w, h, "pixels") == "pixels"
    assert detect_coordinate_format([0, 1], [0, 1], w, h, "pixels") == "pixels"  # integers: not fractions
    point = {"label": "bin", "point": [0.5, 0.25]}
    assert check_answer("keypoint", point, width=w, height=h, coordinate_format="auto").answer == {
        "label": "bin",
        "point_format": "xy",
        "point": [112, 40],
    }


def test_answer_shapes_are_checked_against_the_type_asked() -> None:
    size = {"width": 100, "height": 100}
    assert check_answer("count", {"label": "cubes", "count": 3.0}, **size).answer == {
        "label": "cubes",
        "count": 3,
    }
    assert "whole number" in (check_answer("count", {"label": "cubes", "count": -1}, **size).problem or "")
    assert "that is a spatial answer" in (
        check_answer("attribute", {"subject": "a", "relation": "on", "object": "b"}, **size).problem or ""
    )
    spatial = {"subject": "a", "relation": "Left of", "object": "b"}
    assert check_answer("spatial", spatial, **size).answer == {**spatial, "relation": "left_of"}
    assert "not one of" in (
        check_answer("spatial", {"subject": "a", "relation": "inside of", "object": "b"}, **size).problem
        or ""
    )
    assert "non-empty" in (
        check_answer("attribute", {"label": " ", "attribute": "color", "value": "red"}, **size).problem or ""
    )
    swapped = check_answer("bbox", {"detections": [{"label": "a", "bbox": [50, 60, 10, 20]}]}, **size)
    assert swapped.answer == {"detections": [{"label": "a", "bbox_format": "xyxy", "bbox": [10, 20, 50, 60]}]}
    assert "finite number" in (
        check_answer("keypoint", {"label": "a", "point": [1, True]}, **size).problem or ""
    )
    assert check_answer("bbox", {"detections": []}, **size).problem
    assert answer_type({"detections": [], "extra": 1}) is None


def test_validator_finds_broken_vqa_rows() -> None:
    def row(role: str, content: Any, t: float = 1.0, camera: str = TOP) -> dict[str, Any]:
        return {
            "role": role,
            "content": content,
            "style": "vqa",
            "timestamp": t,
            "camera": camera,
            "tool_calls": None,
        }

    sizes = {TOP: (224, 160)}
    box = json.dumps({"detections": [{"label": "a", "bbox_format": "xyxy", "bbox": [0, 0, 224, 160]}]})
    assert validate_vqa_rows([row("user", "q"), row("assistant", box)], [TOP], sizes) == []
    problems = validate_vqa_rows(
        [
            row("user", "q"),
            row("user", "q again"),
            row("assistant", box),  # duplicate question
            row("user", "q", t=2.0),  # no answer
            row("user", "q", t=3.0),
            row("assistant", "{not json", t=3.0),
            row("user", "q", t=4.0),
            row("assistant", json.dumps({"foo": 1}), t=4.0),
            row("user", "q", t=5.0),
            row("assistant", json.dumps({"label": "a", "point_format": "xy", "point": [300, 10]}), t=5.0),
            row("user", "q", t=6.0, camera="observation.images.side"),
            row("assistant", box, t=6.0, camera="observation.images.side"),
        ],
        [TOP],
        sizes,
    )
    text = "\n".join(problems)
    assert "2 user rows" in text and "0 assistant rows" in text and "not valid JSON" in text
    assert (
        "no known VQA shape" in text
        and "outside the 224x160 frame" in text
        and "not one of the dataset's video keys" in text
    )


def test_cameras_are_dataset_feature_keys(truth: Truth) -> None:
    keys = truth.ds.camera_keys
    assert resolve_cameras(VqaConfig(cameras=["top"]), keys, None) == ([TOP], [])
    assert resolve_cameras(VqaConfig(cameras=[WRIST]), keys, None) == ([WRIST], [])
    assert resolve_cameras(VqaConfig(restrict_to_default_camera=True), keys, WRIST) == ([WRIST], [])
    chosen, notes = resolve_cameras(VqaConfig(restrict_to_default_camera=True), keys, "nope")
    assert chosen == [keys[0]] and notes
    assert resolve_cameras(VqaConfig(), [], None) == ([], [])
    with pytest.raises(ConfigError, match="observation.images.top"):
        resolve_cameras(VqaConfig(cameras=["side"]), keys, None)
    out = run(
        VqaConfig(cameras=["wrist"], max_questions_per_episode=2),
        context(truth.ds, 0, ScriptedVLM(grounded_responder(truth))),
    )
    assert {r["camera"] for r in out.rows} == {WRIST}


def test_real_h264_fixture(lingzu: Path) -> None:
    ds = open_dataset(lingzu)

    def respond(messages: list[dict[str, Any]], schema: dict[str, Any], purpose: str) -> dict[str, Any]:
        frame = messages[0]["content"][0]["image"]
        assert frame.shape == (480, 640, 3)
        return {
            "question": "where is the hand?",
            "answer": {"detections": [{"label": "hand", "bbox": [250, 500, 750, 1000]}]},
        }

    out = run(
        VqaConfig(question_types=["bbox"], max_questions_per_episode=2),
        context(ds, 0, ScriptedVLM(respond), camera=None),
    )
    assert {r["camera"] for r in out.rows} == {"image"}
    assert [d["bbox"] for _, d in stored_boxes(out)] == [[160, 240, 480, 480]] * 2


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="vqa.question_types"):
        VqaConfig(question_types=["caption"])
    with pytest.raises(ConfigError, match="not both"):
        VqaConfig(cameras=["top"], restrict_to_default_camera=True)
    with pytest.raises(ConfigError, match="vqa.coordinate_format"):
        VqaConfig(coordinate_format="percent")
    with pytest.raises(ConfigError, match="vqa_emission_hz"):
        VqaConfig(vqa_emission_hz=0)
    a, b = (
        VqaModule(VqaConfig()).fingerprint(),
        VqaModule(VqaConfig(coordinate_format="pixels")).fingerprint(),
    )
    assert a != b and any(p.startswith("vqa_coordinates_pixels@") for p in b["prompts"])


def test_messages_about_a_question_type_use_the_right_article() -> None:
    """'an attribute answer', not 'a attribute answer' (the re-ask shows it to the model)."""
    size = {"width": 100, "height": 100}
    wrong = check_answer("attribute", {"label": "cubes", "count": 3}, **size).problem or ""
    assert "an attribute answer needs keys" in wrong and "that is a count answer" in wrong
    other = check_answer("count", {"label": "cube", "attribute": "colour", "value": "red"}, **size).problem or ""
    assert "a count answer needs keys" in other and "that is an attribute answer" in other
