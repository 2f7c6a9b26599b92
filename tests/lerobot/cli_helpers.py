"""What the tests that run LeRobot's and steerable's commands as subprocesses share: where the commands
are, the tiny policy's settings as `--policy.*` flags, an offline environment, and a run that must pass."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["BIN", "ENV", "FLAGS", "REPO", "TINY", "run"]

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
TINY = {
    "tiny_hidden": 32, "tiny_layers": 2, "tiny_heads": 2, "tiny_vision_hidden": 16, "image_size": 16,
    "tiny_patch_size": 8, "chunk_size": 4, "n_action_steps": 4, "expert_hidden": 32, "expert_heads": 2,
    "expert_layers": 2, "tiny_vocab_size": 320, "max_length": 96, "flow_steps": 2,
}
FLAGS = [f"--policy.{k}={v}" for k, v in TINY.items()]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def run(*argv: str, timeout: int = 240) -> subprocess.CompletedProcess[str]:
    """`argv` run from the repository, offline; it must exit 0 (else its output's tail is the failure)."""
    out = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=ENV, cwd=REPO,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, f"{argv[0]} exited {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out
