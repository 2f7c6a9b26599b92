"""`python -m steerable.testing.server`: run the test server until Ctrl-C (prints its URL first)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

from steerable.testing.server.app import TestServer
from steerable.testing.server.faults import FAULT_KINDS, FaultPlan
from steerable.testing.server.plausible import plausible_responder


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m steerable.testing.server",
        description="Local OpenAI-compatible server for tests and benchmarks. Replies are placeholders "
        "that match the requested JSON schema; this is a test tool, not a model.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each request takes")
    parser.add_argument("--capacity", type=int, default=64, help="requests served at once")
    parser.add_argument("--fault-rate", type=float, default=0.0, help="fraction of requests that fail")
    parser.add_argument(
        "--fault-kinds", default=",".join(FAULT_KINDS), help=f"comma-separated, from {','.join(FAULT_KINDS)}"
    )
    parser.add_argument("--fault-timeout", type=float, default=30.0, help="stall of a 'timeout' fault (s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", action="append", help="model id to serve (repeatable)")
    parser.add_argument(
        "--responder",
        choices=["minimal", "plausible"],
        default="minimal",
        help="minimal: smallest schema-valid values; plausible: realistic shapes (subtasks over the window)",
    )
    parser.add_argument(
        "--no-structured-output", action="store_true", help="refuse response_format with HTTP 400"
    )
    return parser


async def _serve(server: TestServer) -> None:
    await server.start_async()
    print(f"steerable test VLM server listening on {server.url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.close_async()


def main(argv: list[str] | None = None) -> int:
    """Parse flags, serve until SIGINT/SIGTERM, exit 0."""
    args = _parser().parse_args(argv)
    try:
        faults = FaultPlan(
            rate=args.fault_rate,
            kinds=[k for k in args.fault_kinds.split(",") if k],
            seed=args.seed,
            timeout_s=args.fault_timeout,
        )
        server = TestServer(
            latency_s=args.latency,
            capacity=args.capacity,
            faults=faults,
            model_ids=args.model or ["test-model"],
            structured_output=not args.no_structured_output,
            responder=plausible_responder if args.responder == "plausible" else None,
            host=args.host,
            port=args.port,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(server))
    return 0


if __name__ == "__main__":
    sys.exit(main())
