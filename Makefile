# Set-up and checks. Every target creates .venv and installs what it needs on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP_TEST := $(VENV)/.installed-test
STAMP_BASE := $(VENV)/.installed-base
# The LeRobot half of the suite: lerobot 0.6 needs Python >= 3.12 and its own torch (< 2.12), so its
# tests (tests/lerobot) run in a second venv beside the first, against the real package.
# The first Python >= 3.12 that runs: on PATH (pyenv's shims answer without running), else under pyenv.
LEROBOT_PYTHON ?= $(shell for p in python3.12 $(HOME)/.pyenv/versions/3.12*/bin/python python3.13 $(HOME)/.pyenv/versions/3.13*/bin/python; do \
	$$p -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null && { command -v $$p; break; }; done)
LVENV := .venv-lerobot
LPY := $(LVENV)/bin/python
STAMP_LEROBOT := $(LVENV)/.installed-test

# The main suite's pytest-xdist workers: most of its time is subprocesses that wait (servers, signals,
# trainings on one thread), so two workers finish it in a little over half the time on a 2-core machine (514 s
# against 911 s, measured 2026-12-07).
# Each file's tests stay on one worker (tests/conftest.py). TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 2

.PHONY: demo test lint bench clean dist

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP_BASE): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q -e .
	touch $@

# torch first and pinned: the CPU wheel of this version is on local disk; an unpinned torch would
# pull a multi-GB CUDA build.
$(STAMP_TEST): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $@

$(LVENV)/bin/python:
	@test -n "$(LEROBOT_PYTHON)" || { echo "make: the LeRobot tests need Python >= 3.12 and none was found;" \
		"set LEROBOT_PYTHON=/path/to/python3.12" >&2; exit 1; }
	$(LEROBOT_PYTHON) -m venv $(LVENV)
	$(LPY) -m pip install -q --upgrade pip

# LeRobot finds plugins by distribution name (lerobot_policy_*, lerobot_env_*): ours are two small
# distributions in plugins/, released with steerable and required by its `lerobot` extra. Here their
# wheels are built from the checkout into a local wheelhouse, and the extra brings them from there
# exactly as it does from an index (the second install only refreshes them after an edit).
PLUGINS := plugins/lerobot_policy_steerable plugins/lerobot_env_steerable
WHEELHOUSE := build/plugin-wheels
$(STAMP_LEROBOT): pyproject.toml $(foreach p,$(PLUGINS),$(wildcard $(p)/pyproject.toml $(p)/*/*.py)) | $(LVENV)/bin/python
	rm -rf $(WHEELHOUSE)
	$(LPY) -m pip wheel -q --no-deps -w $(WHEELHOUSE) $(addprefix ./,$(PLUGINS))
	$(LPY) -m pip install -q -e '.[test-lerobot]' --find-links $(WHEELHOUSE)
	$(LPY) -m pip install -q --no-deps --force-reinstall $(WHEELHOUSE)/*.whl
	$(LPY) -m pip check
	touch $@

# The release's wheels: steerable and its two LeRobot plugins, at one version, into dist/.
dist: $(LVENV)/bin/python
	rm -rf dist
	$(LPY) -m pip wheel -q --no-deps -w dist . $(addprefix ./,$(PLUGINS))
	@ls dist

demo: $(STAMP_BASE)
	$(VENV)/bin/steerable demo
	@echo "steerable is installed in $(VENV), not on your PATH: run 'source $(VENV)/bin/activate' first," \
		"or call $(CURDIR)/$(VENV)/bin/steerable"

# Meta-World (tests/lerobot/test_metaworld.py) renders with MuJoCo's software back end, OSMesa: no GPU needed.
test: $(STAMP_TEST) $(STAMP_LEROBOT)
	command -v espeak-ng >/dev/null || (apt-get update -q && apt-get install -y -q espeak-ng)
	command -v tmux >/dev/null || (apt-get update -q && apt-get install -y -q tmux)
	test -x /usr/bin/chromium || (apt-get update -q && apt-get install -y -q chromium)
	dpkg -s libosmesa6 >/dev/null 2>&1 || (apt-get update -q && apt-get install -y -q libosmesa6)
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m mypy
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q --ignore=tests/lerobot -n $(TEST_WORKERS) --dist loadgroup
	MUJOCO_GL=osmesa PYOPENGL_PLATFORM=osmesa $(LPY) -m pytest -q tests/lerobot

bench: $(STAMP_TEST)
	for b in benchmarks/*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(LVENV) build dist .pytest_cache .mypy_cache .ruff_cache
