"""Numpy rendering of the tabletop from the top camera and the wrist camera, plus object boxes.

Top: orthographic, 400 px per metre, the whole table (224x160). Wrist: a pinhole camera 10 cm
above the fingertips looking straight down, so objects grow as the gripper descends; 224x160 like
the top camera (`camera_shapes="equal"`, the default: policies that stack cameras need one shape),
or 128x128 (`"legacy"`, the shape of datasets made before both cameras had one shape). A frame of
another size shows the same camera with a smaller or larger sensor: the same pixels around the
centre (wrist) or the top-left table corner (top). Boxes are `[x0, y0, x1, y1]` pixel edges with
x1/y1 exclusive, computed by the same code that draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from steerable.errors import ConfigError
from steerable.synthetic.world import TABLE_DEPTH, TABLE_WIDTH, Receptacle, Scene, WorldState

__all__ = [
    "CAMERAS",
    "CAMERA_SHAPES",
    "DEFAULT_CAMERA_SHAPES",
    "CameraSize",
    "camera_name",
    "camera_sizes",
    "object_boxes",
    "render_frame",
]

CameraSize = tuple[int, int]  # (width, height) in pixels
# camera layout -> camera -> (width, height)
CAMERA_SHAPES: dict[str, dict[str, CameraSize]] = {
    "equal": {"top": (224, 160), "wrist": (224, 160)},
    "legacy": {"top": (224, 160), "wrist": (128, 128)},
}
DEFAULT_CAMERA_SHAPES = "equal"
# camera -> (width, height) of the default layout
CAMERAS: dict[str, CameraSize] = CAMERA_SHAPES[DEFAULT_CAMERA_SHAPES]

_TOP_SCALE = 400.0
_WRIST_FOCAL = 112.0
_WRIST_HEIGHT = 0.10
_WRIST_FINGER_W = 8
_FLOOR = np.array([70, 70, 75], dtype=np.uint8)
_FINGER = (55, 55, 60)
_SHADOW_DARKEN = 0.55
_RIM = 0.01
_TAPE = 0.005
_OPEN_WIDTH = 0.08

Rect = tuple[float, float, float, float]
PixelRect = tuple[int, int, int, int]
Color = tuple[int, int, int]
# Maps a table-frame rectangle at height z to pixel edges (None: behind the camera).
Projector = Callable[[Rect, float], PixelRect | None]


def camera_name(camera: str) -> str:
    """Accept `top` or `observation.images.top` and return the short name."""
    short = camera.rsplit(".", 1)[-1]
    if short not in CAMERAS:
        raise ConfigError(f"unknown camera {camera!r}: the synthetic world has {', '.join(CAMERAS)}")
    return short


def camera_sizes(shapes: str = DEFAULT_CAMERA_SHAPES) -> dict[str, CameraSize]:
    """camera -> (width, height) of the layout `shapes` ("equal" or "legacy")."""
    found = CAMERA_SHAPES.get(shapes)
    if found is None:
        raise ConfigError(f"--camera_shapes {shapes!r}: choose {' or '.join(CAMERA_SHAPES)}")
    return dict(found)


def render_frame(state: WorldState, camera: str, size: CameraSize | None = None) -> np.ndarray:
    """The RGB uint8 HxWx3 image `camera` sees in `state`, `size` (width, height) or its default."""
    cam = camera_name(camera)
    width, height = size or CAMERAS[cam]
    if cam == "top":
        return _render_top(state, width, height)
    return _render_wrist(state, width, height)


def object_boxes(state: WorldState, camera: str, size: CameraSize | None = None) -> list[dict[str, object]]:
    """`{"name", "box"}` for every cube and receptacle at least partly inside the camera's image."""
    cam = camera_name(camera)
    width, height = size or CAMERAS[cam]
    project = _top_rect if cam == "top" else _wrist_projector(state, width, height)
    boxes: list[dict[str, object]] = []
    for rec in state.scene.receptacles:
        _add_box(boxes, rec.name, project(rec.rect, 0.0), width, height)
    for cube, (x, y, z) in zip(state.scene.cubes, state.positions, strict=True):
        _add_box(boxes, cube.name, project(_cube_rect(x, y, cube.size), z + cube.size), width, height)
    return boxes


def _add_box(out: list[dict[str, object]], name: str, px: PixelRect | None, w: int, h: int) -> None:
    if px is None:
        return
    x0, y0, x1, y1 = max(px[0], 0), max(px[1], 0), min(px[2], w), min(px[3], h)
    if x1 > x0 and y1 > y0:
        out.append({"name": name, "box": [x0, y0, x1, y1]})


def _mix(color: Color, weight: float, toward: int) -> Color:
    r, g, b = (int(weight * c + (1 - weight) * toward) for c in color)
    return (r, g, b)


