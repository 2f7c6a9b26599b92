"""Resolvers over an indexed episode timeline: active_at, emitted_at, nth_prev, nth_next, last_emitted.

The persistent rows of an episode are the same on every frame, so they are indexed once: per
selector (style, role, camera, tool_name) the matching rows are sorted by (timestamp, style, role)
and every time lookup is a binary search. Event rows are the frame's own short list and are scanned;
`last_emitted`, which looks back over earlier frames' events, indexes those per selector on first use.
"""

from __future__ import annotations

import contextlib
import json
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from steerable.errors import LanguageRowTypeError, LanguageSchemaError, RecipeError
from steerable.recipes.expressions import ResolverCall, resolver_call

__all__ = ["EMITTED_AT_TOLERANCE_S", "EpisodeTimeline", "decoded_tool_calls", "normalize_rows", "row_timestamp"]

# Rows as a recipe's caller gives them (any source: a Hub dataset, a live session), checked here as
# they are read; `steerable.language.rows` has the typed rows of a stored dataset.
InputRow = dict[str, Any]
Selector = tuple["str | None", "str | None", "str | None", "str | None"]
# The reference matches persistent rows within ±0.1 s in emitted_at, so `t = frame / fps` still hits.
EMITTED_AT_TOLERANCE_S = 0.1


def normalize_rows(rows: Iterable[Any] | None) -> list[InputRow]:
    """Rows as dicts: None entries are dropped and Arrow scalars converted; anything else is an error."""
    out: list[InputRow] = []
    for row in rows or ():
        if row is None:
            continue
        if not isinstance(row, dict) and hasattr(row, "as_py"):
            row = row.as_py()
        if not isinstance(row, dict):
            raise LanguageRowTypeError(f"language rows must be dictionaries, got {type(row).__name__}: {row!r}")
        out.append(row)
    return out


def row_timestamp(row: Mapping[str, Any]) -> float:
    """A persistent row's timestamp as a float (numpy/tensor scalars and 1-element lists accepted)."""
    value: Any = row.get("timestamp")
    if hasattr(value, "item"):
        value = value.item()
    elif isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if value is None or isinstance(value, (bool, str)):
        raise LanguageSchemaError(f"persistent row needs a numeric timestamp, got {value!r}: {dict(row)!r}")
    return float(value)


def decoded_tool_calls(row: InputRow) -> InputRow:
    """`row`, or a copy whose tool calls given as JSON text are parsed (text that is not JSON stays)."""
    calls = row.get("tool_calls")
    if not calls or not any(isinstance(c, str) for c in calls):
        return row
    parsed = []
    for call in calls:
        if isinstance(call, str):
            with contextlib.suppress(ValueError):
                call = json.loads(call)
        parsed.append(call)
    return {**row, "tool_calls": parsed}


def _matches(row: InputRow, style: str | None, role: str | None, camera: str | None, tool_name: str | None) -> bool:
    if style is not None and row.get("style") != style:
        return False
    if role is not None and row.get("role") != role:
        return False
    if camera is not None and row.get("camera") != camera:
        return False
    if tool_name is None:
        return True
    return any(
        isinstance(call, dict) and isinstance(call.get("function"), dict) and call["function"].get("name") == tool_name
        for call in row.get("tool_calls") or ()
    )


class _Index:
    """Rows of one selector sorted by (timestamp, style, role), with their timestamps alongside."""

    __slots__ = ("rows", "times")

    def __init__(self, rows: list[tuple[float, InputRow]]) -> None:
        rows.sort(key=lambda item: (item[0], item[1].get("style") or "", item[1].get("role") or ""))
        self.times = [ts for ts, _ in rows]
        self.rows = [row for _, row in rows]


