"""The messages between `steerable serve-policy` and `steerable run --policy.server`: msgpack over one
websocket connection, numpy arrays as raw bytes with their dtype and shape.

The client opens the connection with the server's token (`Authorization: Bearer TOKEN`, checked
before the websocket opens) and says `hello`; the server answers with the policy's name, whether it
reads camera frames (`wants_images`) and which (`cameras`, None: any), whether it can continue a
chunk under way (`guides`: real-time chunking runs on the server) and the state features it reads.
Then each `act` (an observation, the command, optionally a `ChunkPrefix`, and `reset` when the
runtime reset the controller since the last one) gets one `chunk` (actions, done, error, the server's
own inference seconds), or an `error` when the request itself is malformed (`act_from_message`
checks every field, and the arrays' dtypes and shapes against the served policy's
`ServedFeatures`). Nothing but plain numbers, strings and numeric arrays crosses the wire: no pickles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from steerable.control import ActionChunk, ChunkPrefix, Observation

__all__ = [
    "MAX_MESSAGE_MB",
    "PROTOCOL",
    "TOKEN_ENV",
    "ActRequest",
    "ServedFeatures",
    "act_from_message",
    "auth_header",
    "chunk_from_message",
    "chunk_message",
    "error_message",
    "observation_message",
    "pack",
    "prefix_message",
    "unpack",
]

PROTOCOL = 2  # 2: the token, the `error` reply, the server's `cameras`
TOKEN_ENV = "STEERABLE_POLICY_TOKEN"  # the token, on either machine, when no flag gives it
# The default bound of one message: four 1280x720 camera frames and the rest, with room to spare.
MAX_MESSAGE_MB = 16.0
_ARRAY = "__ndarray__"
_NUMERIC = "biuf"  # bool, signed, unsigned, float: the only dtypes accepted back
_MAX_NDIM = 4
_MAX_SIDE = 4096  # pixels of a camera frame's side
_MAX_LENGTH = 4096  # values of a state vector, rows of a prefix, characters of a command
_MAX_CAMERAS = 16


def auth_header(token: str) -> dict[str, str]:
    """The handshake header that carries the token."""
    return {"Authorization": f"Bearer {token}"}


def _encode(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        return {_ARRAY: True, "dtype": array.dtype.str, "shape": list(array.shape), "data": array.tobytes()}
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot send {type(value).__name__} to the policy server")


def _decode(value: dict[str, Any]) -> Any:
    if value.get(_ARRAY) is not True:
        return value
    try:
        dtype = np.dtype(value["dtype"])
    except (KeyError, TypeError) as exc:
        raise ValueError("an array without a valid dtype") from exc
    if dtype.kind not in _NUMERIC:
        raise ValueError(f"refused an array of dtype {dtype} (only numeric arrays cross the wire)")
    shape, data = value.get("shape"), value.get("data")
    if (not isinstance(shape, list) or len(shape) > _MAX_NDIM
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)):
        raise ValueError(f"an array's shape must be at most {_MAX_NDIM} sizes >= 0, got {shape!r}")
    if not isinstance(data, bytes) or len(data) != math.prod(shape) * dtype.itemsize:
        raise ValueError(f"an array's bytes do not match its shape {shape} and dtype {dtype}")
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def pack(message: dict[str, Any]) -> bytes:
    return bytes(msgpack.packb(message, default=_encode, use_bin_type=True))


def unpack(data: bytes | str) -> dict[str, Any]:
    """A message; ValueError for anything that is not one of ours (the reason, one line)."""
    if isinstance(data, str):
        raise ValueError("expected a binary message")
    try:
        message = msgpack.unpackb(data, object_hook=_decode, raw=False, strict_map_key=True)
    except ValueError:
        raise
    except Exception as exc:  # msgpack's own errors: not msgpack, truncated, too deep
        raise ValueError(f"not a msgpack message ({type(exc).__name__})") from exc
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ValueError("not a policy-server message (a map with a 'type')")
    return message


def error_message(text: str) -> dict[str, Any]:
    """The server's answer to a request it refused (malformed, or not of this protocol)."""
    return {"type": "error", "error": text}


@dataclass(frozen=True)
class ServedFeatures:
    """What the served policy reads, which an `act` request is checked against (None: not known,
    as for a test double: only the generic bounds apply)."""

    state_size: int | None = None  # values of the state plus the environment state, as sent
    environment_state: bool = False  # the policy reads the simulator's object positions
    cameras: tuple[str, ...] | None = None  # the camera frames it reads
    action_dim: int | None = None


@dataclass(frozen=True)
class ActRequest:
    observation: Observation
    command: str
    prefix: ChunkPrefix | None
    reset: bool


def _array(value: Any, what: str, ndim: int, *, floats: bool = True) -> np.ndarray:
    if not isinstance(value, np.ndarray) or value.ndim != ndim:
        raise ValueError(f"{what} must be a {ndim}-D array")
    if floats and not np.isfinite(value.astype(np.float64, copy=False)).all():
        raise ValueError(f"{what} holds values that are not finite")
    return value


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number")
    return float(value)