# Edges this near a half pixel round up. A held cube sits under the gripper and its edges project
# to exact half pixels on odd-sized images, give or take the last bits of floating point, which
# can differ between machines: without the slack such an edge moved by a pixel from one machine to
# the next (a pinned digest passed where it was made and failed elsewhere at the same commit).
_TIE_SLACK = 1e-9  # pixels


def _px(v: float) -> int:
    # Round half up: Python's round() is banker's rounding, which would shift some edges by a pixel.
    return int(math.floor(v + 0.5 + _TIE_SLACK))


def _cube_rect(x: float, y: float, size: float) -> Rect:
    return (x - size / 2, y - size / 2, x + size / 2, y + size / 2)


def _fill(img: np.ndarray, px: PixelRect | None, color: Color | np.ndarray) -> None:
    if px is None:
        return
    h, w = img.shape[:2]
    x0, y0, x1, y1 = max(px[0], 0), max(px[1], 0), min(px[2], w), min(px[3], h)
    if x1 > x0 and y1 > y0:
        img[y0:y1, x0:x1] = color


def _darken(img: np.ndarray, px: PixelRect | None) -> None:
    if px is None:
        return
    h, w = img.shape[:2]
    x0, y0, x1, y1 = max(px[0], 0), max(px[1], 0), min(px[2], w), min(px[3], h)
    if x1 > x0 and y1 > y0:
        img[y0:y1, x0:x1] = (img[y0:y1, x0:x1] * _SHADOW_DARKEN).astype(np.uint8)


def _wood_lut() -> np.ndarray:
    shade = np.linspace(0.0, 1.0, 256)[:, None]
    rgb = np.array([186.0, 150.0, 108.0]) + (shade - 0.5) * np.array([36.0, 30.0, 24.0])
    return np.clip(rgb, 0, 255).astype(np.uint8)


_WOOD = _wood_lut()
# The wood shades and, after them, the floor, as 3-byte items: one `take` paints a whole frame.
_FLOOR_SHADE = len(_WOOD)
_PALETTE = np.vstack([_WOOD, _FLOOR]).view("V3").ravel()
# How near (in shades, per radian of the sine's largest argument) a pixel's fast grain may lie to a
# step between two shades before its row is computed the direct way. The fast and the direct grain
# differ by rounding only: about 1e-14 shades per radian (under 1e-12 in all on the table's cameras).
_STEP_MARGIN = 1e-9
# A pixel centred this near the table's edge (a camera centred over it) is table, whatever its last bits.
_EDGE_SLACK = 1e-12  # metres


def _table_texture(x: np.ndarray, y: np.ndarray, phase: float) -> np.ndarray:
    """Wood-like grain as a function of table coordinates (1-D x, y), so both cameras see one table.

    Pixel (i, j) has shade floor(127.5 * (sin(a_j + b_i) + 1)), a = 60 x, b = 4 sin(9 y + phase) +
    phase. As sin a cos b + cos a sin b that is an (h, 3) @ (3, w) product instead of h * w sines;
    it can take another shade than the direct sine only on a pixel within the margin of a step, so
    the rows holding such a pixel are computed directly (the same sines as ever): the same bytes.
    """
    a = 60.0 * x
    b = 4.0 * np.sin(9.0 * y + phase) + phase
    margin = _STEP_MARGIN * max(1.0, float(np.abs(a).max() + np.abs(b).max()))
    rows = np.stack([np.cos(b), np.sin(b), np.ones_like(b)], axis=1)
    level = rows @ (127.5 * np.stack([np.sin(a), np.cos(a), np.ones_like(a)]))
    shade = level.astype(np.intp)
    level -= shade  # the fraction of a shade, then its distance from the middle between two steps
    level -= 0.5
    np.abs(level, out=level)
    for i in np.flatnonzero(level.max(axis=1) > 0.5 - margin):
        shade[i] = ((np.sin(a + b[i]) + 1.0) * 127.5).astype(np.intp)
    shade[(y < -_EDGE_SLACK) | (y > TABLE_DEPTH + _EDGE_SLACK)] = _FLOOR_SHADE
    shade[:, (x < -_EDGE_SLACK) | (x > TABLE_WIDTH + _EDGE_SLACK)] = _FLOOR_SHADE
    return _PALETTE.take(shade, mode="clip").view(np.uint8).reshape(*shade.shape, 3)


def _draw_receptacle(img: np.ndarray, rec: Receptacle, project: Projector) -> None:
    x0, y0, x1, y1 = rec.rect
    if rec.kind == "bin":
        tint = _mix(rec.color, 0.35, 235)
        _fill(img, project(rec.rect, 0.0), rec.color)
        _fill(img, project((x0 + _RIM, y0 + _RIM, x1 - _RIM, y1 - _RIM), 0.0), tint)
        return
    # A zone is tape on the table: four thin strips, the table shows through.
    for strip in (
        (x0, y0, x1, y0 + _TAPE),
        (x0, y1 - _TAPE, x1, y1),
        (x0, y0, x0 + _TAPE, y1),
        (x1 - _TAPE, y0, x1, y1),
    ):
        _fill(img, project(strip, 0.0), rec.color)


