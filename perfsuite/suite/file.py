"""Suite files: YAML runs of several workloads, validated up front, resumable.

    name: cpu
    device: auto          # auto | cpu | cuda | cuda:N
    max_time: 6           # seconds per case (an entry may override)
    processes: 3          # worker processes a case's budget is spread over (an entry may override;
                          # left out: RunConfig's default, one per 2 s of max_time, 2 to 5)
    output: results/cpu   # default output directory (--out overrides)
    checks: true          # run the workloads' correctness checks before timing (perfsuite check)
    emulated_bf16: skip   # run (default) | skip: bf16 cases on a CPU without bf16 in hardware
                          # are skipped with that reason (torch emulates them, 10-50x slower)
    suites:
      - name: matmul
        workload: matmul
        params: {n: [256, 1024], dtype: [fp32, bf16]}    # a list sweeps
      - name: activation-vs-builtin
        kind: pair                                       # interleaved A/B of one parameter
        workload: activation
        vary: {impl: [custom, builtin]}
        params: {numel: [1048576]}
      - name: amp
        kind: amp                                        # fp32 vs bf16 training, interleaved
        workload: resnet
        params: {size: ci}
        precisions: [fp32, bf16]
    others: cpu           # and every other workload, over the grid its file declares for this size
                          # ({grid: gpu, except: [noop]} leaves some out): a new workload needs no edit here

Every error names its key path (`suites[2].params.batch_size`) and what is allowed, and
nothing runs until the whole file is valid.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.core import registry
from perfsuite.core.config import IN_PROCESS_BUILDS, MAX_TIME_S, MAX_WORKERS, RunConfig, number_in
from perfsuite.core.errors import ConfigError
from perfsuite.core.params import MAX_CASES, expand_sweep  # MAX_CASES: one entry's sweep at most
from perfsuite.core.text import printable
from perfsuite.core.workload import SIZES
from perfsuite.measuring.workers import worker_count
from perfsuite.storage.read import read_bytes as _read_bytes
from perfsuite.storage.read import read_yaml
from perfsuite.suite.peak import PEAK_DTYPES

TOP_KEYS = {
    "name",
    "description",
    "device",
    "max_time",
    "processes",
    "output",
    "checks",
    "emulated_bf16",
    "suites",
    "others",
}
ENTRY_KEYS = {"name", "workload", "kind", "params", "max_time", "processes", "vary", "precisions", "pairs", "steps"}
KINDS = ("run", "pair", "amp")
# Keys that mean something for one kind only: on another kind they would be silently ignored.
KIND_KEYS = {"vary": ("pair",), "precisions": ("amp",), "pairs": ("amp",), "steps": ("amp",), "processes": ("run",)}
# What an entry of each kind writes; a run entry named `x.amp` would write `x.amp.json`, which
# `report` and `export` read as an AMP document, so its records would vanish from both.
RESERVED_SUFFIXES = (".amp", ".pair", ".split")
# An entry's name becomes a file name (`<out>/<name>.json`), the suite's a directory name: plain
# names only, so `/abs/path` or `../x` cannot write outside the output directory, nor `.x` hide.
SAFE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class Entry:
    name: str
    kind: str
    workload: str
    sweep: dict[str, list]  # param -> values, validated
    max_time: float
    vary: tuple[str, list] | None = None
    precisions: tuple[str, str] = ("fp32", "bf16")
    pairs: int = 20
    steps: int = 30
    processes: int | None = None  # kind run only: worker processes per case; None: RunConfig's default

    def cases(self) -> list[dict]:
        return expand_sweep(self.sweep)


@dataclass(frozen=True)
class Suite:
    name: str
    path: Path
    sha256: str
    device: str
    output: Path | None
    entries: list[Entry] = field(default_factory=list)
    checks: bool = True  # correctness checks of its workloads before any is timed
    skip_emulated_bf16: bool = False  # `emulated_bf16: skip`: bf16 cases skipped where the CPU emulates bf16


def _err(path: str, what: str) -> ConfigError:
    return ConfigError(f"{path}: {what}")


def _shown(value: Any) -> str:
    text = repr(value)
    return printable(text if len(text) <= 60 else text[:57] + "...")


def _safe_name(value: Any, path: str) -> str:
    # A string, not anything str() can print: `name: null` once became a suite named "None".
    if not isinstance(value, str) or not SAFE_NAME.fullmatch(value):
        raise _err(
            path,
            f"{_shown(value)} is not a safe file name; allowed: up to 100 letters, digits, "
            "'.', '_' and '-', not starting with '.'",
        )
    return value


def _number(value: Any, path: str) -> float:
    """A budget in seconds: positive, finite (`max_time: .nan` compares false with everything and
    once passed `<= 0`) and at most MAX_TIME_S (a typo of 6e6 would hold a machine for 69 days)."""
    try:
        return float(number_in(path, value, 0, MAX_TIME_S, above=True))
    except ConfigError:
        raise _err(path, f"must be a positive number of seconds up to {MAX_TIME_S:g}, got {_shown(value)}") from None


def _keys(mapping: dict, allowed: set[str], where: str) -> None:
    """Unknown keys (also keys that are not strings: `1: x`) named with what is allowed."""
    unknown = sorted(_shown(k) if not isinstance(k, str) else k for k in mapping if k not in allowed)
    if unknown:
        prefix = f"{where}." if where else ""
        raise _err(f"{prefix}{unknown[0]}", f"unknown key; allowed: {', '.join(sorted(allowed))}")


def parse_yaml(path: Path) -> Any:
    """The suite file's YAML: a regular file, duplicate keys and alias bombs refused."""
    return read_yaml(path)


