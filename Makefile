# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run run-gateway test lint typecheck bench clean

# The venv is rebuilt whenever pyproject.toml changes (the stamp is older).
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

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

test: lint typecheck
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
