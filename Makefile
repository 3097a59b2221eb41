# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run run-gateway setup test test-serial test-faults test-browser lint typecheck bench clean

# Parallel pytest workers for `make test` (pytest-xdist): four per core of a 2-core machine.
# Most tests wait on servers and subprocesses, and beside other CPU-bound processes more
# workers get the suite a larger share of the CPU (with two `yes` beside it: 5 min 43 s and
# 6 min 17 s with 8 workers, 6 min 55 s with 4; quiet: 4 min 31 s against 4 min 17 s).
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

# Lint first (seconds); then most tests in parallel; then the `serial` ones, in two pytest
# processes side by side with mypy beside them: the PostgreSQL fault tests (restarts, ended
# connections) and the browser tests, which serve an in-memory host and never touch
# PostgreSQL, so a restart cannot disturb them. Both mostly wait (on the server, on the
# browser), so the serial part takes as long as the longer of the two rather than their sum,
# and mypy's half minute of CPU (when its cache is cold) costs no wall time there (and not
# earlier, where tests/test_typing.py runs mypy on the same cache). Any failure fails
# `make test` (make waits for the other jobs, then exits non-zero), including pytest's exit 5
# (no test collected). README "Running the tests".
test: setup lint
	$(PYTEST) -m "not serial" -n $(TEST_WORKERS) --dist loadfile
	$(MAKE) --no-print-directory -j3 typecheck test-faults test-browser

# Only the files that mark a test `serial` are collected: collecting the whole suite to pick
# a dozen tests costs seconds of CPU (every test module imported) on the run's critical path.
# A file is found by the text `mark.serial` in it (`pytestmark = pytest.mark.serial`,
# `@pytest.mark.serial`, `marks=pytest.mark.serial`). A serial file that marks `browser` holds
# browser tests only (its `pytestmark`), so the fault run leaves it out rather than import
# Playwright for nothing.
SERIAL_FILES = $(shell grep -rlE --include='test_*.py' 'mark\.serial' tests)
SERIAL_BROWSER_FILES = $(filter $(shell grep -rlE --include='test_*.py' 'mark\.browser' tests),$(SERIAL_FILES))

# Both serial parts, one after the other (`make -j2 test-serial` runs them side by side).
test-serial: test-faults test-browser

test-faults: $(STAMP)
	$(PYTEST) -m "serial and not browser" $(filter-out $(SERIAL_BROWSER_FILES),$(SERIAL_FILES))

test-browser: $(STAMP)
	$(PYTEST) -m "serial and browser" $(SERIAL_BROWSER_FILES)

# The throughput cases need the bench extra (FastAPI, FastMCP) and Debian's wrk.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	@command -v wrk >/dev/null || scripts/install-wrk
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