def load_suite(path: str | Path, overrides: dict[str, str] | None = None, device: str | None = None) -> Suite:
    """Parse and validate; `overrides` (from -p, key -> "v1,v2" as typed) replace the file's values
    in every entry whose workload has the parameter; one that no entry has is an error."""
    used: set[str] = set()

    path = Path(path)
    doc = parse_yaml(path)
    if not isinstance(doc, dict):
        raise _err(str(path), "the top level must be a mapping with a 'suites' list")
    _keys(doc, TOP_KEYS, "")
    entries_raw = doc.get("suites")
    if not isinstance(entries_raw, list) or not entries_raw:
        raise _err("suites", "must be a non-empty list of workloads to run")
    if "others" in doc:
        entries_raw = entries_raw + _others(doc["others"], entries_raw)
    default_time = _number(doc.get("max_time", 10), "max_time")
    default_processes = _processes(doc.get("processes"), "processes")
    if "name" in doc:  # also a path: the default output directory is `<results>/<name>-<time>`
        _safe_name(doc["name"], "name")
    seen: set[str] = set()
    # Output file (lower case: a case-insensitive disk is one file) -> who writes it.
    files = {"run-config.json": "the run's configuration", "checks.json": "the correctness checks"}
    entries = []
    for i, raw in enumerate(entries_raw):
        where = f"suites[{i}]"
        if not isinstance(raw, dict):
            raise _err(where, "must be a mapping with at least 'workload'")
        _keys(raw, ENTRY_KEYS, where)
        if "workload" not in raw:
            raise _err(where, "missing 'workload'")
        if not isinstance(raw["workload"], str):
            raise _err(f"{where}.workload", f"must be a workload's name, got {_shown(raw['workload'])}")
        try:
            w = registry.get(raw["workload"])
        except ConfigError as exc:
            raise _err(f"{where}.workload", str(exc)) from None
        name = _safe_name(raw.get("name", w.name), f"{where}.name")
        if name in seen:
            raise _err(f"{where}.name", f"two suites are named {name!r}; names must be unique")
        seen.add(name)
        kind = raw.get("kind", "run")
        if not isinstance(kind, str) or kind not in KINDS:
            raise _err(f"{where}.kind", f"must be one of {', '.join(KINDS)}, got {_shown(kind)}")
        for key, kinds in KIND_KEYS.items():
            if key in raw and kind not in kinds:
                raise _err(
                    f"{where}.{key}",
                    f"applies to kind {' or '.join(kinds)} only, not to this {kind} entry (it would be ignored)",
                )
        out_file = f"{name}.json" if kind == "run" else f"{name}.{kind}.json"
        if out_file.lower() in files:
            raise _err(f"{where}.name", f"would write {out_file}, as {files[out_file.lower()]} does; rename it")
        files[out_file.lower()] = f"{where}.name"
        if name.lower().endswith(RESERVED_SUFFIXES):
            raise _err(
                f"{where}.name",
                f"{name!r} ends like another kind's file ({', '.join(RESERVED_SUFFIXES)}); choose another name",
            )
        params = raw.get("params", {}) or {}
        if not isinstance(params, dict):
            raise _err(f"{where}.params", "must be a mapping of parameter -> value or list of values")
        specs = {p.name: p for p in w.params}
        sweep: dict[str, list] = {}
        for key, value in params.items():
            ppath = f"{where}.params.{key}"
            if not isinstance(key, str) or key not in specs:
                raise _err(ppath, f"workload {w.name!r} has no such parameter; its parameters: {', '.join(specs)}")
            values = value if isinstance(value, list) else [value]
            if not values:
                raise _err(ppath, "the value list is empty")
            try:
                sweep[key] = [specs[key].validate(v) for v in values]
            except ConfigError as exc:
                raise _err(ppath, str(exc)) from None
        cases = math.prod(len(v) for v in sweep.values())
        if cases > MAX_CASES:
            raise _err(f"{where}.params", f"the sweep expands to {cases} cases, more than the limit of {MAX_CASES}")
        for key, text in (overrides or {}).items():
            if key in specs:  # parsed by this entry's own workload: another's rules do not apply
                try:
                    sweep[key] = [specs[key].parse(v) for v in text.split(",")]
                except ConfigError as exc:
                    raise ConfigError(f"-p {key}={text}: {exc} (in {where}, workload {w.name!r})") from None
                used.add(key)
        vary = None
        if kind == "pair":
            v = raw.get("vary")
            if not (isinstance(v, dict) and len(v) == 1):
                raise _err(f"{where}.vary", "a pair needs vary: {param: [A, B]}")
            ((vkey, vvals),) = v.items()
            if vkey not in specs or not isinstance(vvals, list) or len(vvals) != 2:
                raise _err(f"{where}.vary.{vkey}", "must name a parameter of the workload and exactly two values")
            try:
                vary = (vkey, [specs[vkey].validate(x) for x in vvals])
            except ConfigError as exc:
                raise _err(f"{where}.vary.{vkey}", str(exc)) from None
        precisions = raw.get("precisions", ["fp32", "bf16"])
        if (
            not isinstance(precisions, list)
            or len(precisions) != 2
            or any(p not in ("fp32", "bf16", "fp16") for p in precisions)
        ):
            raise _err(f"{where}.precisions", f"must be two of fp32, bf16, fp16, got {_shown(precisions)}")
        if precisions[0] == precisions[1]:
            raise _err(f"{where}.precisions", f"compares {precisions[0]} with itself; name two precisions")
        precisions = tuple(precisions)
        entry = Entry(
            name=name,
            kind=kind,
            workload=w.name,
            sweep=sweep,
            max_time=_number(raw.get("max_time", default_time), f"{where}.max_time"),
            vary=vary,
            precisions=precisions,
            pairs=_count(raw.get("pairs", 20), f"{where}.pairs", 2),
            steps=_count(raw.get("steps", 30), f"{where}.steps", 5),
            processes=_processes(raw.get("processes", default_processes), f"{where}.processes"),
        )
        for case in entry.cases():
            try:
                w.resolve(case)
            except ConfigError as exc:
                raise _err(f"{where}.params", str(exc)) from None
        entries.append(entry)
    unused = sorted(set(overrides or {}) - used)
    if unused:
        raise ConfigError(f"-p {unused[0]}: no entry of suite {path.name} has a workload with that parameter")
    out = doc.get("output")
    if out is not None and (not isinstance(out, str) or not out or "\0" in out):
        raise _err("output", f"must be a folder's path, got {_shown(out)}")
    checks = doc.get("checks", True)
    if not isinstance(checks, bool):
        raise _err("checks", f"must be true or false, got {_shown(checks)}")
    emulated_bf16 = doc.get("emulated_bf16", "run")
    if emulated_bf16 not in ("run", "skip"):
        raise _err("emulated_bf16", f"must be run or skip, got {_shown(emulated_bf16)}")
    dev = doc.get("device", "auto")
    if not isinstance(dev, str):
        raise _err("device", f"must be auto, cpu, cuda or cuda:N, got {_shown(dev)}")
    if "description" in doc and not isinstance(doc["description"], str):
        raise _err("description", f"must be text, got {_shown(doc['description'])}")
    return Suite(
        name=doc.get("name", path.stem),
        path=path,
        sha256=hashlib.sha256(_read_bytes(path, ConfigError)).hexdigest(),
        device=str(device or dev),
        output=Path(out) if out else None,
        entries=entries,
        checks=checks,
        skip_emulated_bf16=emulated_bf16 == "skip",
    )


