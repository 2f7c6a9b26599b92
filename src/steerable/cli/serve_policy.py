"""`steerable serve-policy --policy.path CKPT --port N`: serve a trained policy's low level to a robot's
`steerable run --policy.server HOST:PORT --policy.token TOKEN` (a GPU machine serving a robot whose
computer has none)."""

from __future__ import annotations

import argparse
import os
import socket
import sys

__all__ = ["register"]

USAGE = """usage: steerable serve-policy --policy.path CKPT [--port 8765] [--host 127.0.0.1] [--policy.device cuda]

Serve a trained policy's action expert over a websocket: `steerable run --policy.server HOST:PORT --policy.token
TOKEN` on the robot's machine sends observations and gets action chunks back (with --inference rtc, real-time
chunking runs here). It listens on this machine only unless --host says otherwise (reach it through an SSH
tunnel), and answers only clients holding its token: a random one printed at start, or STEERABLE_POLICY_TOKEN
when set. Ctrl-C stops it. Every option, with its default:
"""


def register(sub: argparse._SubParsersAction) -> None:
    from steerable.cli.flags import add_command

    add_command(sub, "serve-policy", func=run,
                help="serve a trained policy's low level to `steerable run --policy.server` on another machine")


def run(args: argparse.Namespace) -> int:
    from steerable.addresses import is_loopback
    from steerable.cli.flags import parse_command
    from steerable.errors import MissingExtraError
    from steerable.runtime.policy_server import PolicyServer, ServePolicySettings
    from steerable.runtime.policy_wire import TOKEN_ENV

    cfg = parse_command(ServePolicySettings, args, USAGE)
    if cfg is None:
        return 0
    try:
        from steerable.runtime.policy_adapter import load_low_level
    except ImportError as exc:
        raise MissingExtraError(exc.name or "torch", "policy") from exc
    # Whatever state the policy reads is checked by the client against its --observation.
    controller = load_low_level(cfg.checkpoint, cfg.policy.device, "privileged")
    fixed = os.environ.get(TOKEN_ENV, "").strip()
    server = PolicyServer(controller, cfg.host, cfg.port, token=fixed or None, max_message_mb=cfg.max_message_mb)
    if not is_loopback(cfg.host):
        print(f"warning: --host {cfg.host} listens beyond this machine: anyone who reaches the port and holds the "
              "token drives this policy, and the connection is not encrypted (an SSH tunnel to the default "
              "127.0.0.1 is safer)", file=sys.stderr, flush=True)

    def ready(url: str) -> None:
        host = cfg.host if cfg.host not in ("0.0.0.0", "::", "") else socket.gethostname()
        token = f"${TOKEN_ENV}" if fixed else server.token
        print(f"serving {controller.name} ({cfg.checkpoint}) on {url}; connect with: steerable run --policy.server "
              f"{host}:{server.port} --policy.token {token}   (Ctrl-C stops)", flush=True)

    try:
        server.serve_forever(on_ready=ready)
    except KeyboardInterrupt:
        print("stopped")
    except OSError as exc:
        from steerable.errors import ConfigError, explain_os_error

        raise ConfigError(
            f"--host {cfg.host} --port {cfg.port}: cannot listen there ({explain_os_error(exc)})") from exc
    return 0
