"""`VLLMLauncher`: start N `vllm serve` replicas over the local GPUs, wait until they answer, stop them.

Replicas get disjoint GPU sets (one GPU each by default; `num_gpus / parallel_servers` for tensor
parallelism), ports `serve_port + i`, and a log file each. Each replica runs in its own process
group, so stopping it (SIGINT, then SIGKILL after a grace period) also stops vLLM's worker
processes; this happens on normal exit, on errors, on Ctrl-C and on the SIGTERM of the `steerable`
command. A replica also gets SIGTERM when the process that launched it dies without stopping it
(SIGKILL, a killed Ray actor: Linux's parent-death signal), and a new replica waits for the port a
dying one still holds.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.util
import logging
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from steerable.errors import ConfigError, VLMError
from steerable.processes import server_preexec
from steerable.vlm.backends import VLMBackend
from steerable.vlm.config import VLMConfig

if TYPE_CHECKING:
    from steerable.vlm.openai_http import OpenAIHTTPVLM

__all__ = [
    "BACKEND", "ReplicaPlan", "VLLMLauncher", "detect_gpus", "plan_replicas", "replica_urls", "vllm_available",
]

log = logging.getLogger(__name__)

_DEFAULT_COMMAND = "vllm serve {model} --host 127.0.0.1 --port {port} --tensor-parallel-size {tp}"
_TAIL_LINES = 5


def vllm_available() -> bool:
    """Whether a `vllm` command or package is installed here."""
    return shutil.which("vllm") is not None or importlib.util.find_spec("vllm") is not None


def detect_gpus() -> list[str]:
    """GPU ids usable here: CUDA_VISIBLE_DEVICES when set, else what `nvidia-smi -L` lists."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [part.strip() for part in visible.split(",") if part.strip()]
        return [] if not ids or ids[0] in ("-1", "NoDevFiles") else ids
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    count = sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))
    return [str(i) for i in range(count)]


@dataclass(frozen=True)
class ReplicaPlan:
    """How one replica is started."""

    index: int
    port: int
    gpus: list[str]
    argv: list[str]

    @property
    def url(self) -> str:
        """OpenAI base URL of the replica."""
        return f"http://127.0.0.1:{self.port}/v1"


def plan_replicas(config: VLMConfig, gpus: list[str]) -> list[ReplicaPlan]:
    """Split `gpus` over the replicas the config asks for; ConfigError/VLMError when it cannot."""
    if config.num_gpus is not None and config.num_gpus > len(gpus):
        raise ConfigError(f"--vlm.num_gpus={config.num_gpus} but only {len(gpus)} GPU(s) are visible here")
    used = gpus[: config.num_gpus] if config.num_gpus else gpus
    if not used:
        raise VLMError(
            "no GPU found for vLLM (CUDA_VISIBLE_DEVICES and nvidia-smi -L show none); "
            "pass --vlm.base_url of a running server instead"
        )
    replicas = config.parallel_servers or len(used)
    if replicas > len(used) or len(used) % replicas:
        raise ConfigError(
            f"--vlm.parallel_servers={replicas} does not divide the {len(used)} GPU(s) in use; "
            "each replica needs the same whole number of GPUs"
        )
    tp = len(used) // replicas
    model = config.model_id or ""
    plans = []
    for i in range(replicas):
        port = config.serve_port + i
        plans.append(ReplicaPlan(i, port, used[i * tp : (i + 1) * tp], _command(config, model, port, tp)))
    return plans


def replica_urls(config: VLMConfig) -> list[str]:
    """Base URLs the replicas of `config` serve on (the same plan `VLLMLauncher` starts)."""
    return [plan.url for plan in plan_replicas(config, detect_gpus())]


def _command(config: VLMConfig, model: str, port: int, tp: int) -> list[str]:
    template = config.serve_command or _DEFAULT_COMMAND
    # str.replace, not str.format: commands often carry JSON arguments with braces.
    filled = template.replace("{model}", model).replace("{port}", str(port)).replace("{tp}", str(tp))
    argv = shlex.split(filled)
    if "{port}" not in template and "--port" not in argv:
        argv += ["--port", str(port)]
    return argv


