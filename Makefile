# indextables_spark: build, demo and tests.
#
#   make demo              venv + install + run examples/quickstart.py
#   make test              venv + install + Azurite, start moto S3 and Azurite, run the fast tier
#                          of the suite against them (Python 3.11: every Spark-free test, classic
#                          Spark sessions on local disk, S3 and Azure; tests/tiers.py), stop them
#   make test-integration  the rest the same way (Spark Connect, the standalone cluster, the
#                          differential suites, crash trials), then `make smoke` (the wheel and the
#                          sdist built once, installed on 3.12, 3.13 and from source); every step runs,
#                          fails when any failed, naming it. CI runs both.
#   make test TESTS=tests/test_storage.py PYTEST_ARGS="-x -k azure"   a subset, extra pytest args
#                          (of the tier: FAST_TIER= / INTEGRATION_TIER= selects every test)
#   make dist              the wheel and the sdist into dist/ (python -m build), then `twine check --strict`
#                          and scripts/check_dist.py (every file of src/ in both, no tests in the sdist)
#   make smoke             `make dist` once, then the three smoke steps below (each runs; fails when any
#                          failed; SMOKE_OLDEST=0 / SMOKE_PY313=0 / SMOKE_SDIST=0: skip that step)
#   make smoke-oldest      .venv-oldest-py312: Python 3.12, the oldest supported pyspark (PYSPARK_OLDEST)
#                          installed first, then the wheel from dist/; checks pyspark was kept;
#                          runs tests/smoke (SMOKE_PYTEST_ARGS: extra pytest args for the smoke runs)
#   make smoke-py313       .venv-py313: Python 3.13, the wheel with the newest pyspark in its range;
#                          runs tests/smoke
#   make smoke-sdist       the sdist from dist/ pip-installed (built from source) in a fresh venv of the
#                          main Python, which runs the README's Quickstart (tests/smoke/test_sdist_install.py)
#   make lint              ruff check + ruff format --check over src, tests, bench, examples, docs_hooks, and mypy strict
#                          on the package (pyproject.toml [tool.mypy]); CI runs it first
#   make docs              the documentation site (mkdocs.yml, docs/) built into site/ by `mkdocs build
#                          --strict`: a broken link, anchor or API reference fails it; CI runs it after lint
#   make install           create .venv and install the package with its test and docs extras (the test
#                          extra has Playwright, for tests/test_docs_site.py: it drives the system's
#                          Chromium, /usr/bin/chromium; .ci/run installs the Debian package)
#   make emulators-start   start moto S3 + Azurite in the background (then: source .emulators/state/env.sh)
#   make emulators-stop    stop them
#   make clean             remove build outputs (site/ too), the emulators' install and state (keeps .venv)
#   make distclean         clean + remove .venv and the smoke venvs
#
# Needs: python3 (3.11), Java 17 on PATH (for PySpark), Node 20 + npm (for Azurite), for the integration
# tier Chromium (/usr/bin/chromium: tests/test_docs_site.py; .ci/run installs it), and for the smoke
# steps Python 3.12 and 3.13: scripts/find-python.sh looks for python3.12 / python3.13 on PATH, then
# in pyenv's versions directories (pyenv need not be on PATH), then asks uv; PYTHON_312=/path/to/python3.12
# and PYTHON_313=/path/to/python3.13 point at one instead. A missing one fails its step, saying so.

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
# The two tiers (tests/tiers.py marks the second `integration`; tests/test_tiers.py checks that
# these expressions select every test exactly once).
FAST_TIER := not integration
INTEGRATION_TIER := integration
# The fast tier runs in this many pytest-xdist processes (each file in one of them: --dist loadfile),
# each with its own SparkSession; 1 runs it in this process. The heaviest files first (tests/tiers.py
# HEAVY_FIRST: collected in that order, not reordered by test count)
TEST_WORKERS ?= 2
XDIST = $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder,)
# ... and the integration tier in as many, by group (tests/tiers.py xdist_group: a file, or every test
# of the Connect server / of the standalone cluster together, so each server starts once), the heaviest
# groups first (tests/tiers.py HEAVY_GROUPS_FIRST: collected in that order, not reordered by test count)
XDIST_GROUPS = $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder,)
# The main run leaves tests/smoke to the smoke steps (each runs it in its own venv).
MAIN_IGNORE := $(if $(filter tests tests/,$(TESTS)),--ignore=tests/smoke,)
SMOKE_OLDEST ?= 1
SMOKE_PY313 ?= 1
SMOKE_SDIST ?= 1
SMOKE_PYTEST_ARGS ?=
SMOKE_TESTS := tests/smoke
# run by `make smoke-sdist` only (with the main venv), not in the smoke venvs
SDIST_TEST := tests/smoke/test_sdist_install.py
# Interpreters for the smoke venvs; empty: scripts/find-python.sh finds one (when the venv is created).
PYTHON_312 ?=
PYTHON_313 ?=
# `make dist` rebuilds dist/ when what goes into the wheel or the sdist changes; the smoke venvs
# reinstall when the wheel is rebuilt. DIST_BUILT=1 (what `make smoke` gives its steps, after building
# dist/ once): dist/ is taken as it is, so one run installs one wheel even when src/ changes meanwhile.
DIST_STAMP := dist/.indextables-built
DIST_INPUTS := pyproject.toml MANIFEST.in README.md LICENSE CHANGELOG.md \
	$(shell find src -type f -not -path '*/__pycache__/*' -not -path '*.egg-info/*')

