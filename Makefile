# Two commands for a fresh machine: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# torch is installed before the project so pip never resolves a multi-GB build by itself.
# On a GPU machine use your own: `make test TORCH_SPEC=torch` (or any build you prefer).
TORCH_SPEC ?= torch==2.13.0

.PHONY: demo test lab lint bench clean venv

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.torch: $(VENV)/bin/python
	@$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q "$(TORCH_SPEC)"
	@touch $@

venv: $(VENV)/.torch

$(VENV)/.installed-demo: $(VENV)/.torch pyproject.toml
	$(PIP) install -q ".[test]"
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.torch pyproject.toml
	$(PIP) install -q -e ".[test,browser]"
	@touch $@

demo: $(VENV)/.installed-demo
	$(PY) -m torchmagic.notebook_run demo.ipynb --html demo.html

test: $(VENV)/.installed-dev
	$(PY) -m pytest -q tests

lab: $(VENV)/.installed-dev
	$(VENV)/bin/jupyter lab demo.ipynb

lint: venv
	$(VENV)/bin/ruff check torchmagic tests bench
	$(VENV)/bin/ruff format --check torchmagic tests bench

bench: $(VENV)/.installed-dev
	$(PY) bench/lint_speed.py
	$(PY) bench/scan_speed.py
	$(PY) bench/cell_cost.py
	$(PY) bench/sync_overhead.py
	$(PY) bench/later_cells.py
	$(PY) bench/compile_cost.py
	$(PY) bench/gpu.py

clean:
	rm -rf $(VENV) build dist *.egg-info demo.html test-artifacts