def _field(message: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = message.get(key)
    if not isinstance(value, kind):
        raise ValueError(f"{what} is missing or of the wrong type")
    return value


def _images(value: Any, features: ServedFeatures) -> dict[str, np.ndarray]:
    if value is None:
        value = {}
    if not isinstance(value, dict) or len(value) > _MAX_CAMERAS:
        raise ValueError(f"observation.images must map at most {_MAX_CAMERAS} camera names to frames")
    out: dict[str, np.ndarray] = {}
    for key, frame in value.items():
        if features.cameras is not None and key not in features.cameras:
            raise ValueError(f"the served policy reads no camera {key!r} (it reads "
                             f"{', '.join(features.cameras) or 'none'})")
        if (not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3
                or not 0 < frame.shape[0] <= _MAX_SIDE or not 0 < frame.shape[1] <= _MAX_SIDE):
            raise ValueError(f"camera {key!r}: a frame is an HxWx3 uint8 array of at most {_MAX_SIDE} pixels a side")
        out[str(key)] = frame
    missing = [key for key in features.cameras or () if key not in out]
    if missing:
        raise ValueError(f"the served policy reads camera(s) {', '.join(missing)}, which the observation lacks")
    return out


def _observation(value: Any, features: ServedFeatures) -> Observation:
    if not isinstance(value, dict):
        raise ValueError("an act request needs an 'observation' map")
    state = _array(value.get("state"), "observation.state", 1)
    env_state = value.get("environment_state")
    if env_state is not None:
        env_state = _array(env_state, "observation.environment_state", 1)
    elif features.environment_state:
        raise ValueError("the served policy reads observation.environment_state, which the request lacks")
    size = len(state) + (len(env_state) if features.environment_state and env_state is not None else 0)
    if len(state) > _MAX_LENGTH or (env_state is not None and len(env_state) > _MAX_LENGTH):
        raise ValueError(f"a state holds at most {_MAX_LENGTH} values")
    if features.state_size is not None and size != features.state_size:
        raise ValueError(f"the served policy reads {features.state_size} state values, the request holds {size}")
    names = value.get("state_names") or []
    if not isinstance(names, list) or len(names) > _MAX_LENGTH or not all(isinstance(n, str) for n in names):
        raise ValueError("observation.state_names must be a list of names")
    return Observation(
        state=np.asarray(state, dtype=np.float32),
        images=_images(value.get("images"), features),
        time_s=_number(value.get("time_s", 0.0), "observation.time_s"),
        state_names=tuple(names),
        environment_state=None if env_state is None else np.asarray(env_state, dtype=np.float32),
    )


def _prefix(value: Any, features: ServedFeatures) -> ChunkPrefix | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("prefix must be a map")
    actions = _array(value.get("actions"), "prefix.actions", 2)
    weights = _array(value.get("weights"), "prefix.weights", 1)
    rows = actions.shape[0]
    if rows > _MAX_LENGTH or len(weights) != rows:
        raise ValueError(f"prefix: at most {_MAX_LENGTH} actions, one weight each")
    if features.action_dim is not None and actions.shape[1] != features.action_dim:
        raise ValueError(f"prefix: the served policy acts in {features.action_dim} dimensions, the prefix in "
                         f"{actions.shape[1]}")
    delay = value.get("delay")
    if isinstance(delay, bool) or not isinstance(delay, int) or not 0 <= delay <= rows:
        raise ValueError("prefix.delay must be a whole number of the prefix's actions")
    guidance = _number(value.get("max_guidance"), "prefix.max_guidance")
    return ChunkPrefix(np.asarray(actions, dtype=np.float32), np.asarray(weights, np.float32), delay, guidance)


def act_from_message(message: dict[str, Any], features: ServedFeatures) -> ActRequest:
    """An `act` request, every field checked (ValueError naming the first one wrong)."""
    command = _field(message, "command", str, "command")
    if len(command) > _MAX_LENGTH:
        raise ValueError(f"the command is over {_MAX_LENGTH} characters")
    reset = message.get("reset", False)
    if not isinstance(reset, bool):
        raise ValueError("reset must be true or false")
    return ActRequest(_observation(message.get("observation"), features), command,
                      _prefix(message.get("prefix"), features), reset)


def observation_message(obs: Observation, cameras: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The observation as sent (only the frames of `cameras`, when the server names them), with the
    environment-state vector of an environment that provides one."""
    return {
        "state": np.asarray(obs.state, dtype=np.float32),
        "images": {key: np.asarray(frame) for key, frame in obs.images.items() if cameras is None or key in cameras},
        "time_s": float(obs.time_s),
        "state_names": list(obs.state_names),
        "environment_state": obs.environment_state,
    }


def prefix_message(prefix: ChunkPrefix | None) -> dict[str, Any] | None:
    if prefix is None:
        return None
    return {"actions": np.asarray(prefix.actions, dtype=np.float32), "weights": np.asarray(prefix.weights, np.float32),
            "delay": int(prefix.delay), "max_guidance": float(prefix.max_guidance)}


def chunk_message(chunk: ActionChunk, infer_s: float) -> dict[str, Any]:
    return {"type": "chunk", "actions": np.asarray(chunk.actions, dtype=np.float32), "done": bool(chunk.done),
            "error": chunk.error, "infer_s": float(infer_s)}


def chunk_from_message(message: dict[str, Any]) -> ActionChunk:
    """The chunk of a server's reply; a refusal (`error`) is a chunk with that error (the robot holds still)."""
    if message.get("type") == "error":
        return ActionChunk(np.zeros((0, 0), np.float32), error=f"the policy server refused the request: "
                           f"{message.get('error')}")
    actions = np.array(message["actions"], dtype=np.float32)  # a writable copy, (n, action_dim) as sent
    return ActionChunk(actions, done=bool(message.get("done")), error=message.get("error"))
