# indextables_spark: build, demo and tests.
#
#   make demo              venv + install + run examples/quickstart.py
#   make test              venv + install + Azurite, start moto S3 and Azurite, run the whole
#                          pytest suite against them, stop them (always); then `make smoke-oldest`;
#                          fails when either fails (SMOKE_OLDEST=0: skip the second step)
#   make test TESTS=tests/test_storage.py PYTEST_ARGS="-x -k azure"   a subset, extra pytest args
#   make smoke-oldest      .venv-oldest with the oldest supported pyspark (4.1.x, PYSPARK_OLDEST) installed
#                          first, then the package; checks pyspark was kept; runs tests/smoke with it
#                          (SMOKE_PYTEST_ARGS: extra pytest args for this run)
#   make lint              ruff check + ruff format --check over src, tests, bench, examples, and mypy strict
#                          on storage/, log/, split/ (pyproject.toml [tool.mypy]); CI runs it first
#   make install           create .venv and install the package with its test extras
#   make emulators-start   start moto S3 + Azurite in the background (then: source .emulators/state/env.sh)
#   make emulators-stop    stop them
#   make clean             remove build outputs, the emulators' install and state (keeps .venv)
#   make distclean         clean + remove .venv and .venv-oldest
#
# Needs: python3 (3.11), Java 17 on PATH (for PySpark), Node 20 + npm (for Azurite).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

PYTHON ?= python3
VENV := .venv
VENV_PY := $(VENV)/bin/python
STAMP := $(VENV)/.indextables-installed
AZURITE := .emulators/node_modules/.bin/azurite-blob
TESTS ?= tests
PYTEST_ARGS ?=
# The main run leaves tests/smoke to the oldest-pyspark step (it runs it with .venv-oldest).
MAIN_IGNORE := $(if $(filter tests tests/,$(TESTS)),--ignore=tests/smoke,)
SMOKE_OLDEST ?= 1
SMOKE_PYTEST_ARGS ?=

# The oldest supported pyspark: the floor of pyproject.toml's range (filter pushdown for Python data
# sources exists from 4.1), at its latest patch release on PyPI.
PYSPARK_OLDEST := 4.1.4
PYTHON_OLDEST ?= python3.11
VENV_OLDEST := .venv-oldest
OLDEST_PY := $(VENV_OLDEST)/bin/python
OLDEST_STAMP := $(VENV_OLDEST)/.indextables-installed
SMOKE_TESTS := tests/smoke
# Fails when .venv-oldest's pyspark is not PYSPARK_OLDEST (e.g. installing the package replaced it).
CHECK_OLDEST = v=$$($(OLDEST_PY) -c 'import pyspark; print(pyspark.__version__)'); \
	if [ "$$v" != "$(PYSPARK_OLDEST)" ]; then \
	    echo "make: $(VENV_OLDEST) has pyspark $$v, expected $(PYSPARK_OLDEST) (did installing the package replace it? see the pyspark range in pyproject.toml)" >&2; \
	    exit 1; \
	fi; echo "$(VENV_OLDEST): pyspark $$v"

# PySpark workers must run the venv's Python (it has the package and its dependencies).
export PYSPARK_PYTHON := $(abspath $(VENV_PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(VENV_PY))
export PYTHONDONTWRITEBYTECODE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: all install demo test lint smoke-oldest oldest-install emulators-install emulators-start emulators-stop emulators-status clean distclean

all: test

$(VENV_PY):
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 is required, $(PYTHON) is {sys.version.split()[0]}"'
	$(PYTHON) -m venv $(VENV)

# Reinstalls only when pyproject.toml or constraints.txt changes (or the venv is new).
$(STAMP): pyproject.toml constraints.txt | $(VENV_PY)
	$(VENV_PY) -m pip install --quiet -e '.[test]' -c constraints.txt
	touch $@

install: $(STAMP)

$(OLDEST_PY):
	$(PYTHON_OLDEST) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 is required, $(PYTHON_OLDEST) is {sys.version.split()[0]}"'
	$(PYTHON_OLDEST) -m venv $(VENV_OLDEST)

# pyspark first, then the package: its pyspark range must keep the installed $(PYSPARK_OLDEST).
$(OLDEST_STAMP): pyproject.toml constraints.txt | $(OLDEST_PY)
	$(OLDEST_PY) -m pip install --quiet 'pyspark==$(PYSPARK_OLDEST)'
	$(OLDEST_PY) -m pip install --quiet -e '.[test]' -c constraints.txt
	@$(CHECK_OLDEST)
	touch $@

oldest-install: $(OLDEST_STAMP)

demo: install
	$(VENV_PY) examples/quickstart.py

$(AZURITE):
	scripts/emulators.sh install

emulators-install: $(AZURITE)

# The main suite (main venv, emulators), then the smoke suite on the oldest pyspark; both always
# run, the exit code is non-zero when either failed.
test: install emulators-install
	@command -v java >/dev/null || { echo "make test: java (17) is not on PATH; PySpark needs it" >&2; exit 1; }
	main=0; VENV_PYTHON=$(abspath $(VENV_PY)) scripts/emulators.sh run -- \
	    $(VENV_PY) -m pytest $(PYTEST_ARGS) $(MAIN_IGNORE) $(TESTS) || main=$$?; \
	smoke=0; if [ "$(SMOKE_OLDEST)" = 1 ]; then $(MAKE) --no-print-directory smoke-oldest || smoke=$$?; fi; \
	[ $$main = 0 ] || echo "make test: the main suite failed (pytest exit code $$main)" >&2; \
	[ $$smoke = 0 ] || echo "make test: the smoke suite on pyspark $(PYSPARK_OLDEST) failed" >&2; \
	[ $$main = 0 ] && [ $$smoke = 0 ]

# ruff (pyproject.toml [tool.ruff]) over the package, tests, benches and examples.
lint: install
	$(VENV_PY) -m ruff check src tests bench examples
	$(VENV_PY) -m ruff format --check src tests bench examples
	$(VENV_PY) -m mypy

# tests/smoke with pyspark $(PYSPARK_OLDEST): Spark's workers run .venv-oldest's Python too.
smoke-oldest: $(OLDEST_STAMP)
	@command -v java >/dev/null || { echo "make smoke-oldest: java (17) is not on PATH; PySpark needs it" >&2; exit 1; }
	@$(CHECK_OLDEST)
	PYSPARK_PYTHON=$(abspath $(OLDEST_PY)) PYSPARK_DRIVER_PYTHON=$(abspath $(OLDEST_PY)) \
	    $(OLDEST_PY) -m pytest $(SMOKE_PYTEST_ARGS) $(SMOKE_TESTS)

emulators-start: install emulators-install
	VENV_PYTHON=$(abspath $(VENV_PY)) scripts/emulators.sh start
	@echo "now: source .emulators/state/env.sh   (then run pytest; 'make emulators-stop' when done)"

emulators-stop:
	scripts/emulators.sh stop

emulators-status:
	scripts/emulators.sh status

clean:
	-scripts/emulators.sh stop
	rm -rf .emulators build dist .pytest_cache src/*.egg-info
	find . \( -path ./$(VENV) -o -path ./$(VENV_OLDEST) \) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(VENV_OLDEST)
