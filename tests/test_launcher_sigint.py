"""A replica launched from a process that ignores or blocks SIGINT (a Ray worker) still stops on SIGINT."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from process_helpers import free_port

FAKE_VLLM = textwrap.dedent(
    """\
    #!{python}
    import os, sys
    args = sys.argv[1:]
    port = args[args.index("--port") + 1]
    os.execv(sys.executable, [sys.executable, "-m", "steerable.testing.server", "--port", port, "--model", args[1]])
    """
)

# Starts one replica with SIGINT disabled the way the parameter says, stops it, prints the seconds stop took.
LAUNCH = textwrap.dedent(
    """\
    import asyncio, signal, sys, time
    from pathlib import Path
    if sys.argv[1] == "ignored":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    else:
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
    from steerable.vlm import VLMConfig
    from steerable.vlm.launcher import VLLMLauncher

    async def main() -> None:
        config = VLMConfig(backend="vllm", model_id="tiny", serve_port=int(sys.argv[2]), serve_ready_timeout_s=30,
                           log_dir=Path(sys.argv[3]))
        launcher = VLLMLauncher(config, stop_grace_s=20, poll_interval_s=0.1)
        await launcher.start()
        started = time.monotonic()
        await launcher.stop()
        print(round(time.monotonic() - started, 2))

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("how", ["ignored", "blocked"])
def test_replica_stops_on_sigint_when_the_launcher_ignores_it(how: str, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "vllm").write_text(FAKE_VLLM.format(python=sys.executable))
    (bin_dir / "vllm").chmod(0o755)
    port = free_port()
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "CUDA_VISIBLE_DEVICES": "0"}
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCH, how, str(port), str(tmp_path / "logs")],
        capture_output=True, text=True, timeout=60, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout.split()[-1]) < 10, "the replica waited for the kill after the grace period"
