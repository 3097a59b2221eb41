# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run run-gateway setup test test-serial test-browser lint typecheck bench clean

# Parallel pytest workers for `make test` (pytest-xdist): four per core of a 2-core machine.
# Most tests wait on servers and subprocesses, so more workers than cores get the suite a
# larger share of a busy machine, but each worker collects the whole suite first; twelve
# were slower than eight (README "Running the tests" has the measurements).
# `TEST_WORKERS=0` runs in one process.
TEST_WORKERS ?= 8

# pytest caches bytecode even where the shell sets PYTHONDONTWRITEBYTECODE (cleared here):
# each worker and the serial run import and assertion-rewrite every test module, about 6 s
# of CPU per process without the cached .pyc files (git ignores __pycache__/); xdist's
# workers cache as this process does. The programs the tests start write none (tests/conftest.py says why): scripts/setup
# compiles src/ and examples/ for them ahead.
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest

# The venv is rebuilt whenever pyproject.toml changes (the stamp is older).
$(STAMP): pyproject.toml
	PYTHON=$(PYTHON) scripts/setup --venv

# The venv plus what the tests need from the machine (Chromium, PostgreSQL running).
setup:
	PYTHON=$(PYTHON) scripts/setup

# More `charter serve` options for `make run` and `make run-gateway` (`SERVE_OPTIONS='--port 8800'`).
SERVE_OPTIONS ?=

# The travel back office on SQLite in .charter/: print its demo API keys, then serve it.
run: $(STAMP)
	$(BIN)/python -m examples.travel
	$(BIN)/charter serve examples.travel:host $(SERVE_OPTIONS)

# The same demo in front of the official filesystem MCP server (npm), serving a temporary
# folder as the fs.* tools under charter's policy (docs/gateway.md). The folder is removed
# when the server stops: Ctrl-C reaches the server and this shell alike; the shell runs its
# INT trap once the server has exited (it waits for its foreground command), and exiting
# runs the EXIT trap. TERM and HUP (a closed terminal) end the same way.
run-gateway: $(STAMP)
	$(BIN)/python -m examples.travel
	@dir="$$(mktemp -d)" && trap 'rm -rf "$$dir"' EXIT && trap 'exit 130' INT TERM HUP \
		&& $(BIN)/python -m examples.gateway "$$dir" \
		&& $(BIN)/charter serve examples.travel:host --upstreams "$$dir/upstreams.toml" \
			$(SERVE_OPTIONS)

lint: $(STAMP)
	$(BIN)/ruff check src tests examples bench
	$(BIN)/ruff format --check src tests examples bench
	$(BIN)/lint-imports

# mypy checks tests/ in one run that resolves imports as pytest does. pytest's default
# `prepend` mode puts a test file's folder on sys.path and imports the file by its bare name,
# so tests import their folder's helpers bare (`from mcp_support import ...`) and shared ones
# by package path (`from tests.builders import ...`). So MYPYPATH holds every folder (and this
# checkout's src/, which `mypy src` checks, whatever venv runs mypy), and each file is passed
# as a module by its bare name, but by its package path if it is a conftest.py (each is
# `conftest` to pytest, and a run cannot hold one name twice) or if tests import it so (nor
# can a run give one file two names: mypy says so of a file missing from TESTS_BY_PACKAGE).
TEST_DIRS = tests $(patsubst %/,%,$(sort $(dir $(wildcard tests/*/*.py))))
TEST_FILES = $(wildcard $(addsuffix /*.py,$(TEST_DIRS)))
TESTS_BY_PACKAGE = $(filter %/conftest.py,$(TEST_FILES)) tests/builders.py tests/doc_blocks.py \
	tests/test_public_api.py tests/unsendable_content.py tests/effects/kit.py tests/host/test_host_tenancy.py \
	tests/mcp/test_mcp_stored_events.py tests/store/round_trips.py \
	tests/store/store_records.py tests/store/test_sql_concurrency.py
TEST_MODULES = $(subst /,.,$(TESTS_BY_PACKAGE:.py=)) \
	$(notdir $(basename $(filter-out $(TESTS_BY_PACKAGE),$(TEST_FILES))))
space := $() $()

typecheck: $(STAMP)
	$(BIN)/mypy src examples
	@echo "MYPYPATH=src:$(subst $(space),:,$(TEST_DIRS)) $(BIN)/mypy -m ... ($(words $(TEST_MODULES)) modules)"
	@MYPYPATH=src:$(subst $(space),:,$(TEST_DIRS)) $(BIN)/mypy $(addprefix -m ,$(TEST_MODULES))

# Lint first (seconds); then every test but the `serial` ones in parallel, the browser
# tests included (their servers keep their data in memory); then the `serial` ones, the
# PostgreSQL fault tests (restarts, ended connections), which no other test may run beside,
# with mypy beside them (not earlier, where tests/test_typing.py runs mypy on the same
# cache): they mostly wait on the server's restarts, which hides much of mypy's 45 s of CPU
# when its cache is cold (30 s for src/ and examples/, 15 s for tests/; 3 s warm). Any
# failure fails `make test` (make waits for the other job, then exits non-zero), including
# pytest's exit 5 (no test collected). README "Running the tests".
test: setup lint
	$(PYTEST) -m "not serial" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
	$(MAKE) --no-print-directory -j2 typecheck test-serial

# Only the files that mark a test `serial` are collected: collecting the whole suite to pick
# a handful of tests costs seconds of CPU (every test module imported) on the run's critical
# path. A file is found by the text `mark.serial` in it (`pytestmark = pytest.mark.serial`,
# `@pytest.mark.serial`, `marks=pytest.mark.serial`).
SERIAL_FILES = $(shell grep -rlE --include='test_*.py' 'mark\.serial' tests)
BROWSER_FILES = $(shell grep -rlE --include='test_*.py' 'mark\.browser' tests)

test-serial: $(STAMP)
	$(PYTEST) -m serial $(SERIAL_FILES)

# The console in headless Chromium alone (`make test` runs these in its parallel run).
test-browser: $(STAMP)
	$(PYTEST) -m browser $(BROWSER_FILES)

# The throughput cases need the bench extra (FastAPI, FastMCP) and Debian's wrk.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	@command -v wrk >/dev/null || scripts/install-wrk
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
