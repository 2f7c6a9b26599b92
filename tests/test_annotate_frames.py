"""The per-episode frame source shares decode passes; VLM images are JPEG-encoded with or without simplejpeg."""

from __future__ import annotations

import asyncio
import base64
import io

import numpy as np
import pytest
from PIL import Image

from annotate_helpers import make_synthetic
from steerable.annotate.context import FrameCache
from steerable.dataset import LeRobotDataset
from steerable.errors import VideoError
from steerable.vlm import images


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> LeRobotDataset:
    return LeRobotDataset(make_synthetic(tmp_path_factory.mktemp("frames") / "ds", episodes=1))


def _times(ds: LeRobotDataset) -> list[float]:
    return [float(t) for t in ds.episode_timestamps(0)]


def test_concurrent_requests_share_one_pass_with_the_same_frames(dataset: LeRobotDataset) -> None:
    camera = dataset.camera_keys[0]
    stored = _times(dataset)
    every_other, every_third = stored[::2], stored[::3]
    direct = dataset.decode_frames(0, camera, sorted(set(every_other) | set(every_third)))
    by_time = dict(zip(sorted(set(every_other) | set(every_third)), direct, strict=True))

    async def main() -> tuple[list[np.ndarray], list[np.ndarray], int]:
        cache = FrameCache(dataset, dataset.episode(0), gate=asyncio.Semaphore(2))
        a, b = await asyncio.gather(cache.get(camera, every_other), cache.get(camera, every_third[::-1]))
        return a, b, cache.passes

    a, b, passes = asyncio.run(main())
    assert passes == 1  # the union, decoded once
    assert all(np.array_equal(f, by_time[t]) for f, t in zip(a, every_other, strict=True))
    assert all(np.array_equal(f, by_time[t]) for f, t in zip(b, every_third[::-1], strict=True))


def test_later_requests_decode_again_unless_retained(dataset: LeRobotDataset) -> None:
    camera = dataset.camera_keys[0]
    times = _times(dataset)[:3]

    async def passes(retain: bool) -> int:
        cache = FrameCache(dataset, dataset.episode(0), retain=retain)
        await cache.get(camera, times)
        await cache.get(camera, times[:2])
        cache.release()
        return cache.passes

    assert asyncio.run(passes(False)) == 2  # nothing held once delivered
    assert asyncio.run(passes(True)) == 1


def test_a_failed_pass_fails_every_requester_and_the_next_request_decodes_again(dataset: LeRobotDataset) -> None:
    camera = dataset.camera_keys[0]
    good = _times(dataset)[:2]

    async def main() -> list[np.ndarray]:
        cache = FrameCache(dataset, dataset.episode(0))
        results = await asyncio.gather(
            cache.get(camera, [*good, 1e6]), cache.get(camera, good), return_exceptions=True
        )
        assert all(isinstance(r, VideoError) for r in results)
        return await cache.get(camera, good)

    assert len(asyncio.run(main())) == 2


def _decoded(url: str) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))


@pytest.mark.parametrize("turbo", [True, False])
def test_data_urls_are_420_jpegs_of_the_fitted_size(turbo: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    assert images._simplejpeg() is not None  # a core dependency: the fast path is the one that runs
    if not turbo:
        monkeypatch.setattr(images, "_simplejpeg", lambda: None)
    y, x = np.mgrid[0:480, 0:640]
    frame = np.stack([x * 255 // 639, y * 255 // 479, (x + y) * 255 // 1118], axis=-1).astype(np.uint8)
    small = _decoded(images.image_data_url(frame, max_side=768, quality=85))
    assert small.format == "JPEG" and small.size == (640, 480)
    assert small.layer[1][1:3] == (1, 1) and small.layer[0][1:3] == (2, 2)  # 4:2:0 chroma, as PIL writes
    shrunk = _decoded(images.image_data_url(Image.fromarray(frame), max_side=320, quality=85))
    assert shrunk.size == (320, 240)
    error = np.abs(np.asarray(small, dtype=np.int16) - frame.astype(np.int16)).mean()
    assert error < 3  # quality 85 of smooth content: close to the source


def test_both_encoders_give_about_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    frame = np.asarray(Image.radial_gradient("L").convert("RGB").resize((640, 480)))
    fast = len(images.image_jpeg(frame, quality=85))
    monkeypatch.setattr(images, "_simplejpeg", lambda: None)
    slow = len(images.image_jpeg(frame, quality=85))
    assert abs(fast - slow) / slow < 0.05


def test_grey_and_channels_first_arrays_still_encode() -> None:
    grey = np.zeros((48, 64), np.uint8)
    chw = np.zeros((3, 48, 64), np.uint8)
    for array in (grey, chw):
        assert _decoded(images.image_data_url(array)).size == (64, 48)


def test_a_frozen_image_is_encoded_once_and_forgotten_when_collected(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    encoded: list[int] = []
    real = images._encode_jpeg
    monkeypatch.setattr(images, "_encode_jpeg", lambda im, side, q: encoded.append(id(im)) or real(im, side, q))
    sheet = images.freeze_image(Image.new("RGB", (1128, 508), (10, 20, 30)))
    first = images.image_data_url(sheet, max_side=768)
    assert images.image_data_url(sheet, max_side=768) == first and len(encoded) == 1
    images.image_data_url(sheet, max_side=512)  # other settings: their own encoding
    assert len(encoded) == 2
    loose = Image.new("RGB", (64, 48))  # not frozen: may be edited, so encoded every time
    images.image_data_url(loose)
    loose.paste((255, 0, 0), (0, 0, 64, 48))
    assert _decoded(images.image_data_url(loose)).getpixel((32, 24))[0] > 200 and len(encoded) == 4
    key = id(sheet)
    del sheet
    gc.collect()
    assert not any(k[0] == key for k in images._FROZEN)