class EpisodeTimeline:
    """One episode's language rows, indexed for resolvers. Build it once per episode.

    `persistent_rows` is the episode's persistent list (the same on every frame); `events_by_frame`
    optionally maps a frame's stored timestamp to that frame's event rows; `events_by_index` maps a
    frame's dataset `index` to its event rows instead, for frames that share a timestamp (each keeps
    its own rows, as in the reference); `fps` lets `emitted_at` match persistent rows to exactly one
    frame instead of a ±0.1 s window.
    """

    __slots__ = ("_by_index", "_event_indexes", "_events", "_indexes", "_rows", "_user_texts", "fps",
                 "task_rephrasings")

    def __init__(
        self,
        persistent_rows: Iterable[Any] | None = None,
        events_by_frame: Mapping[float, Sequence[Any]] | None = None,
        *,
        fps: float | None = None,
        events_by_index: Mapping[int, Sequence[Any]] | None = None,
    ) -> None:
        self._rows = [(row_timestamp(row), row) for row in normalize_rows(persistent_rows)]
        self._events = {float(t): rows for t, rows in (events_by_frame or {}).items()}
        self._by_index = None if events_by_index is None else dict(events_by_index)
        self._indexes: dict[tuple[Selector, bool], _Index] = {}
        self._event_indexes: dict[tuple[Any, bool], _Index] = {}
        self.fps = fps
        self._user_texts: frozenset[str] | None = None  # built on first use (`user_texts`)
        # `${task}` rotates over user task_aug rows in stored order, whatever their timestamp.
        self.task_rephrasings = tuple(
            row for _, row in self._rows if row.get("style") == "task_aug" and row.get("role") == "user"
        )

    @property
    def persistent_rows(self) -> list[InputRow]:
        return [row for _, row in self._rows]

    def event_times(self) -> list[float]:
        """The stored timestamps of the frames that carry event rows, in order."""
        return sorted(t for t, rows in self._events.items() if rows)

    def is_empty_at(self, t: float, index: int | None = None) -> bool:
        """True when the frame at `t` (dataset `index`) has no language rows: no persistent rows and no events."""
        return not self._rows and not self.frame_events(t, index)

    def user_texts(self) -> frozenset[str]:
        """What the episode's user rows say (task rephrasings, interjections), persistent and event rows alike;
        built once per timeline (a training item asks for it on every draw)."""
        if self._user_texts is None:
            events = self._by_index.values() if self._by_index is not None else self._events.values()
            rows = [*(row for _, row in self._rows), *normalize_rows(row for frame in events for row in frame)]
            self._user_texts = frozenset(r["content"] for r in rows
                                         if r.get("role") == "user" and isinstance(r.get("content"), str))
        return self._user_texts

    def events_at(self, t: float) -> Sequence[Any]:
        """The event rows of the frame whose stored timestamp is exactly `t` (empty if none)."""
        return self._events.get(float(t), ())

    def frame_events(self, t: float, index: int | None = None) -> Sequence[Any]:
        """One frame's event rows: by its dataset `index` where the timeline holds them per frame,
        else by its timestamp `t`."""
        if self._by_index is not None and index is not None:
            return self._by_index.get(index, ())
        return self._events.get(float(t), ())

    def _index(self, selector: Selector, decode_calls: bool) -> _Index:
        index = self._indexes.get((selector, decode_calls))
        if index is None:
            rows = ((ts, decoded_tool_calls(row) if decode_calls else row) for ts, row in self._rows)
            index = _Index([(ts, row) for ts, row in rows if _matches(row, *selector)])
            self._indexes[(selector, decode_calls)] = index
        return index

    def resolve(self, call: ResolverCall, t: float, events: Sequence[Any] = (), *, frame_exact: bool = True,
                decode_calls: bool = True) -> InputRow | None:
        """Evaluate `call` at frame time `t` with the frame's `events`; raises RecipeError when ambiguous.

        `frame_exact` (with `fps` known) makes persistent `emitted_at` match rows within half a frame
        of `t`; otherwise the reference's ±0.1 s tolerance applies. `decode_calls` reads tool calls
        given as JSON text (raw Arrow `json` values) as the dicts they encode; without it they never
        match `tool_name=` (reference).
        """
        if call.reads_events:
            return self._emitted_event(call, t, events, decode_calls) if events else None
        if call.resolver == "last_emitted":
            return self._last_emitted(call, t, events, decode_calls)
        resolver = call.resolver
        index = self._index(call.selector, decode_calls)
        times = index.times
        if resolver == "active_at":
            i = bisect_right(times, t)
            if i == 0:
                return None
            if i > 1 and times[i - 2] == times[i - 1]:
                tied = index.rows[bisect_left(times, times[i - 1]) : i]
                raise _ambiguous(call, t, tied)
            return index.rows[i - 1]
        if resolver == "emitted_at":
            if frame_exact and self.fps:
                half = 0.5 / self.fps
                found = index.rows[bisect_left(times, t - half) : bisect_left(times, t + half)]
            else:
                lo = bisect_left(times, t - EMITTED_AT_TOLERANCE_S - 1e-9)
                hi = bisect_right(times, t + EMITTED_AT_TOLERANCE_S + 1e-9)
                found = [index.rows[i] for i in range(lo, hi) if abs(times[i] - t) <= EMITTED_AT_TOLERANCE_S]
            if len(found) > 1:
                raise _ambiguous(call, t, found)
            return found[0] if found else None
        # nth_prev / nth_next: the anchor is the last row at or before t; t before every row -> -1.
        step = call.offset if resolver == "nth_next" else -call.offset
        position = bisect_right(times, t) - 1 + step
        return index.rows[position] if 0 <= position < len(times) else None

    def _emitted_event(
        self, call: ResolverCall, t: float, events: Sequence[Any], decode_calls: bool
    ) -> InputRow | None:
        found = _matching(events, call.selector, decode_calls)
        if len(found) > 1:
            raise _ambiguous(call, t, found)
        return found[0] if found else None

    def _last_emitted(self, call: ResolverCall, t: float, events: Sequence[Any], decode_calls: bool) -> InputRow | None:
        """The matching event row of this frame, else of the latest earlier frame that has one."""
        here = self._emitted_event(call, t, events, decode_calls) if events else None
        if here is not None:
            return here
        key = (("events", *call.selector), decode_calls)
        index = self._event_indexes.get(key)
        if index is None:
            index = _Index([(ts, row) for ts, frame in self._events.items()
                            for row in _matching(frame, call.selector, decode_calls)])
            self._event_indexes[key] = index
        times = index.times
        i = bisect_left(times, t)  # rows of earlier frames only: this frame's own were `events`
        if i == 0:
            return None
        first = bisect_left(times, times[i - 1])
        if i - first > 1:
            raise _ambiguous(call, times[i - 1], index.rows[first:i])
        return index.rows[i - 1]

    def active_at(self, t: float, *, style: str, role: str | None = None, camera: str | None = None,
                  tool_name: str | None = None) -> InputRow | None:
        """The latest row of `style` emitted at or before `t` (still active), or None."""
        call = resolver_call("active_at", style=style, role=role, camera=camera, tool_name=tool_name)
        return self.resolve(call, float(t))

    def emitted_at(self, t: float, *, events: Sequence[Any] | None = None, style: str | None = None,
                   role: str | None = None, camera: str | None = None, tool_name: str | None = None,
                   frame_exact: bool = True, decode_calls: bool = True) -> InputRow | None:
        """The row emitted at `t`: a persistent row at `t`, or the frame's matching event row."""
        call = resolver_call("emitted_at", style=style, role=role, camera=camera, tool_name=tool_name)
        frame_events = self.events_at(t) if events is None else events
        return self.resolve(call, float(t), frame_events, frame_exact=frame_exact, decode_calls=decode_calls)

    def last_emitted(self, t: float, *, events: Sequence[Any] | None = None, style: str | None = None,
                     role: str | None = None, camera: str | None = None,
                     tool_name: str | None = None) -> InputRow | None:
        """The latest matching event row emitted at or before `t` (this frame's, else an earlier one's)."""
        call = resolver_call("last_emitted", style=style, role=role, camera=camera, tool_name=tool_name)
        return self.resolve(call, float(t), self.events_at(t) if events is None else events)

    def nth_prev(self, t: float, *, style: str, offset: int = 1, role: str | None = None,
                 camera: str | None = None, tool_name: str | None = None) -> InputRow | None:
        """The row `offset` places before the one active at `t` (rows sorted by time, style, role)."""
        call = resolver_call("nth_prev", style=style, role=role, camera=camera, tool_name=tool_name, offset=offset)
        return self.resolve(call, float(t))

    def nth_next(self, t: float, *, style: str, offset: int = 1, role: str | None = None,
                 camera: str | None = None, tool_name: str | None = None) -> InputRow | None:
        """The row `offset` places after the one active at `t`; before the first row, the first is next 1."""
        call = resolver_call("nth_next", style=style, role=role, camera=camera, tool_name=tool_name, offset=offset)
        return self.resolve(call, float(t))


def _matching(rows: Sequence[Any], selector: Selector, decode_calls: bool) -> list[InputRow]:
    """The event rows among `rows` (None entries skipped, Arrow scalars converted) that `selector`
    matches, with tool calls given as JSON text read as dicts when `decode_calls`."""
    found = []
    for row in normalize_rows(rows):
        if decode_calls:
            row = decoded_tool_calls(row)
        if _matches(row, *selector):
            found.append(row)
    return found


def _ambiguous(call: ResolverCall, t: float, rows: Sequence[InputRow]) -> RecipeError:
    cameras = sorted({str(row.get("camera")) for row in rows if row.get("camera")})
    hint = "add camera=<key> to the binding" if len(cameras) > 1 else "add a selector that tells them apart"
    seen = f" (cameras {', '.join(cameras)})" if cameras else ""
    return RecipeError(f"{call} matches {len(rows)} rows at t={t:g}s{seen}; {hint}")
