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
	$(PY) -m pip install --quiet -e ".[vision,gpu,report,dev]"
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
RUN := $(PY) -m perfsuite run --max-time $(BENCH_TIME)
bench: $(DEPS)
	mkdir -p $(OUT) $(REPORT)
	$(PY) -m perfsuite peak --max-time $(BENCH_TIME)
	$(RUN) noop --out $(OUT)/noop.json
	$(RUN) matmul -p n=256,512,1024 -p dtype=fp32,bf16 --out $(OUT)/matmul.json
	$(RUN) autoencoder -p size=cpu -p variant=fc,conv -p precision=fp32,bf16 --out $(OUT)/autoencoder.json
	$(RUN) autoencoder -p size=cpu -p nvtx=off,on --out $(OUT)/autoencoder-nvtx.json
	$(RUN) resnet -p size=cpu -p model=resnet18,resnet34 -p precision=fp32,bf16 --out $(OUT)/resnet.json
	$(RUN) mar -p n=1000,10000 --out $(OUT)/mar.json
	$(RUN) checkpoint -p op=save,load --out $(OUT)/checkpoint.json
	$(RUN) dataloader -p size=ci -p num_workers=0,1,2,4 -p batch_size=32,128 --out $(OUT)/dataloader.json
	$(RUN) dataloader -p size=ci -p images=256 -p mode=train -p num_workers=0,2 --out $(OUT)/dataloader-train.json
	$(PY) -m perfsuite pair activation --vary impl=custom,builtin -p fn=swish,mish \
		-p numel=1024,65536,1048576,16777216 -p dtype=fp32,bf16 -p pass=forward,backward --budget 2 \
		--out $(REPORT)/activation-pairs.json
	$(PY) -m perfsuite pair activation --vary save=input,input+sigmoid -p fn=swish,mish -p numel=1048576 \
		--budget 2 --out $(REPORT)/activation-save.json
	@# A divergence verdict exits 1; the report still shows it, so the suite goes on.
	-$(PY) -m perfsuite amp resnet -p size=ci --pairs 20 --steps 30 --out $(REPORT)/amp-resnet.json
	$(PY) -m perfsuite report $(OUT) --amp $(REPORT)/amp-resnet.json --pair $(REPORT)/activation-pairs.json \
		--pair $(REPORT)/activation-save.json --out-dir $(REPORT)

clean-venv:
	rm -rf $(VENV)
