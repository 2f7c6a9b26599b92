"""Images for VLM prompts: downscaled JPEG data URLs, and the message conversion that uses them.

JPEG at a bounded size instead of full-resolution PNG cuts request bytes (and server-side decode
time) several-fold; the image tokens a model spends depend on pixels, not on the container.
Encoding uses simplejpeg (libjpeg-turbo, straight from the array, without the GIL, so encoder
threads run on every core) and falls back to PIL's encoder when it is not installed.
"""

from __future__ import annotations

import base64
import functools
import io
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image

from steerable.errors import VLMError
from steerable.vlm.protocol import Message

__all__ = ["as_pil", "encode_messages", "fit_image", "freeze_image", "image_data_url", "image_jpeg", "map_image_blocks"]


def as_pil(image: Any) -> Image.Image:
    """A PIL RGB image from a PIL image or an HxW / HxWx3 / HxWx4 uint8 array."""
    if isinstance(image, Image.Image):
        return image if image.mode == "RGB" else image.convert("RGB")
    if isinstance(image, np.ndarray):
        array = image
        if array.dtype != np.uint8:
            raise VLMError(f"image arrays must be uint8, got {array.dtype}; convert frames before prompting")
        if array.ndim == 3 and array.shape[0] in (1, 3, 4) and array.shape[2] not in (1, 3, 4):
            array = np.moveaxis(array, 0, -1)  # channels-first (torch layout)
        if array.ndim == 3 and array.shape[2] == 1:
            array = array[:, :, 0]
        if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (3, 4)):
            raise VLMError(f"cannot read an image from an array of shape {image.shape}; expected HxWx3")
        pil = Image.fromarray(np.ascontiguousarray(array))
        return pil if pil.mode == "RGB" else pil.convert("RGB")
    raise VLMError(f"image blocks need a PIL image or a numpy array, got {type(image).__name__}")


def fit_image(image: Any, max_side: int) -> Image.Image:
    """RGB image downscaled (aspect kept) so its longest side is at most `max_side`."""
    pil = as_pil(image)
    longest = max(pil.size)
    if longest <= max_side:
        return pil
    scale = max_side / longest
    size = (max(1, round(pil.width * scale)), max(1, round(pil.height * scale)))
    return pil.resize(size, Image.Resampling.BILINEAR, reducing_gap=2.0)


# Encodings of frozen images, by (id, max_side, quality); an entry goes when its image is collected.
_FROZEN: dict[tuple[int, int, int], bytes] = {}
_FROZEN_IDS: set[int] = set()
_FROZEN_LOCK = threading.Lock()


def freeze_image(image: Image.Image) -> Image.Image:
    """Promise that `image` will not be edited again, so its encodings may be reused: a contact sheet
    shown in several prompts (describe, then segment) is downscaled and encoded once. Returns it."""
    key = id(image)
    with _FROZEN_LOCK:
        if key in _FROZEN_IDS:
            return image
        _FROZEN_IDS.add(key)
    weakref.finalize(image, _forget, key)
    return image


def _forget(key: int) -> None:
    with _FROZEN_LOCK:
        _FROZEN_IDS.discard(key)
        for cached in [k for k in _FROZEN if k[0] == key]:
            del _FROZEN[cached]


def image_jpeg(image: Any, *, max_side: int = 768, quality: int = 85) -> bytes:
    """JPEG bytes (4:2:0, as PIL writes them) of a PIL image or uint8 array, downscaled to `max_side`."""
    key = (id(image), max_side, quality)
    with _FROZEN_LOCK:
        frozen = key[0] in _FROZEN_IDS and isinstance(image, Image.Image)
        if frozen and key in _FROZEN:
            return _FROZEN[key]
    jpeg = _encode_jpeg(image, max_side, quality)
    if frozen:
        with _FROZEN_LOCK:
            if key[0] in _FROZEN_IDS:
                _FROZEN[key] = jpeg
    return jpeg


def _encode_jpeg(image: Any, max_side: int, quality: int) -> bytes:
    turbo = _simplejpeg()
    if turbo is None:
        buffer = io.BytesIO()
        fit_image(image, max_side).save(buffer, format="JPEG", quality=quality)
        return buffer.getvalue()
    if _is_rgb_array(image) and max(image.shape[:2]) <= max_side:
        array = np.ascontiguousarray(image)  # a decoded frame: no PIL round trip
    else:
        array = np.asarray(fit_image(image, max_side))
    return bytes(turbo.encode_jpeg(array, quality=quality, colorspace="RGB", colorsubsampling="420"))


def image_data_url(image: Any, *, max_side: int = 768, quality: int = 85) -> str:
    """`data:image/jpeg;base64,...` for a PIL image or uint8 array, downscaled to `max_side`."""
    jpeg = image_jpeg(image, max_side=max_side, quality=quality)
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


@functools.cache
def _simplejpeg() -> Any:
    """The simplejpeg module, or None (PIL encodes instead)."""
    try:
        import simplejpeg
    except ImportError:
        return None
    return simplejpeg


def _is_rgb_array(image: Any) -> bool:
    return isinstance(image, np.ndarray) and image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3


def map_image_blocks(
    messages: list[Message],
    image: Callable[[Any], dict[str, Any]],
    image_url: Callable[[dict[str, Any]], dict[str, Any]] = lambda block: block,
) -> list[Message]:
    """Rewrite every image (and each frame of a video block) with `image`, image_url blocks with
    `image_url`; text passes through, anything else is refused. Messages are shallow-copied."""
    out: list[Message] = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            out.append(message)
            continue
        blocks: list[dict[str, Any]] = []
        for block in content:
            kind = block.get("type")
            if kind == "image":
                blocks.append(image(block["image"]))
            elif kind == "video":
                blocks.extend(image(frame) for frame in block["video"])
            elif kind == "image_url":
                blocks.append(image_url(block))
            elif kind == "text":
                blocks.append(block)
            else:
                raise VLMError(f"unsupported message block type {kind!r}; use text, image or video blocks")
        out.append({**message, "content": blocks})
    return out


def encode_messages(messages: list[Message], *, max_side: int, quality: int) -> list[Message]:
    """OpenAI wire messages: image blocks become JPEG `image_url` blocks, frame lists one block per frame."""
    return map_image_blocks(messages, lambda img: _image_block(img, max_side, quality))


def _image_block(image: Any, max_side: int, quality: int) -> dict[str, Any]:
    url = image_data_url(image, max_side=max_side, quality=quality)
    return {"type": "image_url", "image_url": {"url": url}}
