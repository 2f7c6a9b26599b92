"""The LeRobot half of the suite: run in .venv-lerobot (Python 3.12, the real lerobot 0.6), never skipped.

`make test` runs these with `.venv-lerobot/bin/python -m pytest tests/lerobot`; the main venv's run
ignores this folder. A missing lerobot is an error here, not a skip.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing from the Hub: tiny models built from configs
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # gym-pusht draws with pygame, headless

import lerobot  # noqa: E402,F401  (fails the collection when lerobot is missing)
