"""The vLLM replica launcher, driven with a fake `vllm` executable that serves the test server."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from process_helpers import free_ports, pid_alive
from steerable.errors import ConfigError, VLMError
from steerable.vlm import VLMConfig, make_vlm, open_vlm, resolve_backend
from steerable.vlm.launcher import VLLMLauncher, detect_gpus, plan_replicas
from steerable.vlm.openai_http import OpenAIHTTPVLM

# The fake takes `vllm serve MODEL ... --port P`, prints what it was given, and behaves as
# FAKE_VLLM_MODE says: ok (serve the test server), crash, hang (never ready), stubborn (ignore SIGINT).
FAKE_VLLM = textwrap.dedent(
    """\
    #!{python}
    import http.server, os, signal, sys, time
    args = sys.argv[1:]
    print("fake vllm", " ".join(args), "GPUS=" + os.environ.get("CUDA_VISIBLE_DEVICES", ""), flush=True)
    mode = os.environ.get("FAKE_VLLM_MODE", "ok")
    port = args[args.index("--port") + 1]
    if mode == "crash":
        print("RuntimeError: CUDA out of memory", flush=True)
        sys.exit(3)
    if mode == "hang":
        time.sleep(3600)
    if mode == "stubborn":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        class Ok(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200); self.end_headers()
            def log_message(self, *a):
                pass
        http.server.HTTPServer(("127.0.0.1", int(port)), Ok).serve_forever()
    os.execv(sys.executable, [sys.executable, "-m", "steerable.testing.server", "--port", port, "--model", args[1]])
    """
)


@pytest.fixture
def fake_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "vllm"
    script.write_text(FAKE_VLLM.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return script


def _config(tmp_path: Path, replicas: int = 1, **overrides: Any) -> VLMConfig:
    settings: dict[str, Any] = {
        "backend": "vllm",
        "model_id": "tiny-vlm",
        "serve_port": free_ports(replicas),
        "serve_ready_timeout_s": 30.0,
        "log_dir": tmp_path / "logs",
        "backoff_base_s": 0.0,
        **overrides,
    }
    return VLMConfig(**settings)


def test_two_replicas_one_per_gpu_serve_and_stop(
    fake_vllm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    config = _config(tmp_path, replicas=2)

    async def scenario() -> list[int]:
        async with VLLMLauncher(config, poll_interval_s=0.1) as launcher:
            pids = launcher.pids
            assert launcher.urls == [
                f"http://127.0.0.1:{config.serve_port}/v1",
                f"http://127.0.0.1:{config.serve_port + 1}/v1",
            ]
            vlm = OpenAIHTTPVLM(config, urls=launcher.urls)
            await vlm.check()
            reply = await vlm.generate_json([{"role": "user", "content": "hi"}], {"type": "object"})
            await vlm.aclose()
            assert reply == {}
        return pids

    pids = asyncio.run(scenario())
    logs = [(tmp_path / "logs" / f"vllm-replica-{i}.log").read_text() for i in range(2)]
    assert "serve tiny-vlm --host 127.0.0.1" in logs[0] and "--tensor-parallel-size 1" in logs[0]
    assert "GPUS=0" in logs[0] and "GPUS=1" in logs[1]
    assert not any(pid_alive(pid) for pid in pids)


def test_open_vlm_launches_checks_and_stops_the_replicas(
    fake_vllm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    config = _config(tmp_path)

    async def scenario() -> None:
        async with open_vlm(config) as vlm:
            assert await vlm.generate_json([{"role": "user", "content": "hi"}], {"type": "object"}) == {}

    asyncio.run(scenario())
    assert "GPUS=3" in (tmp_path / "logs" / "vllm-replica-0.log").read_text()
    with pytest.raises(ConnectionRefusedError):  # the replica is gone
        socket.create_connection(("127.0.0.1", config.serve_port), timeout=5).close()


def test_replica_that_crashes_names_its_log_and_last_lines(
    fake_vllm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("FAKE_VLLM_MODE", "crash")
    log_path = tmp_path / "logs" / "vllm-replica-0.log"
    with pytest.raises(VLMError, match="replica 0 exited with status 3") as info:
        asyncio.run(VLLMLauncher(_config(tmp_path), poll_interval_s=0.1).start())
    assert str(log_path) in str(info.value) and "CUDA out of memory" in str(info.value)


def test_replica_that_never_gets_ready_times_out_and_is_stopped(
    fake_vllm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("FAKE_VLLM_MODE", "hang")
    launcher = VLLMLauncher(_config(tmp_path, serve_ready_timeout_s=1.0), poll_interval_s=0.1)
    pids: list[int] = []

    async def scenario() -> None:
        task = asyncio.ensure_future(launcher.start())
        while not launcher.pids:
            await asyncio.sleep(0.01)
        pids.append(launcher.pids[0])
        await task

    with pytest.raises(VLMError, match="not ready after 1s.*serve_ready_timeout_s.*vllm-replica-0.log"):
        asyncio.run(scenario())
    assert not pid_alive(pids[0])


def test_replica_ignoring_sigint_is_killed_after_the_grace_period(
    fake_vllm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("FAKE_VLLM_MODE", "stubborn")

    async def scenario() -> int:
        async with VLLMLauncher(_config(tmp_path), stop_grace_s=0.5, poll_interval_s=0.1) as launcher:
            return launcher.pids[0]

    pid = asyncio.run(scenario())
    assert not pid_alive(pid)


def test_ctrl_c_stops_the_replicas(fake_vllm: Path, tmp_path: Path) -> None:
    config = _config(tmp_path)
    program = textwrap.dedent(
        f"""
        import asyncio
        from pathlib import Path
        from steerable.vlm import VLMConfig
        from steerable.vlm.launcher import VLLMLauncher

        async def main():
            config = VLMConfig(backend="vllm", model_id="m", serve_port={config.serve_port},
                               log_dir=Path({str(tmp_path / "logs")!r}))
            async with VLLMLauncher(config, poll_interval_s=0.1) as launcher:
                print("READY", launcher.pids[0], flush=True)
                await asyncio.sleep(3600)

        asyncio.run(main())
        """
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0"}
    proc = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("READY"), line
        replica = int(line.split()[1])
        assert pid_alive(replica)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not pid_alive(replica)


def test_a_port_another_process_keeps_is_one_clear_error(
    fake_vllm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    config = _config(tmp_path)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", config.serve_port))
        squatter.listen()
        launcher = VLLMLauncher(config, stop_grace_s=0.5, poll_interval_s=0.1)
        with pytest.raises(VLMError, match=f"port {config.serve_port} is in use by another process"):
            asyncio.run(launcher.start())
    assert launcher.pids == []  # nothing was started on a taken port


def test_missing_vllm_command_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing named vllm here
    with pytest.raises(VLMError, match="`vllm` command is not installed.*--vlm.base_url"):
        asyncio.run(VLLMLauncher(_config(tmp_path)).start())


def test_gpu_split_and_tensor_parallel_plan() -> None:
    gpus = ["0", "1", "2", "3"]
    plans = plan_replicas(VLMConfig(model_id="m", parallel_servers=2, serve_port=9000), gpus)
    assert [p.gpus for p in plans] == [["0", "1"], ["2", "3"]]
    assert [p.port for p in plans] == [9000, 9001]
    assert plans[1].argv[-2:] == ["--tensor-parallel-size", "2"]
    assert [p.gpus for p in plan_replicas(VLMConfig(model_id="m", num_gpus=2), gpus)] == [["0"], ["1"]]
    with pytest.raises(ConfigError, match="parallel_servers=3"):
        plan_replicas(VLMConfig(model_id="m", parallel_servers=3), gpus)
    with pytest.raises(ConfigError, match="num_gpus=8"):
        plan_replicas(VLMConfig(model_id="m", num_gpus=8), gpus)
    with pytest.raises(VLMError, match="no GPU found"):
        plan_replicas(VLMConfig(model_id="m"), [])


def test_serve_command_template() -> None:
    with_port = VLMConfig(
        model_id="org/model",
        serve_command="vllm serve {model} --port {port} --limit-mm-per-prompt '{\"image\": 4}' -tp {tp}",
    )
    assert plan_replicas(with_port, ["0"])[0].argv == [
        "vllm", "serve", "org/model", "--port", "8000", "--limit-mm-per-prompt", '{"image": 4}', "-tp", "1",
    ]  # fmt: skip
    no_port = VLMConfig(model_id="m", serve_command="sglang serve {model}", serve_port=7000)
    assert plan_replicas(no_port, ["0"])[0].argv == ["sglang", "serve", "m", "--port", "7000"]


def test_detect_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert detect_gpus() == ["2", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert detect_gpus() == []
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: a)'\necho 'GPU 1: NVIDIA H100 (UUID: b)'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert detect_gpus() == ["0", "1"]


def test_auto_backend_picks_local_vllm_when_installed_with_a_gpu(
    fake_vllm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert resolve_backend(VLMConfig(model_id="org/model")) == "vllm"
    assert resolve_backend(VLMConfig(model_id="org/model", base_url="http://127.0.0.1:9/v1")) == "openai"
    with pytest.raises(VLMError, match="pass --vlm.model_id"):
        make_vlm(VLMConfig())