def _others(value: Any, entries_raw: list) -> list[dict]:
    """`others: SIZE` or `others: {grid: SIZE, except: [names]}`: an entry for every registered
    workload no entry names, over the grid its file declares for SIZE (Workload.grid)."""
    spec = {"grid": value} if isinstance(value, str) else value
    if not isinstance(spec, dict) or set(spec) - {"grid", "except"} or spec.get("grid") not in SIZES:
        raise _err(
            "others", f"must be a size ({', '.join(SIZES)}) or {{grid: SIZE, except: [workloads]}}, got {value!r}"
        )
    skip = spec.get("except", [])
    if not isinstance(skip, list):
        raise _err("others.except", f"must be a list of workloads, got {skip!r}")
    for name in skip:
        try:
            registry.get(str(name))
        except ConfigError as exc:
            raise _err("others.except", str(exc)) from None
    named = {str(r.get("workload")) for r in entries_raw if isinstance(r, dict)} | {str(n) for n in skip}
    return [
        {"name": name, "workload": name, "params": registry.get(name).grid(spec["grid"])}
        for name in registry.names()
        if name not in named
    ]


# More pairs or steps than this is a typo, not a plan (10^6 pairs of a 1 ms step is 33 minutes).
MAX_COUNT = 1_000_000


def _count(value: Any, where: str, least: int) -> int:
    """A whole number of at least `least` (`pairs: many` or `pairs: 0` name the key, not a traceback)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise _err(where, f"must be a whole number >= {least}, got {_shown(value)}")
    if value > MAX_COUNT:
        raise _err(where, f"must be a whole number >= {least} and at most {MAX_COUNT}, got {value}")
    return value


def _processes(value: Any, where: str) -> int | None:

    if value is None:  # RunConfig's default: as many as the budget allows
        return None
    n = _count(value, where, 1)
    if n > MAX_WORKERS:
        raise _err(where, f"must be at most {MAX_WORKERS}, got {n}")
    return n


def resolved_config(suite: Suite, device: str) -> dict:
    """What will be run, exactly: stored beside the records so a report can say it."""
    # `checks` too: one folder holds either numbers from checked steps or from unchecked ones.
    out: dict[str, Any] = {
        "suite": suite.name,
        "file": str(suite.path),
        "sha256": suite.sha256,
        "device": device,
        "checks": suite.checks,
        **({"emulated_bf16": "skip"} if suite.skip_emulated_bf16 else {}),
        "entries": [],
    }
    for e in suite.entries:
        w = registry.get(e.workload)
        out["entries"].append(
            {
                "name": e.name,
                "kind": e.kind,
                "workload": e.workload,
                "max_time": e.max_time,
                **({"processes": e.processes} if e.processes is not None else {}),
                "vary": list(e.vary) if e.vary else None,
                "cases": [w.resolve(c) for c in e.cases()],
            }
        )
    return out


def shipped_suites_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "suites"


# --- `perfsuite run --suite NAME --plan`: what a suite (and `make bench` around it) will cost -------
#
# A case's max_time bounds its warm-up and timed blocks; everything else is set-up whose cost is
# estimated here, per device kind, in seconds; a workload whose own costs differ declares them
# (`plan=` on its @perfsuite.workload: build_s, check_s, once_s). The figures come from runs, not
# from the budgets: H100 (scripts/gpu-check.sh, 2026-11-25, torch 2.11): `perfsuite check --device
# cuda` took 16 s wall with its per-check seconds (activation 3.6, autoencoder 3.2, resnet 2.6,
# checkpoint 1.3), `perfsuite peak --max-time 6` 12 s, two ResNet18 b128 cases at 6 s 13 s
# including start-up, six time_case calls at 3 s about 20 s (builds under 1 s), and one Qwen 0.5B
# case at 5 s took 15-35 s (the model is randomly initialised on the host in fp32 before it is
# moved). CPU: on the 2-core development machine (shared, 2026-11-25) a Qwen 0.5B build took 35 s
# and its first call 5 s, `import torch` in a fresh worker 3-8 s, a torchrun launch ~10 s
# (cpu.yaml). They are estimates: the plan says so, and its budget column is the part that is a bound.
PLAN_START_S = {"cpu": 4.0, "cuda": 6.0}  # one perfsuite process: interpreter, torch, CUDA context
PLAN_WORKER_S = {"cpu": 0.2, "cuda": 1.5}  # one worker forked from the fork server (its CUDA context), before its build
PLAN_LAUNCH_S = {"cpu": 10.0, "cuda": 15.0}  # one torchrun launch (distributed workloads), ranks included
# What a workload costs unless it declares its own (Workload.plan, perfsuite.core.workload.PLAN_KEYS).
PLAN_DEFAULT_S = {
    "build_s": {"cpu": 1.0, "cuda": 1.0},  # one case's build and cold first call
    "check_s": {"cpu": 2.0, "cuda": 0.5},  # its checks in `perfsuite check` (a suite runs them before timing)
    "once_s": {"cpu": 0.0, "cuda": 0.0},  # once per suite, before its first case
}
PLAN_PEAK_ROOF_S = {"cpu": 1.0, "cuda": 0.5}  # one roof's build in `perfsuite peak` (a large matmul, or the copy)
PLAN_AMP_LOSSES_S = {"cpu": 15.0, "cuda": 5.0}  # its two fresh accuracy runs (2 x steps steps)
PLAN_REPORT_S = {"cpu": 25.0, "cuda": 25.0}  # `perfsuite report` and `export tensorboard`, two processes
BENCH_PEAK_MAX_TIME = 6.0  # the Makefile's BENCH_TIME: `perfsuite peak --max-time 6`


def plan_seconds(workload: str, key: str, kind: str) -> float:
    """What workload `workload` costs a plan on a device of `kind`: its own `plan=` figure for
    `key` (build_s, check_s, once_s), else PLAN_DEFAULT_S's."""
    declared = (registry.get(workload).plan or {}).get(key)
    if isinstance(declared, Mapping):
        declared = declared.get(kind)
    return float(PLAN_DEFAULT_S[key][kind] if declared is None else declared)