def _draw_cubes(img: np.ndarray, state: WorldState, project: Projector, shadow_of: Projector | None) -> None:
    scene = state.scene
    order = sorted(range(len(scene.cubes)), key=lambda i: (state.positions[i][2], i))
    if shadow_of is not None:
        for i in order:
            x, y, z = state.positions[i]
            if z > 1e-6:
                _darken(img, shadow_of(_cube_rect(x, y, scene.cubes[i].size), z))
    for i in order:
        cube = scene.cubes[i]
        x, y, z = state.positions[i]
        edge = _mix(cube.color, 0.6, 0)
        top = z + cube.size
        _fill(img, project(_cube_rect(x, y, cube.size), top), edge)
        _fill(img, project(_cube_rect(x, y, cube.size * 0.8), top), cube.color)


def _top_rect(rect: Rect, z: float = 0.0) -> PixelRect:
    x0, y0, x1, y1 = rect
    return (_px(x0 * _TOP_SCALE), _px(y0 * _TOP_SCALE), _px(x1 * _TOP_SCALE), _px(y1 * _TOP_SCALE))


def _top_shadow(rect: Rect, z: float) -> PixelRect:
    # Light from the upper left: shadows fall right and down, further for higher objects.
    d = 0.3 * z
    return _top_rect((rect[0] + d, rect[1] + d, rect[2] + d, rect[3] + d))


@lru_cache(maxsize=64)
def _top_background(scene: Scene, w: int, h: int) -> np.ndarray:
    xs = (np.arange(w) + 0.5) / _TOP_SCALE
    ys = (np.arange(h) + 0.5) / _TOP_SCALE
    img = _table_texture(xs, ys, scene.texture_phase)
    for rec in scene.receptacles:
        _draw_receptacle(img, rec, _top_rect)
    img.setflags(write=False)
    return img


def _render_top(state: WorldState, w: int, h: int) -> np.ndarray:
    img = _top_background(state.scene, w, h).copy()
    g = state.gripper
    fingers = _finger_rects(g.x, g.y, g.closure)
    for rect in fingers:
        _darken(img, _top_shadow(rect, g.z))
    _draw_cubes(img, state, _top_rect, _top_shadow)
    for rect in fingers:
        _fill(img, _top_rect(rect), _FINGER)
    bridge = (fingers[0][0], g.y - 0.022, fingers[1][2], g.y - 0.016)
    _fill(img, _top_rect(bridge), _FINGER)
    return img


def _finger_rects(x: float, y: float, closure: float) -> tuple[Rect, Rect]:
    half = (_OPEN_WIDTH - (_OPEN_WIDTH / 2) * closure) / 2
    left = (x - half - 0.008, y - 0.016, x - half, y + 0.016)
    right = (x + half, y - 0.016, x + half + 0.008, y + 0.016)
    return left, right


def _wrist_projector(state: WorldState, w: int, h: int) -> Projector:
    g = state.gripper
    cam_z = g.z + _WRIST_HEIGHT

    def project(rect: Rect, z: float) -> PixelRect | None:
        depth = cam_z - z
        if depth < 0.01:
            return None
        k = _WRIST_FOCAL / depth
        x0, y0, x1, y1 = rect
        return (
            _px(w / 2 + (x0 - g.x) * k),
            _px(h / 2 + (y0 - g.y) * k),
            _px(w / 2 + (x1 - g.x) * k),
            _px(h / 2 + (y1 - g.y) * k),
        )

    return project


def _render_wrist(state: WorldState, w: int, h: int) -> np.ndarray:
    g = state.gripper
    metres_per_px = (g.z + _WRIST_HEIGHT) / _WRIST_FOCAL
    xs = g.x + (np.arange(w) + 0.5 - w / 2) * metres_per_px
    ys = g.y + (np.arange(h) + 0.5 - h / 2) * metres_per_px
    img = _table_texture(xs, ys, state.scene.texture_phase)
    project = _wrist_projector(state, w, h)
    for rec in state.scene.receptacles:
        _draw_receptacle(img, rec, project)
    _draw_cubes(img, state, project, None)
    # The fingers hang below the camera at a fixed depth, so they sit at fixed rows of the image.
    half = (_OPEN_WIDTH - (_OPEN_WIDTH / 2) * g.closure) / 2
    inner = _px(half * _WRIST_FOCAL / _WRIST_HEIGHT)
    rows = (h // 2 - 14, h // 2 + 14)
    _fill(img, (w // 2 - inner - _WRIST_FINGER_W, rows[0], w // 2 - inner, rows[1]), _FINGER)
    _fill(img, (w // 2 + inner, rows[0], w // 2 + inner + _WRIST_FINGER_W, rows[1]), _FINGER)
    return img
