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

lab: install
	$(BIN)/jupyter lab notebooks/00_start_here.ipynb

test: install
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python benchmarks/run_all.py

# gpututor's launcher against Lightning, Accelerate and plain spawn, in fresh Jupyter kernels
bench-peers: install
	$(BIN)/python -m pip install -q -e ".[peers]"
	$(BIN)/python benchmarks/bench_peers.py

clean:
	rm -rf $(VENV) .pytest_cache