# The oldest supported pyspark: the floor of pyproject.toml's range (filter pushdown for Python data
# sources exists from 4.1), at its latest patch release on PyPI; on Python 3.12. 3.13 gets the newest
# pyspark: what a fresh `pip install` there gives. (3.11 runs the main suite with the newest pyspark.)
PYSPARK_OLDEST := 4.1.4
VENV_OLDEST := .venv-oldest-py312
OLDEST_PY := $(VENV_OLDEST)/bin/python
OLDEST_STAMP := $(VENV_OLDEST)/.indextables-installed
VENV_313 := .venv-py313
PY313_PY := $(VENV_313)/bin/python
PY313_STAMP := $(VENV_313)/.indextables-installed
# Fails when $(VENV_OLDEST)'s pyspark is not PYSPARK_OLDEST (e.g. installing the package replaced it).
CHECK_OLDEST = v=$$($(OLDEST_PY) -c 'import pyspark; print(pyspark.__version__)'); \
	if [ "$$v" != "$(PYSPARK_OLDEST)" ]; then \
	    echo "make: $(VENV_OLDEST) has pyspark $$v, expected $(PYSPARK_OLDEST) (did installing the package replace it? see the pyspark range in pyproject.toml)" >&2; \
	    exit 1; \
	fi; echo "$(VENV_OLDEST): pyspark $$v"
