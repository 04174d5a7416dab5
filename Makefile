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

.PHONY: test bench setup clean-venv chromium asv-run asv-publish regress bench-pytest

setup: $(DEPS)

$(PY):
	$(PYTHON) -m venv $(VENV_ARGS) $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(DEPS): pyproject.toml | $(PY)
	$(if $(TORCH_PINS),$(PY) -m pip install --quiet $(TORCH_PINS))
	$(PY) -m pip install --quiet -e ".[vision,gpu,report,llm,dev]"
	touch $(DEPS)

# Debian's Chromium, for the test that opens the published asv site; without root or apt the
# test skips and says why.
chromium:
	@command -v chromium >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
		echo "chromium could not be installed: the published-site test will be skipped"

# Benchmarks run once each, untimed, as a smoke test; `make bench-pytest` measures them.
test: $(DEPS) chromium
	$(PY) -m pytest --benchmark-disable

bench-pytest: $(DEPS)
	$(PY) -m pytest tests/perf --benchmark-only --benchmark-autosave

# History with asv: RANGE is any asv range (HEAD^!, HEAD~3..HEAD, ALL). The environment (with
# torch) is created once and reused for every commit.
RANGE ?= HEAD^!
ASV := $(VENV)/bin/asv
asv-run: $(DEPS)
	$(ASV) machine --yes >/dev/null
	$(ASV) run --show-stderr $(ASV_ARGS) "$(RANGE)"

asv-publish: $(DEPS)
	$(ASV) publish
	$(PY) scripts/asv_offline.py .asv/html
	@echo "site in .asv/html (asv preview serves it)"

# Exits non-zero when a benchmark is slower by more than FACTOR between BASE and HEAD.
BASE ?= HEAD~1
FACTOR ?= 1.10
regress: $(DEPS)
	$(ASV) machine --yes >/dev/null
	$(ASV) continuous --show-stderr --factor $(FACTOR) $(ASV_ARGS) $(BASE) HEAD

# The main job: the default suite for this machine, ending in a report under reports/.
OUT := results/bench-$(STAMP)
REPORT := reports/bench-$(STAMP)
bench: $(DEPS)
	$(PY) -m perfsuite peak --max-time $(BENCH_TIME)
	@# The suite that fits this machine: gpu.yaml with CUDA, cpu.yaml without.
	$(PY) -m perfsuite run --suite $$($(PY) -c "import torch; print('gpu' if torch.cuda.is_available() else 'cpu')") \
		--out $(OUT)
	$(PY) -m perfsuite report $(OUT) --out-dir $(REPORT)
	$(PY) -m perfsuite export tensorboard $(OUT) --logdir reports/tensorboard

clean-venv:
	rm -rf $(VENV)
