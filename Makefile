# The README's commands. Each sets itself up: a virtual environment in .venv, created when
# missing, and the dependencies, reinstalled when pyproject.toml changes.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEPS := $(VENV)/.deps-installed
# torch/torchvision versions this project is developed on; pip takes them from this
# machine's disk. pyproject.toml declares the compatible ranges.
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
STAMP := $(shell date -u +%Y%m%dT%H%M%SZ)
BENCH_TIME ?= 6

.PHONY: test bench setup clean-venv

setup: $(DEPS)

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(DEPS): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet $(TORCH_PINS)
	$(PY) -m pip install --quiet -e ".[vision,gpu,report,dev]"
	touch $(DEPS)

test: $(DEPS)
	$(PY) -m pytest

# The main job: the default suite for this machine, ending in a report under reports/.
bench: $(DEPS)
	$(PY) -m perfsuite peak --max-time $(BENCH_TIME)
	$(PY) -m perfsuite run noop --max-time $(BENCH_TIME) --out results/bench-$(STAMP)-noop.json
	$(PY) -m perfsuite run matmul -p n=256,512,1024 -p dtype=fp32,bf16 --max-time $(BENCH_TIME) \
		--out results/bench-$(STAMP)-matmul.json
	$(PY) -m perfsuite report results/bench-$(STAMP)-noop.json results/bench-$(STAMP)-matmul.json \
		--out-dir reports/bench-$(STAMP)

clean-venv:
	rm -rf $(VENV)
