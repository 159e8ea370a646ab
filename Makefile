# Two entry points a newcomer needs: `make run` and `make test`.
# Each creates its own virtualenv in .venv and installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8080

.PHONY: run test test-fast lint install programs clients clean bench bench-profile

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python setup.cfg setup.py
	$(BIN)/pip install --quiet -e '.[test,otel]'
	touch $@

install: $(VENV)/.installed

run: install
	$(BIN)/gunicorn --config deploy/gunicorn.conf.py --bind $(HOST):$(PORT)

test: install programs clients lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# ruff's settings are in pyproject.toml; `ruff format .` and `ruff check --fix .` mend most findings.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The system programs the tests start (nginx, redis-server, ...), from Debian's packages where
# this user may install them; else the tests that need one skip, naming it (fail under CI=true).
programs:
	@bash tests/install-programs.sh

# The real clients some tests run (Claude Code, Codex), pinned in tests/clients/package.json and
# installed with npm into .clients/. Without npm their tests skip (and fail under CI=true).
CLIENTS := .clients

$(CLIENTS)/.installed: tests/clients/package.json
	@if command -v npm >/dev/null 2>&1; then \
		mkdir -p $(CLIENTS) && cp tests/clients/package.json $(CLIENTS)/package.json && \
		npm install --prefix $(CLIENTS) --no-package-lock --no-audit --no-fund --loglevel=error && \
		touch $@; \
	else \
		echo "npm not found: the Claude Code and Codex CLIs are not installed, so their tests skip" \
			"(install Node.js with npm, then make clients)"; \
	fi

clients: $(CLIENTS)/.installed

# The edit-test loop: all but the tests marked slow (deploy, fuzz, load; setup.cfg).
test-fast: install
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

# The benchmark (bench/README.md): bridge vs a bare reference relay vs the upstream.
# Needs wrk from the OS packages; the profiler goes into the venv, not into setup.cfg.
$(VENV)/.bench-tools: $(VENV)/.installed
	$(BIN)/pip install --quiet pyinstrument
	touch $@

bench: $(VENV)/.bench-tools
	$(BIN)/python -m bench $(BENCH_ARGS)

bench-profile: $(VENV)/.bench-tools
	$(BIN)/python -m bench.profile $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(CLIENTS) *.egg-info .pytest_cache
