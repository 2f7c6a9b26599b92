"""The viewer's JSON replies: one encoding for the read routes (`steerable.viewer.server`) and the write
routes (`steerable.viewer.edit`), below both so that each imports it one way."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from starlette.responses import Response

__all__ = ["json_response"]


def json_response(body: Any, status: int = HTTPStatus.OK) -> Response:
    """`body` as compact UTF-8 JSON (NaN refused: browsers cannot parse it), never cached."""
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    return Response(data, status, media_type="application/json", headers={"Cache-Control": "no-cache"})
