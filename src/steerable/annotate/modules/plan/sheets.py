"""Contact sheets: frames tiled into a grid, each tile badged with its real stored frame time.

A model reads boundary times off the badges, so a badge shows the timestamp of the frame actually
decoded (never a requested grid time) and is drawn large enough to survive the model's downscaling.
"""

from __future__ import annotations

import functools
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from steerable.vlm.images import freeze_image

__all__ = ["ContactSheet", "badge_text", "badged_tile", "build_contact_sheets", "sheets_from_tiles"]

_GAP = 2  # black pixels between tiles, so neighbouring frames never read as one picture
_BADGE_FONT_RATIO = 0.13  # badge text height relative to the tile height
_MIN_FONT_PX = 12


@dataclass(frozen=True)
class ContactSheet:
    """One grid image, the frame time of each tile (row-major), and its JPEG encoding."""

    image: Image.Image  # frozen: never edited after the sheet is made, so its request encoding is reused
    times: list[float]
    quality: int = field(default=84, repr=False)

    def __post_init__(self) -> None:
        freeze_image(self.image)

    @functools.cached_property
    def jpeg(self) -> bytes:
        """The sheet as JPEG bytes at `quality` (encoded on first use; VLM clients encode `image` themselves)."""
        buffer = io.BytesIO()
        self.image.save(buffer, format="JPEG", quality=self.quality)
        return buffer.getvalue()


def badge_text(t: float) -> str:
    """The label burned into a tile, e.g. "t=3.47s"."""
    return f"t={t:.2f}s"


def build_contact_sheets(
    frames: Sequence[np.ndarray],
    times: Sequence[float],
    *,
    columns: int = 5,
    per_sheet: int = 20,
    frame_width: int = 224,
    quality: int = 84,
) -> list[ContactSheet]:
    """Tile `frames` (HxWx3 uint8, paired with their stored `times`) into sheets of at most `per_sheet`.

    Frames are spread evenly over the fewest sheets that hold them, so no sheet is a near-empty tail;
    a sheet has only as many rows as it needs.
    """
    if len(frames) != len(times):
        raise ValueError(f"{len(frames)} frames but {len(times)} times: each frame needs its own time")
    if columns < 1 or per_sheet < 1 or frame_width < 1 or not 1 <= quality <= 100:
        raise ValueError("columns, per_sheet and frame_width must be positive and quality within 1..100")
    if not frames:
        return []
    tiles = [badged_tile(frame, float(t), frame_width) for frame, t in zip(frames, times, strict=True)]
    return sheets_from_tiles(tiles, times, columns=columns, per_sheet=per_sheet, quality=quality)


def sheets_from_tiles(
    tiles: Sequence[Image.Image], times: Sequence[float], *, columns: int, per_sheet: int, quality: int
) -> list[ContactSheet]:
    """Grid already-badged tiles into sheets (see `build_contact_sheets`); tiles can be reused across calls."""
    if not tiles:
        return []
    count = math.ceil(len(tiles) / per_sheet)
    size = math.ceil(len(tiles) / count)
    sheets = []
    for start in range(0, len(tiles), size):
        chunk = list(tiles[start : start + size])
        sheets.append(
            ContactSheet(_grid(chunk, columns), [float(t) for t in times[start : start + size]], quality)
        )
    return sheets


def badged_tile(frame: np.ndarray, t: float, width: int) -> Image.Image:
    """One frame scaled to `width` pixels wide with its time badge burned in."""
    array = np.asarray(frame)
    if array.dtype != np.uint8 or array.ndim not in (2, 3):
        raise ValueError(f"frames must be HxW or HxWx3 uint8 arrays, got {array.dtype} {array.shape}")
    image = Image.fromarray(np.ascontiguousarray(array))
    if image.mode != "RGB":
        image = image.convert("RGB")
    height = max(1, round(image.height * width / image.width))
    # reducing_gap: box-reduce by an integer factor first, then filter; several times faster than
    # a full bilinear pass over the original frame, with no visible difference at tile size.
    tile = image.resize((width, height), Image.Resampling.BILINEAR, reducing_gap=2.0)
    _draw_badge(tile, badge_text(t))
    return tile


@functools.cache
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    # Pillow's bundled scalable font; builds without FreeType only have the small bitmap one.
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, ValueError, OSError):
        return ImageFont.load_default()


def _draw_badge(tile: Image.Image, text: str) -> None:
    """White text on a solid black box in the top-left corner, sized to the tile."""
    tile.paste(_badge(text, max(_MIN_FONT_PX, round(tile.height * _BADGE_FONT_RATIO))), (0, 0))


@functools.lru_cache(maxsize=4096)
def _badge(text: str, font_px: int) -> Image.Image:
    """The badge as its own small image: the box is opaque, so pasting it equals drawing on the tile.
    Sampled times recur across episodes (same fps, same sampling), and rendering text holds the GIL."""
    font = _font(font_px)
    left, top, right, bottom = (int(v) for v in font.getbbox(text))
    pad = max(2, round((bottom - top) * 0.25))
    badge = Image.new("RGB", (right - left + 2 * pad + 1, bottom - top + 2 * pad + 1))
    ImageDraw.Draw(badge).text((pad - left, pad - top), text, font=font, fill=(255, 255, 255))
    return badge


def _grid(tiles: list[Image.Image], columns: int) -> Image.Image:
    cols = min(columns, len(tiles))
    rows = math.ceil(len(tiles) / cols)
    cell_w = max(t.width for t in tiles)
    cell_h = max(t.height for t in tiles)
    canvas = Image.new("RGB", (cols * cell_w + (cols - 1) * _GAP, rows * cell_h + (rows - 1) * _GAP))
    for i, tile in enumerate(tiles):
        row, col = divmod(i, cols)
        canvas.paste(tile, (col * (cell_w + _GAP), row * (cell_h + _GAP)))
    return canvas
