# vigil: `make run` runs the daemon against the built-in simulator; `make test` runs every check.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# where `make run` keeps runner_state.json, logs/ and the rest (make run STATE_DIR=/some/where)
STATE_DIR ?= vigil-state

.PHONY: run test lint typecheck pytest compile fuzz bench peers-venv clean docker

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH (or make PYTHON=/path/to/python3.11)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# uv resolves and installs the same packages as pip in half the time (24 s against 52 s here);
	# compiled as pip does: where PYTHONDONTWRITEBYTECODE is set (it is here), a venv without .pyc
	# files compiles every module it imports again in every process (the suite took 829 s, not 500)
	$(BIN)/python -m pip install --quiet uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[dev]'
	touch $(STAMP)

# the project's own modules compiled as the venv's are (an editable install compiles none): where
# PYTHONDONTWRITEBYTECODE is set (here and on CI) no process caches them, so every daemon, command
# and pool worker compiled them again, 0.9 s of CPU a daemon start (3.3 s to 2.3 s); up to date
# after the first time, this takes under a second. The packages are import-linter's root_packages
# (pyproject.toml), read when compile runs, so one added there is compiled too; $(PYTHON) is the
# 3.11 the venv is made from (tomllib), and the first make needs it before the venv exists
PACKAGES = $(or $(shell $(PYTHON) -c 'import tomllib; print(*tomllib.loads(open("pyproject.toml").read())["tool"]["importlinter"]["root_packages"])'),$(error cannot read root_packages from pyproject.toml with $(PYTHON)))
compile: $(STAMP)
	$(BIN)/python -m compileall -q -j 0 -x '/\.venv' $(PACKAGES) tests bench

run: $(STAMP) compile
	$(BIN)/vigil --state-dir $(STATE_DIR) run --sim

# the type check runs beside the suite, its output shown after it: alone, mypy kept one core busy
# for 77 s on a clean clone while the other stayed idle, and the suite leaves some idle time too.
# A background job of a script ignores Ctrl-C: the trap stops it with the suite
test: $(STAMP) lint compile
	@log=$$(mktemp -t vigil-mypy.XXXXXX); \
	$(BIN)/mypy . >"$$log" 2>&1 & typed=$$!; \
	trap 'kill $$typed 2>/dev/null; rm -f "$$log"; exit 130' INT TERM HUP; \
	./scripts/ensure-chromium && $(SUITE); suite=$$?; \
	wait $$typed; types=$$?; trap - INT TERM HUP; \
	echo "mypy (run beside the suite):"; cat "$$log"; rm -f "$$log"; \
	test $$suite -eq 0 -a $$types -eq 0

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy .

SUITE = $(BIN)/pytest -q -n 3 --dist loadfile
pytest: $(STAMP) compile
	./scripts/ensure-chromium
	$(SUITE)

# the property tests (the files with @given) at 1000 examples each, or a test's own larger count
# (profile "deep": tests/conftest.py, tests/property_budget.py); make test runs each at most 100
fuzz: $(STAMP) compile
	HYPOTHESIS_PROFILE=deep $(BIN)/pytest -q -p xdist -n 2 --timeout 1800 $$(grep -rl --include='test_*.py' '@given' tests | sort)

bench: $(STAMP) compile
	$(BIN)/python -m bench

# the peer benchmark's venv (bench_peers skips a peer that is not installed here)
# python3.12 on the PATH, else a pyenv-installed 3.12 (pyenv's shim refuses a version not selected)
PEER_PY ?= $(shell (PYENV_VERSION=3.12 command -v python3.12 >/dev/null 2>&1 && python3.12 -c 'import sys' 2>/dev/null && echo python3.12) || ls -d $$HOME/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | tail -n 1 || echo python3.12)
peers-venv:
	test -x bench/.venv-peer/bin/python || $(PEER_PY) -m venv bench/.venv-peer
	bench/.venv-peer/bin/python -m pip install --quiet backtesting nautilus_trader

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
