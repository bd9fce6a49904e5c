# The two commands of the README. Both set up what they need on a fresh machine.
#   make demo   - the local control plane, the operator and three apps, live
#   make test   - the whole test suite (unit, integration on a real control plane, conformance)

PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test lint crds
demo: $(STAMP)
	$(VENV)/bin/sparkop demo $(DEMO_ARGS)

test: $(STAMP)
	$(VENV)/bin/python -m devcluster build
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy

crds: $(STAMP)
	$(VENV)/bin/sparkop crds --out crds

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	touch $(STAMP)