class VLLMLauncher:
    """Async context manager running vLLM replicas for the config; `urls` lists them once ready."""

    def __init__(
        self, config: VLMConfig, *, stop_grace_s: float = 15.0, poll_interval_s: float = 1.0
    ) -> None:
        self.config = config
        self.stop_grace_s = stop_grace_s
        self.poll_interval_s = poll_interval_s
        self.plans: list[ReplicaPlan] = []
        self.log_paths: list[Path] = []
        self._procs: list[asyncio.subprocess.Process] = []

    @property
    def urls(self) -> list[str]:
        """OpenAI base URLs of the started replicas."""
        return [plan.url for plan in self.plans]

    @property
    def pids(self) -> list[int]:
        """Process ids of the started replicas (each one leads its own process group)."""
        return [proc.pid for proc in self._procs]

    async def __aenter__(self) -> VLLMLauncher:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start every replica and wait until all answer; on any failure, stop them all and raise."""
        self.plans = plan_replicas(self.config, detect_gpus())
        if self.config.serve_command is None and shutil.which("vllm") is None:
            raise VLMError("the `vllm` command is not installed: `pip install vllm`, or pass --vlm.base_url")
        log_dir = self.config.log_dir or Path(tempfile.mkdtemp(prefix="steerable-vllm-"))
        log_dir.mkdir(parents=True, exist_ok=True)
        atexit.register(self._kill_now)  # last resort if the event loop never reaches stop()
        try:
            for plan in self.plans:
                await self._spawn(plan, log_dir / f"vllm-replica-{plan.index}.log")
            await self._wait_ready()
        except BaseException:
            await self.stop()
            raise

    async def _spawn(self, plan: ReplicaPlan, log_path: Path) -> None:
        await _port_released(plan.port, self.stop_grace_s)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(plan.gpus)}
        with log_path.open("wb") as log_file:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *plan.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,  # own process group: stop() reaches vLLM's workers too
                    preexec_fn=server_preexec(),  # ends with this process even when it is SIGKILLed
                )
            except OSError as exc:
                raise VLMError(f"cannot start vLLM replica {plan.index} ({plan.argv[0]}): {exc}") from exc
        self._procs.append(proc)
        self.log_paths.append(log_path)
        log.info(
            "vLLM replica %d: GPUs %s, port %d, log %s", plan.index, ",".join(plan.gpus), plan.port, log_path
        )

    async def _wait_ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.serve_ready_timeout_s
        pending = set(range(len(self.plans)))
        while pending:
            for i in sorted(pending):
                proc = self._procs[i]
                if proc.returncode is not None:
                    raise VLMError(
                        f"vLLM replica {i} exited with status {proc.returncode} before it was ready; "
                        f"see {self.log_paths[i]}: {_tail(self.log_paths[i])}"
                    )
                if await _answers(self.plans[i].port):
                    pending.discard(i)
                    log.info("vLLM replica %d is ready at %s", i, self.plans[i].url)
            if pending and loop.time() > deadline:
                first = min(pending)
                raise VLMError(
                    f"vLLM replica(s) {sorted(pending)} not ready after {self.config.serve_ready_timeout_s:g}s "
                    f"(--vlm.serve_ready_timeout_s); see {self.log_paths[first]}: {_tail(self.log_paths[first])}"
                )
            if pending:
                await asyncio.sleep(self.poll_interval_s)

    async def stop(self) -> None:
        """SIGINT every live replica's process group, SIGKILL those still alive after the grace period."""
        alive = [p for p in self._procs if p.returncode is None]
        for proc in alive:
            _signal_group(proc.pid, signal.SIGINT)
        if alive:
            try:
                await asyncio.wait_for(asyncio.gather(*(p.wait() for p in alive)), self.stop_grace_s)
            except asyncio.TimeoutError:
                for proc in alive:
                    if proc.returncode is None:
                        log.warning("vLLM replica pid %d ignored SIGINT; killing it", proc.pid)
                        _signal_group(proc.pid, signal.SIGKILL)
                await asyncio.gather(*(p.wait() for p in alive))
        for proc in self._procs:
            _signal_group(proc.pid, signal.SIGKILL)  # stray workers left in a group whose leader exited
        self._procs.clear()
        atexit.unregister(self._kill_now)

    def _kill_now(self) -> None:
        for proc in self._procs:
            _signal_group(proc.pid, signal.SIGKILL)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def _port_released(port: int, timeout_s: float) -> None:
    """Wait until nothing listens on `port`: the replica of a launcher that was killed (a Ray actor
    being replaced) may still be shutting down there. VLMError when it stays taken."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while _port_taken(port):
        if loop.time() > deadline:
            raise VLMError(
                f"port {port} is in use by another process; stop it or choose another --vlm.serve_port"
            )
        await asyncio.sleep(0.2)


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed server's TIME_WAIT is free
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


async def _answers(port: int, timeout_s: float = 2.0) -> bool:
    """Whether the server on `port` answers GET /health or GET /v1/models with HTTP 200."""
    for path in ("/health", "/v1/models"):
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout_s)
        except (OSError, asyncio.TimeoutError):
            return False
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
            status_line = await asyncio.wait_for(reader.readline(), timeout_s)
            if status_line.split(b" ")[1:2] == [b"200"]:
                return True
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            writer.close()
    return False


def _tail(path: Path) -> str:
    """The log's last lines, joined on one line for an error message."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(log unreadable)"
    last = [line.strip()[:200] for line in lines if line.strip()][-_TAIL_LINES:]
    return " | ".join(last) if last else "(log is empty)"


def _replica_client(config: VLMConfig) -> OpenAIHTTPVLM:
    from steerable.vlm.openai_http import OpenAIHTTPVLM

    return OpenAIHTTPVLM(config, urls=replica_urls(config))


def _serves_here(config: VLMConfig) -> bool:
    return bool(config.model_id) and vllm_available() and bool(detect_gpus())


# `--vlm.backend vllm`: replicas launched on this machine's GPUs, then called over HTTP; `auto`'s
# second choice (no URL given, a model id, vLLM and a GPU here).
BACKEND = VLMBackend(client=_replica_client, serve=VLLMLauncher, needs_model_id=True, picks=_serves_here)
