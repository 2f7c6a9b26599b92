"""The messages between `steerable serve-policy` and `steerable run --policy.server`: msgpack over one
websocket connection, numpy arrays as raw bytes with their dtype and shape.

The client opens with `hello`; the server answers with the policy's name, whether it reads camera
frames (`wants_images`), whether it can continue a chunk under way (`guides`: real-time chunking
runs on the server) and the state features it reads. Then each `act` (an observation, the command,
optionally a `ChunkPrefix`, and `reset` when the runtime reset the controller since the last one)
gets one `chunk` (actions, done, error, the server's own inference seconds). Nothing but plain
numbers, strings and numeric arrays crosses the wire: no pickles.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from steerable.control import ActionChunk, ChunkPrefix, Observation

__all__ = [
    "PROTOCOL",
    "chunk_from_message",
    "chunk_message",
    "observation_from_message",
    "observation_message",
    "pack",
    "prefix_from_message",
    "prefix_message",
    "unpack",
]

PROTOCOL = 1
_ARRAY = "__ndarray__"
_NUMERIC = "biuf"  # bool, signed, unsigned, float: the only dtypes accepted back


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
    dtype = np.dtype(value["dtype"])
    if dtype.kind not in _NUMERIC:
        raise ValueError(f"refused an array of dtype {dtype} (only numeric arrays cross the wire)")
    return np.frombuffer(value["data"], dtype=dtype).reshape(value["shape"])


def pack(message: dict[str, Any]) -> bytes:
    return bytes(msgpack.packb(message, default=_encode, use_bin_type=True))


def unpack(data: bytes | str) -> dict[str, Any]:
    if isinstance(data, str):
        raise ValueError("expected a binary message")
    message = msgpack.unpackb(data, object_hook=_decode, raw=False)
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ValueError("not a policy-server message")
    return message


def observation_message(obs: Observation, environment_state: np.ndarray | None) -> dict[str, Any]:
    """The observation as sent; the simulator's privileged world goes as its environment-state vector."""
    return {
        "state": np.asarray(obs.state, dtype=np.float32),
        "images": {key: np.asarray(frame) for key, frame in obs.images.items()},
        "time_s": float(obs.time_s),
        "state_names": list(obs.state_names),
        "environment_state": environment_state,
    }


def observation_from_message(message: dict[str, Any]) -> Observation:
    env_state = message.get("environment_state")
    return Observation(
        state=np.asarray(message["state"], dtype=np.float32),
        images=dict(message.get("images") or {}),
        time_s=float(message.get("time_s", 0.0)),
        state_names=tuple(message.get("state_names") or ()),
        privileged=None if env_state is None else np.asarray(env_state, dtype=np.float32),
    )


def prefix_message(prefix: ChunkPrefix | None) -> dict[str, Any] | None:
    if prefix is None:
        return None
    return {"actions": np.asarray(prefix.actions, dtype=np.float32), "weights": np.asarray(prefix.weights, np.float32),
            "delay": int(prefix.delay), "max_guidance": float(prefix.max_guidance)}


def prefix_from_message(message: dict[str, Any] | None) -> ChunkPrefix | None:
    if message is None:
        return None
    return ChunkPrefix(np.asarray(message["actions"], dtype=np.float32), np.asarray(message["weights"], np.float32),
                       int(message["delay"]), float(message["max_guidance"]))


def chunk_message(chunk: ActionChunk, infer_s: float) -> dict[str, Any]:
    return {"type": "chunk", "actions": np.asarray(chunk.actions, dtype=np.float32), "done": bool(chunk.done),
            "error": chunk.error, "infer_s": float(infer_s)}


def chunk_from_message(message: dict[str, Any]) -> ActionChunk:
    actions = np.array(message["actions"], dtype=np.float32)  # a writable copy, (n, action_dim) as sent
    return ActionChunk(actions, done=bool(message.get("done")), error=message.get("error"))
