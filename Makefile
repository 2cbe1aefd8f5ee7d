# Two commands on a fresh machine:  `make lab` opens the lessons, `make test` runs every test.
# Each creates .venv and installs what it needs by itself.
PYTHON ?= python3
VENV   ?= .venv
# The CPU wheel of torch 2.13 (fast, small). For a GPU machine: make TORCH=torch lab
TORCH  ?= torch==2.13.0
BIN    := $(VENV)/bin

.PHONY: lab test install bench bench-peers clean

# The venv, torch, gpututor with its test extra, and the "Python 3 (gpututor)" kernel the lessons
# ask for (registered by hand: an editable install skips the package's data-files).
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[test]"
	$(BIN)/jupyter kernelspec install --sys-prefix --name gpututor gpututor/runtime/kernelspec >/dev/null
	touch $@

install: $(BIN)/.installed

# JupyterLab refuses to start as root (most containers and cloud GPU images) without --allow-root.
# LAB_ARGS passes more options to it (e.g. LAB_ARGS="--no-browser --port 8899").
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)
LAB_ARGS  ?=

lab: install
	@echo "Starting JupyterLab on notebooks/00_start_here.ipynb. Where no browser opens, open the"
	@echo "URL it prints below (http://127.0.0.1:...?token=...) in a browser on this machine."
	$(BIN)/jupyter lab $(ROOT_FLAG) $(LAB_ARGS) notebooks/00_start_here.ipynb

test: install
	$(BIN)/python -m pytest

# the Chinese lessons: update each lesson's catalog (gpututor/lessons/<name>/zh.po) from its
# English notebook, then build notebooks/zh/ from the two (it lists what is left to translate)
zh: install
	$(BIN)/python -m gpututor.i18n.notebooks

bench: install
	$(BIN)/python benchmarks/run_all.py

# gpututor's launcher against Lightning, Accelerate and plain spawn, and %%ranks against
# ipyparallel's %%px, in fresh Jupyter kernels
bench-peers: install
	$(BIN)/python -m pip install -q -e ".[peers]"
	$(BIN)/python benchmarks/bench_peers.py
	$(BIN)/python benchmarks/bench_ranks.py

clean:
	rm -rf $(VENV) .pytest_cache