# Creates venv $(1) with Python $(2): $(3) (the value of variable $(5)) or else the one
# scripts/find-python.sh finds; fails naming the variable and the switch ($(4)) that skips the step.
MAKE_VENV = py="$(3)"; \
	if [ -z "$$py" ]; then \
	    py=$$(scripts/find-python.sh $(2)) || { \
	        echo "make: no Python $(2) for $(1) (see above). Install one, or point $(5) at it: make $(MAKECMDGOALS) $(5)=/path/to/python$(2) (or skip this step: $(4)=0)" >&2; exit 1; }; \
	fi; \
	v=$$("$$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || { echo "make: $(5)=$$py does not run" >&2; exit 1; }; \
	[ "$$v" = "$(2)" ] || { echo "make: $(5)=$$py is Python $$v; $(1) needs $(2)" >&2; exit 1; }; \
	echo "$(1): $$py"; "$$py" -m venv $(1)
# Runs tests/smoke with venv $(1)'s Python (Spark's workers too).
RUN_SMOKE = PYSPARK_PYTHON=$(abspath $(1)/bin/python) PYSPARK_DRIVER_PYTHON=$(abspath $(1)/bin/python) \
	$(1)/bin/python -m pytest $(SMOKE_PYTEST_ARGS) --ignore=$(SDIST_TEST) $(SMOKE_TESTS)
# Installs dist/'s wheel with the smoke extra into the venv of Python $(1), as a user would. pip keeps
# an installed release of the same version as a wheel file, so the one installed goes first.
INSTALL_WHEEL = $(1) -m pip uninstall --quiet --quiet --yes indextables_spark; \
	$(1) -m pip install --quiet "$$(ls dist/indextables_spark-*.whl)[smoke]" -c constraints.txt
NEED_JAVA = command -v java >/dev/null || { echo "make $@: java (17) is not on PATH; PySpark needs it" >&2; exit 1; }

# PySpark workers must run the venv's Python (it has the package and its dependencies).
export PYSPARK_PYTHON := $(abspath $(VENV_PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(VENV_PY))
export PYTHONDONTWRITEBYTECODE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: all install demo test test-integration lint dist smoke smoke-oldest smoke-py313 smoke-sdist oldest-install py313-install emulators-install emulators-start emulators-stop emulators-status clean distclean

all: test

$(VENV_PY):
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 is required, $(PYTHON) is {sys.version.split()[0]}"'
	$(PYTHON) -m venv $(VENV)

# Reinstalls only when pyproject.toml or constraints.txt changes (or the venv is new).
$(STAMP): pyproject.toml constraints.txt | $(VENV_PY)
	$(VENV_PY) -m pip install --quiet -e '.[test,docs]' -c constraints.txt
	touch $@

install: $(STAMP)

$(OLDEST_PY):
	@$(call MAKE_VENV,$(VENV_OLDEST),3.12,$(PYTHON_312),SMOKE_OLDEST,PYTHON_312)

# The wheel and the sdist; twine checks what an index would render and accept.
$(DIST_STAMP): $(if $(DIST_BUILT),,$(DIST_INPUTS)) | $(STAMP)
	rm -rf dist
	$(VENV_PY) -m build --quiet --outdir dist .
	$(VENV_PY) -m twine check --strict dist/*
	$(VENV_PY) scripts/check_dist.py dist
	touch $@

dist: $(DIST_STAMP)

# pyspark first, then the package: its pyspark range must keep the installed $(PYSPARK_OLDEST).
$(OLDEST_STAMP): $(DIST_STAMP) constraints.txt | $(OLDEST_PY)
	$(OLDEST_PY) -m pip install --quiet 'pyspark==$(PYSPARK_OLDEST)'
	$(call INSTALL_WHEEL,$(OLDEST_PY))
	@$(CHECK_OLDEST)
	touch $@

oldest-install: $(OLDEST_STAMP)

$(PY313_PY):
	@$(call MAKE_VENV,$(VENV_313),3.13,$(PYTHON_313),SMOKE_PY313,PYTHON_313)

$(PY313_STAMP): $(DIST_STAMP) constraints.txt | $(PY313_PY)
	$(call INSTALL_WHEEL,$(PY313_PY))
	touch $@

py313-install: $(PY313_STAMP)

demo: install
	$(VENV_PY) examples/quickstart.py

$(AZURITE):
	scripts/emulators.sh install

emulators-install: $(AZURITE)

# The fast tier (tests/tiers.py) against the emulators, in the main venv.
test: install emulators-install
	@$(NEED_JAVA)
	VENV_PYTHON=$(abspath $(VENV_PY)) scripts/emulators.sh run -- \
	    $(VENV_PY) -m pytest -m "$(FAST_TIER)" $(XDIST) $(PYTEST_ARGS) $(MAIN_IGNORE) $(TESTS)

# The integration tier (main venv, emulators), then the smoke suite on each other Python; every
# step runs, the exit code is non-zero when any failed.
test-integration: install emulators-install
	@$(NEED_JAVA)
	main=0; VENV_PYTHON=$(abspath $(VENV_PY)) scripts/emulators.sh run -- \
	    $(VENV_PY) -m pytest -m "$(INTEGRATION_TIER)" $(XDIST_GROUPS) $(PYTEST_ARGS) $(MAIN_IGNORE) $(TESTS) || main=$$?; \
	smoke=0; $(MAKE) --no-print-directory smoke || smoke=$$?; \
	[ $$main = 0 ] || echo "make test-integration: the integration tier failed (pytest exit code $$main)" >&2; \
	[ $$main = 0 ] && [ $$smoke = 0 ]

# dist/ built once, then the smoke steps SMOKE_OLDEST / SMOKE_PY313 / SMOKE_SDIST leave on; each runs,
# fails naming the ones that failed.
smoke:
	$(MAKE) --no-print-directory dist || { echo "make: make dist failed: nothing for the smoke steps to install" >&2; exit 1; }
	oldest=0; if [ "$(SMOKE_OLDEST)" = 1 ]; then $(MAKE) --no-print-directory DIST_BUILT=1 smoke-oldest || oldest=$$?; fi; \
	py313=0; if [ "$(SMOKE_PY313)" = 1 ]; then $(MAKE) --no-print-directory DIST_BUILT=1 smoke-py313 || py313=$$?; fi; \
	sdist=0; if [ "$(SMOKE_SDIST)" = 1 ]; then $(MAKE) --no-print-directory DIST_BUILT=1 smoke-sdist || sdist=$$?; fi; \
	[ $$oldest = 0 ] || echo "make: the smoke suite on Python 3.12 with pyspark $(PYSPARK_OLDEST) failed (make smoke-oldest)" >&2; \
	[ $$py313 = 0 ] || echo "make: the smoke suite on Python 3.13 failed (make smoke-py313)" >&2; \
	[ $$sdist = 0 ] || echo "make: the sdist's install and Quickstart failed (make smoke-sdist)" >&2; \
	[ $$oldest = 0 ] && [ $$py313 = 0 ] && [ $$sdist = 0 ]

# ruff (pyproject.toml [tool.ruff]) over the package, tests, benches and examples.
lint: install
	$(VENV_PY) -m ruff check src tests bench examples docs_hooks
	$(VENV_PY) -m ruff format --check src tests bench examples docs_hooks
	$(VENV_PY) -m mypy

# The documentation site (mkdocs.yml, pages under docs/) into site/. --strict: any warning fails it,
# so a broken link or anchor, a page missing from the nav or an API reference mkdocstrings cannot
# resolve fails the build; docs_hooks/options_table.py fills the options table from config/registry.py.
# The site works opened from disk (site/index.html) and served; tests/test_docs_site.py (integration
# tier) checks both in headless Chromium.
.PHONY: docs
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV_PY) -m mkdocs build --strict --site-dir site

# tests/smoke on Python 3.12 with pyspark $(PYSPARK_OLDEST).
smoke-oldest: $(OLDEST_STAMP)
	@$(NEED_JAVA)
	@$(CHECK_OLDEST)
	$(call RUN_SMOKE,$(VENV_OLDEST))

# tests/smoke on Python 3.13 with the newest pyspark in range.
smoke-py313: $(PY313_STAMP)
	@$(NEED_JAVA)
	$(call RUN_SMOKE,$(VENV_313))

# The sdist pip-installed into a fresh venv (under pytest's tmp) by the main venv's pytest, built from
# source as pip does where no wheel fits, then the README's Quickstart run with it.
smoke-sdist: $(DIST_STAMP) | $(STAMP)
	@$(NEED_JAVA)
	INDEXTABLES_SDIST="$(abspath $(wildcard dist/indextables_spark-*.tar.gz))" \
	    $(VENV_PY) -m pytest $(SMOKE_PYTEST_ARGS) $(SDIST_TEST)

emulators-start: install emulators-install
	VENV_PYTHON=$(abspath $(VENV_PY)) scripts/emulators.sh start
	@echo "now: source .emulators/state/env.sh   (then run pytest; 'make emulators-stop' when done)"

emulators-stop:
	scripts/emulators.sh stop

emulators-status:
	scripts/emulators.sh status

clean:
	-scripts/emulators.sh stop
	rm -rf .emulators build dist site .pytest_cache src/*.egg-info
	find . \( -path ./$(VENV) -o -path ./$(VENV_OLDEST) -o -path ./$(VENV_313) \) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

# .venv-oldest: the 3.11 venv of earlier versions of this Makefile.
distclean: clean
	rm -rf $(VENV) $(VENV_OLDEST) $(VENV_313) .venv-oldest
