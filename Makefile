# The two commands of the README. Both set up what they need on a fresh machine.
#   make demo   - the local control plane, the operator and three apps, live
#   make test   - the whole test suite (unit, integration on a real control plane, real nodes
#                 running real Spark, conformance); `devcluster prepare` installs the Debian
#                 packages (root) and builds the binaries and images it needs, once

PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test test-oldest-kubernetes lint crds
demo: $(STAMP)
	$(VENV)/bin/sparkop demo $(DEMO_ARGS)

test: $(STAMP)
	@# Only what the first tests need (packages, the control plane, the real-node binaries, the images).
	$(VENV)/bin/python -m devcluster prepare --stage first
	@# Two pytest processes side by side: the real-node tests in one, the rest in the other
	@# (tests/run_suite.py; PYTEST_ARGS=--serial for one process). Beside them, at nice 19, what only some
	@# tests need: helm, Volcano, Kueue, scheduler-plugins, Traefik (`prepare --stage later`), Airflow's venv
	@# and kubeflow's spark-operator for the live swap (tests/support/background_builds.py); the tests
	@# marked needs_build run last and wait for it.
	$(VENV)/bin/python tests/run_suite.py $(PYTEST_ARGS)

# `make test` runs on the newest Kubernetes release devcluster/gobuild/versions.env pins (the default);
# this runs the integration tests and the real-node tests below on the oldest supported one, building
# its binaries first (into cache directories of their own). Not in CI: both releases' builds and runs
# would not fit its budget.
OLDEST_KUBERNETES_TESTS := tests/integration tests/e2e/test_spark_pi.py
test-oldest-kubernetes: $(STAMP)
	SPARKOP_KUBERNETES=oldest $(VENV)/bin/python -m devcluster prepare --stage first
	SPARKOP_KUBERNETES=oldest $(VENV)/bin/python tests/run_suite.py $(OLDEST_KUBERNETES_TESTS) $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy

crds: $(STAMP)
	$(VENV)/bin/sparkop crds --out crds

# A fresh machine's traps get one clear line each: no or too old a python3, and a python3 without
# its venv module (Debian/Ubuntu ship it apart), which leaves a .venv without pip behind.
$(STAMP): pyproject.toml tests/constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "error: sparkop needs Python 3.11+, and '$(PYTHON)' is $$($(PYTHON) --version 2>/dev/null || echo "not on PATH");" \
	       "install one, or name it: make $(MAKECMDGOALS) PYTHON=python3.12" >&2; exit 1; }
	@$(VENV)/bin/python -m pip --version >/dev/null 2>&1 || { rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); } || { rm -rf $(VENV); \
	  echo "error: '$(PYTHON) -m venv' failed; on Debian/Ubuntu install the venv module:" \
	       "sudo apt-get install python3-venv (or python3.X-venv for your version)" >&2; exit 1; }
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test]' -c tests/constraints.txt
	@# The editable install maps only the operator's packages (pyproject's packages.find): devcluster/,
	@# tests/ and bench/ are development tools the wheel and the image leave out. A .pth file (read by
	@# site at every start) puts this checkout on the venv's sys.path, so `python -m devcluster`,
	@# `import tests.support...` and bench/ work from any directory, as from the repository root.
	$(VENV)/bin/python -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_path("purelib"), "sparkop-checkout.pth").write_text("$(CURDIR)\n")'
	touch $(STAMP)
