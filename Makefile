# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run run-gateway setup test lint typecheck bench clean

# Parallel pytest workers for `make test` (pytest-xdist). More than cores: most tests wait on
# servers and subprocesses, not on the CPU. `TEST_WORKERS=0` runs in one process.
TEST_WORKERS ?= 4

# The venv is rebuilt whenever pyproject.toml changes (the stamp is older).
$(STAMP): pyproject.toml
	PYTHON=$(PYTHON) scripts/setup --venv

# The venv plus what the tests need from the machine (Chromium, PostgreSQL running).
setup:
	PYTHON=$(PYTHON) scripts/setup

# The travel back office on SQLite in .charter/: print its demo API keys, then serve it.
run: $(STAMP)
	$(BIN)/python -m examples.travel
	$(BIN)/charter serve examples.travel:host

# The same demo in front of the official filesystem MCP server (npm), serving a temporary
# folder as the fs.* tools under charter's policy (docs/gateway.md).
run-gateway: $(STAMP)
	$(BIN)/python -m examples.travel
	@dir="$$(mktemp -d)" && $(BIN)/python -m examples.gateway "$$dir" \
		&& $(BIN)/charter serve examples.travel:host --upstreams "$$dir/upstreams.toml"

lint: $(STAMP)
	$(BIN)/ruff check src tests examples bench
	$(BIN)/ruff format --check src tests examples bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy src examples

# Most tests in parallel; the `serial` ones (PostgreSQL faults, crashes, the browser) alone
# after. Either run fails `make test`, including pytest's exit 5 (no test collected).
test: setup lint typecheck
	$(BIN)/python -m pytest -m "not serial" -n $(TEST_WORKERS) --dist loadfile
	$(BIN)/python -m pytest -m serial

# The throughput cases need the bench extra (FastAPI, FastMCP) and Debian's wrk.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	@command -v wrk >/dev/null || scripts/install-wrk
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
