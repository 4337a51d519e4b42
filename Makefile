# indextables_spark: build, demo and tests.
#
#   make demo              venv + install + run examples/quickstart.py
#   make test              venv + install + Azurite, start moto S3 and Azurite, run the whole
#                          pytest suite against them, stop them (always); exit code = pytest's
#   make test TESTS=tests/test_storage.py PYTEST_ARGS="-x -k azure"   a subset, extra pytest args
#   make install           create .venv and install the package with its test extras
#   make emulators-start   start moto S3 + Azurite in the background (then: source .emulators/state/env.sh)
#   make emulators-stop    stop them
#   make clean             remove build outputs, the emulators' install and state (keeps .venv)
#   make distclean         clean + remove .venv
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

# PySpark workers must run the venv's Python (it has the package and its dependencies).
export PYSPARK_PYTHON := $(abspath $(VENV_PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(VENV_PY))
export PYTHONDONTWRITEBYTECODE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: all install demo test emulators-install emulators-start emulators-stop emulators-status clean distclean

all: test

$(VENV_PY):
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 is required, $(PYTHON) is {sys.version.split()[0]}"'
	$(PYTHON) -m venv $(VENV)

# Reinstalls only when pyproject.toml changes (or the venv is new).
$(STAMP): pyproject.toml | $(VENV_PY)
	$(VENV_PY) -m pip install --quiet -e '.[test]'
	touch $@

install: $(STAMP)

demo: install
	$(VENV_PY) examples/quickstart.py

$(AZURITE):
	scripts/emulators.sh install

emulators-install: $(AZURITE)

test: install emulators-install
	@command -v java >/dev/null || { echo "make test: java (17) is not on PATH; PySpark needs it" >&2; exit 1; }
	VENV_PYTHON=$(abspath $(VENV_PY)) scripts/emulators.sh run -- $(VENV_PY) -m pytest $(PYTEST_ARGS) $(TESTS)

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
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