@dataclass(frozen=True)
class PlanLine:
    what: str
    cases: int
    budget_s: float  # max_time bounds (warm-up + timed blocks): a bound
    overhead_s: float  # builds, processes, launches, checks, report: an estimate

    @property
    def total_s(self) -> float:
        return self.budget_s + self.overhead_s


def _kind(device: str) -> str:
    """The device kind a plan is costed for; `auto` is what this machine would run."""
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return "cuda" if device.startswith("cuda") else "cpu"


def plan_suite(suite: Suite, bench: bool = True) -> tuple[str, list[PlanLine]]:
    """Every step of running `suite` (with `bench`: as `make bench` does, with `perfsuite peak`
    before it and the report after), with its cases, the bound its budgets set and its estimated
    overhead. Nothing is built or measured. Every case is counted, also those a machine will skip
    (world_size 2 on one GPU): the plan is for the machine that runs them all."""
    from perfsuite.suite.correctness import checks_for

    kind = _kind(suite.device)
    build = lambda w: plan_seconds(w, "build_s", kind)  # noqa: E731
    # A run in this process builds its step IN_PROCESS_BUILDS times (rotated while timing), unless the
    # workload allows fewer; a worker process builds it once. The builds after the first are counted at
    # half a first build: the process, the CUDA context and the libraries' caches are warm by then, and
    # they reuse the first build's FLOP and saved-bytes counts (measure.counted), which run the step
    # (an estimate, not yet measured on a GPU).
    runs_builds = lambda w: 1 + 0.5 * (min(IN_PROCESS_BUILDS, registry.get(w).max_builds or IN_PROCESS_BUILDS) - 1)  # noqa: E731
    lines = []
    if bench:
        n = len(PEAK_DTYPES[kind]) + 1  # one matmul per roof and the copy
        lines.append(
            PlanLine(
                "perfsuite peak (make bench)",
                n,
                n * BENCH_PEAK_MAX_TIME,
                PLAN_START_S[kind] + n * PLAN_PEAK_ROOF_S[kind],
            )
        )
    lines.append(PlanLine("perfsuite run: start-up", 0, 0.0, PLAN_START_S[kind]))
    checked = sorted({e.workload for e in suite.entries if checks_for(e.workload)})
    if suite.checks and checked:
        lines.append(
            PlanLine(f"checks ({', '.join(checked)})", 0, 0.0, sum(plan_seconds(w, "check_s", kind) for w in checked))
        )
    once = set()
    for e in suite.entries:
        n = len(e.cases())
        extra = 0.0
        if e.workload not in once:
            once.add(e.workload)
            extra = plan_seconds(e.workload, "once_s", kind)
        if e.kind == "pair":  # both sides built; the budget holds the interleaved pairs
            lines.append(PlanLine(f"{e.name} (pair)", n, n * e.max_time, extra + n * 2 * build(e.workload)))
        elif e.kind == "amp":  # max_time bounds warm-up and the pairs; the accuracy runs come on top
            lines.append(
                PlanLine(
                    f"{e.name} (amp)", n, n * e.max_time, extra + n * (2 * build(e.workload) + PLAN_AMP_LOSSES_S[kind])
                )
            )
        elif getattr(registry.get(e.workload), "launcher", None) is not None:
            lines.append(PlanLine(f"{e.name} (torchrun)", n, n * e.max_time, extra + n * PLAN_LAUNCH_S[kind]))
        elif (
            workers := worker_count(registry.get(e.workload), RunConfig(max_time=e.max_time, processes=e.processes))
        ) > 1:
            # each worker forks and builds once
            lines.append(
                PlanLine(
                    f"{e.name} ({workers} processes)",
                    n,
                    n * e.max_time,
                    extra + n * workers * (PLAN_WORKER_S[kind] + build(e.workload)),
                )
            )
        else:
            lines.append(PlanLine(e.name, n, n * e.max_time, extra + n * runs_builds(e.workload) * build(e.workload)))
    if bench:
        lines.append(PlanLine("report and export (make bench)", 0, 0.0, PLAN_REPORT_S[kind]))
    return kind, lines


def plan_total_s(lines: list[PlanLine]) -> float:
    return sum(line.total_s for line in lines)


def format_plan(suite: Suite, kind: str, lines: list[PlanLine]) -> str:
    """The plan as text, ending with `total: N s` (N rounded up: a budget is not undercut)."""
    import math

    width = max(len(line.what) for line in lines)
    out = [
        f"plan for suite {suite.name} on {kind} (nothing measured: budgets are bounds, overheads estimates)",
        f"{'step':<{width}}  cases  budget s  overhead s  total s",
    ]
    for line in lines:
        out.append(
            f"{line.what:<{width}}  {line.cases or '':>5}  {line.budget_s:>8.0f}  {line.overhead_s:>10.0f}"
            f"  {line.total_s:>7.0f}"
        )
    budget = sum(line.budget_s for line in lines)
    total = plan_total_s(lines)
    out.append(f"budgets {budget:.0f} s + overheads {total - budget:.0f} s ({total / 60:.1f} min)")
    out.append(f"total: {math.ceil(total)} s")
    return "\n".join(out)
