"""`steerable serve-policy --policy.path CKPT --port N`: serve a trained policy's low level to a robot's
`steerable run --policy.server HOST:PORT` (a GPU machine serving a robot whose computer has none)."""

from __future__ import annotations

import argparse

__all__ = ["register"]

USAGE = """usage: steerable serve-policy --policy.path CKPT [--port 8765] [--host 0.0.0.0] [--policy.device cuda]

Serve a trained policy's action expert over a websocket: `steerable run --policy.server HOST:PORT` on the robot's
machine sends observations and gets action chunks back (with --inference rtc, real-time chunking runs here). The
server is unauthenticated: use it on a trusted network or through an SSH tunnel. Ctrl-C stops it. Every option,
with its default:
"""


def register(sub: argparse._SubParsersAction) -> None:
    from steerable.cli.flags import add_command

    add_command(sub, "serve-policy", func=run,
                help="serve a trained policy's low level to `steerable run --policy.server` on another machine")


def run(args: argparse.Namespace) -> int:
    from steerable.cli.flags import parse_command
    from steerable.errors import MissingExtraError
    from steerable.runtime.policy_server import PolicyServer, ServePolicySettings

    cfg = parse_command(ServePolicySettings, args, USAGE)
    if cfg is None:
        return 0
    try:
        from steerable.runtime.policy_adapter import load_low_level
    except ImportError as exc:
        raise MissingExtraError(exc.name or "torch", "policy") from exc
    # Whatever state the policy reads is checked by the client against its --observation.
    controller = load_low_level(cfg.checkpoint, cfg.policy.device, "privileged")
    server = PolicyServer(controller, cfg.host, cfg.port)
    try:
        server.serve_forever(on_ready=lambda url: print(f"serving {controller.name} ({cfg.checkpoint}) on {url}; "
                                                         "Ctrl-C stops", flush=True))
    except KeyboardInterrupt:
        print("stopped")
    except OSError as exc:
        from steerable.errors import ConfigError, explain_os_error

        raise ConfigError(f"--host {cfg.host} --port {cfg.port}: cannot listen there ({explain_os_error(exc)})") from exc
    return 0
