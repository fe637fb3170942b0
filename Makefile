# Two commands on a fresh Debian machine: `make lab` and `make test`.
# Both install what is missing (Debian packages, the venv) and are idempotent.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.fxviz-installed
# Pinned for these machines; pyproject.toml declares the ranges users elsewhere need.
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_MARK := $(VENV)/.apt-updated

.PHONY: lab test test-fast test-e2e bench setup system-lab system-test

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@[ -x $(PY) ] || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_PINS)
	$(PY) -m pip install -q -e ".[widgets,test]"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (fxviz)" >/dev/null
	touch $(STAMP)

# Debian packages: graphviz for layouts, chromium for browser tests, node for JS tests.
system-lab:
	@command -v dot >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz; }

system-test: system-lab
	@command -v chromium >/dev/null && command -v node >/dev/null || \
	  { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium nodejs; }

lab: system-lab $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/00_quickstart.ipynb \
	  $(if $(SUDO),,--ServerApp.allow_root=True)

test: system-test $(STAMP)
	node --test tests/js/
	$(PY) -m pytest -p no:cacheprovider -ra $(PYTEST_ARGS)

test-fast: system-lab $(STAMP)
	$(PY) -m pytest -p no:cacheprovider -m "not e2e and not slow" -x -q $(PYTEST_ARGS)

# The browser tests only (JupyterLab and Notebook 7 in headless Chromium): tests marked e2e.
test-e2e: system-test $(STAMP)
	$(PY) -m pytest -p no:cacheprovider -m e2e -ra $(PYTEST_ARGS)

# Every benchmark but report_same.py, which compares two checkouts' reports (run by hand: see its docstring).
bench: system-lab $(STAMP)
	for b in bench/*.py; do [ $$b = bench/report_same.py ] && continue; echo "== $$b"; $(PY) -P $$b || exit 1; done
