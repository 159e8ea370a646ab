# Two entry points a newcomer needs: `make run` and `make test`.
# Each creates its own virtualenv in .venv and installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8080

.PHONY: run test test-fast install clean bench bench-profile

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python setup.cfg setup.py
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

run: install
	$(BIN)/gunicorn --config deploy/gunicorn.conf.py --bind $(HOST):$(PORT)

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

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
	rm -rf $(VENV) *.egg-info .pytest_cache
