"""Builds asv benchmark classes for a perfsuite workload. No measuring logic lives here.

Two classes per workload, because asv gives them different lives:
- `...Track`: `setup_cache` (defined in each bench module: asv keys the cache by the source
  line of `setup_cache`, so a shared definition would make every workload share one cache)
  runs perfsuite's runner once per case and keeps the records; the `track_*` methods only
  read them. One measured run feeds all tracked metrics.
- `...Time`: `time_step` is asv's own timing of the same step (asv insists on timing
  `time_*` itself). It is a re-run, kept cheap with few repeats; `setup` builds and warms the
  step outside timing, and on CUDA the `timer` synchronises the device. Under `asv run --quick`
  (one call each) it is skipped with the reason: one call is a smoke test, not a timing. The
  tracks are perfsuite's calibrated run whatever the mode (asv's overrides never reach
  `setup_cache`).

asv reads a larger number as worse. So no throughput or FLOP/s is tracked as such (a drop
would be shown as an improvement); their inverses are: seconds per item and seconds per
TFLOP, which rise when throughput falls.
"""

from __future__ import annotations

import importlib
import math
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import FrameType

# This file also runs against perfsuite as installed at older commits (benchmarks/_suite.py loads
# it by path for `asv run` over history): modules are looked up where this version keeps them,
# then where commits before the package layout of 2026-11-25 kept them.
_BEFORE_LAYOUT = {
    "perfsuite.core.registry": ("perfsuite.registry",),
    "perfsuite.core.errors": ("perfsuite.errors",),
    "perfsuite.core.config": ("perfsuite.config",),
    # the fingerprint was measuring/env.py before issue 52 renamed it, perfsuite/env.py before that
    "perfsuite.measuring.fingerprint": ("perfsuite.measuring.env", "perfsuite.env"),
    "perfsuite.run.execute": ("perfsuite.execute",),
    "perfsuite.measuring.runner": ("perfsuite.runner",),
    "perfsuite.compare.amp": ("perfsuite.training.amp_compare",),
    "perfsuite.core.params": ("perfsuite.params",),
    "perfsuite.database.recorder": ("perfsuite.store.recorder",),  # the database was perfsuite.store before issue 52
}


def _module(name: str):
    names = (name, *_BEFORE_LAYOUT.get(name, ()))
    for candidate in names[:-1]:
        try:
            return importlib.import_module(candidate)
        except ModuleNotFoundError:
            pass
    return importlib.import_module(names[-1])


def _run_cases(execute, cases: list, cfg, device: str, measure=None, **kw):
    """The commit's case loop: given checked cases since issue 52 (check_cases, then run_cases), the
    cases, the device and the measure before it."""
    if hasattr(execute, "CheckedCases"):
        checked = execute.check_cases(cases, device, *([measure] if measure is not None else []))
        return execute.run_cases(checked, cfg, **kw)
    return execute.run_cases(cases, cfg, device, **({"measure": measure} if measure is not None else {}), **kw)


_SYNC = None


def device_timer() -> float:
    """perf_counter that first waits for queued device work (perfsuite.measuring.timing.synchronize),
    so asv's clock sees device time."""
    global _SYNC
    if _SYNC is None:
        device = _module("perfsuite.core.config").resolve_device("auto")
        timing = _module("perfsuite.measuring.timing")
        if hasattr(timing, "synchronize"):
            _SYNC = lambda: timing.synchronize(device)  # noqa: E731
        else:  # a commit older than timing.synchronize: the same wait, spelled out
            import torch

            _SYNC = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    _SYNC()
    return time.perf_counter()


def _key(values) -> str:
    return repr(tuple(values))


def _workload_or_skip(workload: str):
    registry = _module("perfsuite.core.registry")
    PerfsuiteError = _module("perfsuite.core.errors").PerfsuiteError

    try:
        return registry.get(workload)
    except PerfsuiteError as exc:  # an older commit without this workload
        raise NotImplementedError(str(exc)) from None


def _errors():
    """(PerfsuiteError, Unsupported) as the installed perfsuite has them: commits older than
    `Unsupported` are benchmarked too (asv runs today's benchmarks on old code)."""
    errors = _module("perfsuite.core.errors")

    return errors.PerfsuiteError, getattr(errors, "Unsupported", errors.PerfsuiteError)


def _check(w, case: dict, device: str) -> None:
    # The case validator: validate_case since issue 52, check() before it, none in the oldest Workloads.
    check = getattr(w, "validate_case", None) or getattr(w, "check", None)
    if check is not None:
        check(case, device)


def measure_cases(workload: str, grid: dict, max_time: float, processes: int = 1) -> dict:
    """perfsuite records of every case in `grid`, keyed by parameter values; skips keep reasons.

    The cases go through perfsuite's one case loop (perfsuite.run.execute), as `perfsuite run` does,
    each over `processes` fresh worker processes where this commit's perfsuite has them.
    """
    registry = _module("perfsuite.core.registry")
    RunConfig = _module("perfsuite.core.config").RunConfig
    resolve_device = _module("perfsuite.core.config").resolve_device
    fingerprint = _module("perfsuite.measuring.fingerprint").fingerprint

    PerfsuiteError, _ = _errors()
    names = list(grid)
    try:
        w = registry.get(workload)
    except PerfsuiteError as exc:
        return {"_skip": str(exc)}
    device = resolve_device("auto")
    cases = _module("perfsuite.core.params").expand_sweep(grid)
    try:
        execute = _module("perfsuite.run.execute")
        Case = execute.Case
        Events: Any = execute.Events  # (this commit's, or an older one's)
    except ImportError as exc:  # a commit older than the one case loop: nothing comparable to measure
        return {"_skip": f"this commit predates perfsuite's one case loop: {exc}"}

    result: dict = {}
    store = _store("asv", {"workload": workload, "grid": grid, "max_time": max_time, "processes": processes})

    class Keep(Events):  # keyed by the grid's own values, as asv passes them to setup()
        def done(self, case, record):
            result[_key(case.params[n] for n in names)] = record.to_dict()
            if store is not None:
                store.add_record(record)

        def failed(self, case, failure):  # a failed case becomes a skip with its reason; the rest go on
            result[_key(case.params[n] for n in names)] = {"_skip": f"failed: {failure['error']}"}

        def skipped(self, case, reason):
            result[_key(case.params[n] for n in names)] = {"_skip": reason}

    try:
        _run_cases(
            execute,
            [Case(w, c) for c in cases],
            _config(RunConfig, device, max_time, processes),
            device,
            env=fingerprint(),
            events=Keep(),
        )
    except PerfsuiteError as exc:  # a grid this commit's workload does not accept
        return {"_skip": str(exc)}
    finally:
        if store is not None:
            store.finish()
            for note in store.notes:
                print(f"perfsuite store: {note}", file=sys.stderr)
    return result


def _store(kind: str, config: dict):
    """The results store's recorder for this asv run (the commit asv measures, from ASV_COMMIT), or
    None in a commit older than the store."""
    try:
        for_frontend = _module("perfsuite.database.recorder").for_frontend
    except (ImportError, AttributeError):
        return None
    # asv runs each benchmark in a temporary folder; ASV_CONF_DIR is the project's, where
    # asv.conf.json is: its .perfsuite/results.db (or its [tool.perfsuite] store) is the store.
    home = os.environ.get("ASV_CONF_DIR")
    kw = {"home": Path(home)} if home else {}
    return for_frontend(
        kind,
        config,
        commit=os.environ.get("ASV_COMMIT"),
        warn=lambda text: print(f"perfsuite: {text}", file=sys.stderr),
        **kw,
    )


def _config(RunConfig, device: str, max_time: float, processes: int):
    """RunConfig with worker processes when this commit's RunConfig knows them (older: one process)."""
    import dataclasses

    if processes > 1 and "processes" in {f.name for f in dataclasses.fields(RunConfig)}:
        return RunConfig(device=device, max_time=max_time, processes=processes)
    return RunConfig(device=device, max_time=max_time)


def _cached_case(cache: dict, params) -> dict:
    """The case's entry from setup_cache's measurements; asv shows NotImplementedError as a skip
    with its reason (the whole grid unsupported, this case unsupported or failed, not measured)."""
    if "_skip" in cache:
        raise NotImplementedError(cache["_skip"])
    entry = cache.get(_key(params))
    if entry is None or "_skip" in entry:
        raise NotImplementedError((entry or {}).get("_skip", "case was not measured"))
    return entry


MIB = 1 << 20


def step_peak_memory(memory: dict) -> float:
    """The measured step's own peak memory, from a record's `memory`: on CUDA the allocator's peak
    above what was allocated when the timed region began (activations, gradients, workspaces); on
    the host the resident set's rise over the region's start. Not the process's resident size:
    that is mostly the imports (torch's hundreds of MB), which hide what the step does.

    The host figure is floored to whole MiB: resident memory moves by the pages the allocator
    happens to touch, and asv would call 0 -> 8 KiB an infinite regression. NaN where the record
    has no region figure (a host peak read from ru_maxrss covers the whole process)."""
    if memory.get("cuda_max_allocated_bytes") is not None and memory.get("cuda_allocated_before_bytes") is not None:
        return float(max(0, memory["cuda_max_allocated_bytes"] - memory["cuda_allocated_before_bytes"]))
    delta = memory.get("host_peak_delta_bytes")
    if delta is None or memory.get("host_method") != "clear_refs+VmHWM":
        return math.nan
    return float(delta // MIB * MIB)


def make_track_suite(workload: str, grid: dict):
    names = list(grid)

    class Track:
        param_names = names
        params = [grid[n] for n in names]
        timeout = 900

        def setup(self, cache, *params):
            self.record = _cached_case(cache, params)

        def track_median_s(self, cache, *params):
            return self.record["derived"]["stats"]["median"]

        track_median_s.unit = "seconds"  # type: ignore[attr-defined]  # read by asv

        def track_seconds_per_item(self, cache, *params):
            return self.record["derived"]["stats"]["median"] / self.record["work"]["items_per_step"]

        track_seconds_per_item.unit = "seconds/item"  # type: ignore[attr-defined]  # read by asv

        def track_seconds_per_tflop(self, cache, *params):
            flops = self.record["work"]["flops_per_step"]
            return math.nan if not flops else self.record["derived"]["stats"]["median"] / (flops / 1e12)

        track_seconds_per_tflop.unit = "s/TFLOP"  # type: ignore[attr-defined]  # read by asv

        def track_step_peak_memory(self, cache, *params):
            return step_peak_memory(self.record["memory"])

        track_step_peak_memory.unit = "bytes"  # type: ignore[attr-defined]  # read by asv

        def track_cuda_max_allocated(self, cache, *params):
            v = self.record["memory"].get("cuda_max_allocated_bytes")
            return math.nan if v is None else v

        track_cuda_max_allocated.unit = "bytes"  # type: ignore[attr-defined]  # read by asv

    return Track


WARM_CALLS = 3
QUICK_SKIP = (
    "asv --quick times one call: a smoke run, not a timing (the Track's track_median_s is "
    "perfsuite's calibrated median, --quick or not)"
)


def asv_quick() -> bool:
    """Whether asv is running the calling benchmark with --quick (number=1, repeat=1, no warm-up).

    asv hands its overrides to the benchmark object that calls `setup`, never to the class, so
    they are read from that caller's frame; outside asv (tests, a script) this is False.
    """
    import sys

    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        sources = getattr(frame.f_locals.get("self"), "_attr_sources", None)
        if isinstance(sources, list):  # asv_runner's Benchmark: overrides first, then the class

            def first(name):
                return next((getattr(s, name) for s in sources if hasattr(s, name)), None)  # noqa: B023 - called within this iteration

            return first("number") == 1 and first("repeat") == 1 and first("warmup_time") == 0
        frame = frame.f_back
    return False


def make_time_suite(workload: str, grid: dict):
    names = list(grid)

    class Time:
        param_names = names
        params = [grid[n] for n in names]
        timer = staticmethod(device_timer)
        timeout = 600
        repeat = (1, 5, 2.0)  # a cheap re-run: the tracked median comes from perfsuite's run
        warmup_time = 0.5

        def setup(self, *params):
            if asv_quick():
                raise NotImplementedError(QUICK_SKIP)
            resolve_device = _module("perfsuite.core.config").resolve_device

            PerfsuiteError, Unsupported = _errors()
            w = _workload_or_skip(workload)
            case = dict(zip(names, params))
            device = resolve_device("auto")
            try:
                _check(w, case, device)
                self.built = w.build(case, device)
            except (Unsupported, PerfsuiteError, ImportError) as exc:
                raise NotImplementedError(f"{type(exc).__name__}: {exc}") from None
            # asv (asv_runner 0.3, asv#966) runs setup again before every call it times, so each
            # timed call follows a fresh build: these calls pay a build's first calls (lazy
            # optimiser state, allocator growth, autotuning) outside its clock.
            for _ in range(WARM_CALLS):
                self.built.fn()

        def teardown(self, *params):
            if getattr(self, "built", None) is not None and self.built.teardown is not None:
                self.built.teardown()

        def time_step(self, *params):
            self.built.fn()

    return Time


# ---- AMP: fp32 against a lower precision, interleaved in one process ------------------------------

AMP_PAIRS = 10
AMP_STEPS = 20


def measure_amp(
    grid: dict,
    size: str,
    pairs: int = AMP_PAIRS,
    steps: int = AMP_STEPS,
    max_time: float = 5.0,
    params: dict | None = None,
) -> dict:
    """`perfsuite amp` of every (workload, precision) in `grid` against fp32, at the `size`
    preset (and `params`, for tests), through perfsuite's one case loop (run_cases measuring
    compare.amp.Amp); each comparison's to_dict() keyed by the grid's values, or a skip with its
    reason."""
    RunConfig = _module("perfsuite.core.config").RunConfig
    resolve_device = _module("perfsuite.core.config").resolve_device

    PerfsuiteError, _ = _errors()
    try:
        execute = _module("perfsuite.run.execute")
        Amp = _module("perfsuite.compare.amp").Amp
    except (ImportError, AttributeError) as exc:  # a commit older than the comparison in the case loop
        return {"_skip": f"no AMP comparison through the case loop in this commit: {exc}"}
    device = resolve_device("auto")
    out: dict = {}
    store = _store("asv", {"amp": grid, "size": size, "pairs": pairs, "steps": steps, "max_time": max_time})
    try:
        for precision in grid["precision"]:
            cases, keys = [], {}
            for workload in grid["workload"]:
                try:
                    w = _workload_or_skip(workload)
                except NotImplementedError as exc:
                    out[_key((workload, precision))] = {"_skip": str(exc)}
                    continue
                cases.append(execute.Case(w, {"size": size, **(params or {})}))
                keys[id(cases[-1])] = _key((workload, precision))

            Events: Any = execute.Events

            class Keep(Events):  # a failed or unsupported case is a skip with its reason; the rest go on
                def done(self, case, res):
                    out[keys[id(case)]] = res.to_dict()  # noqa: B023 - the class is used within this iteration

                def failed(self, case, failure):
                    out[keys[id(case)]] = {"_skip": f"failed: {failure['error']}"}  # noqa: B023 - the class is used within this iteration

                def skipped(self, case, reason):
                    out[keys[id(case)]] = {"_skip": reason}  # noqa: B023 - the class is used within this iteration

            try:
                _run_cases(
                    execute,
                    cases,
                    RunConfig(device=device, max_time=max_time),
                    device,
                    measure=Amp("fp32", precision, pairs=pairs, steps=steps),
                    events=Keep(),
                    outputs=(store,),
                )
            except PerfsuiteError as exc:  # a size or parameter this commit's workload does not accept
                for case in cases:
                    out[keys[id(case)]] = {"_skip": f"{type(exc).__name__}: {exc}"}
    finally:
        if store is not None:
            store.finish()
            for note in store.notes:
                print(f"perfsuite store: {note}", file=sys.stderr)
    return out


def make_amp_suite(grid: dict):
    """asv reads larger as worse, so each number is one whose rise is bad: the low precision's
    step time as a fraction of fp32's (1 / speed-up), the bytes it saves for backward as a
    fraction of fp32's, and how far apart the two final losses are."""
    names = list(grid)

    class AmpTrack:
        param_names = names
        params = [grid[n] for n in names]
        timeout = 1800

        def setup(self, cache, *params):
            self.res = _cached_case(cache, params)

        def track_time_ratio(self, cache, *params):
            """1 / speed-up: the lower precision's step time over fp32's (median of the pairs)."""
            return 1.0 / self.res["speedup"]

        track_time_ratio.unit = "low/fp32 time"  # type: ignore[attr-defined]  # read by asv

        def track_saved_memory_ratio(self, cache, *params):
            return self.res["memory_ratio"]

        track_saved_memory_ratio.unit = "low/fp32 bytes"  # type: ignore[attr-defined]  # read by asv

        def track_final_loss_rel_diff(self, cache, *params):
            v = self.res["loss_rel_diff"]
            return math.nan if v is None or math.isinf(v) else v

        track_final_loss_rel_diff.unit = "relative"  # type: ignore[attr-defined]  # read by asv

    return AmpTrack


# ---- optional tracks a workload names in its declaration (asv={"tracks": [...]}) ---------------------


class OptionalTracks:
    """Tracks read from a record's `extra`, which a workload opts into by name. asv reads larger
    as worse, so each is a number whose rise is bad. (Their text is what bench_ddp.py and
    bench_allreduce.py had: asv's version of a benchmark is a hash of its source.)"""

    def track_inverse_scaling_efficiency(self, cache, *params):
        extra = self.record["extra"]
        if extra.get("world_size") == 1:
            return 1.0
        eff = extra.get("scaling_efficiency")
        return math.nan if not eff else 1.0 / eff

    track_inverse_scaling_efficiency.unit = "1/efficiency"  # type: ignore[attr-defined]  # read by asv

    def track_comm_share(self, cache, *params):
        share = (self.record["extra"].get("comm") or {}).get("comm_share")
        return math.nan if share is None else share

    track_comm_share.unit = "fraction"  # type: ignore[attr-defined]  # read by asv

    def track_seconds_per_bus_gb(self, cache, *params):
        busbw = self.record["extra"].get("busbw_Bps")
        return math.nan if not busbw else 1e9 / busbw  # world_size=1 moves nothing on a bus

    track_seconds_per_bus_gb.unit = "s/GB"  # type: ignore[attr-defined]  # read by asv


TRACKS = tuple(n[len("track_") :] for n in vars(OptionalTracks) if n.startswith("track_"))


def _optional_tracks(names, class_name: str, module: str) -> dict:
    """The named optional tracks as methods of `class_name` (asv reads the class from the qualname)."""
    import types

    out = {}
    for name in names:
        if name not in TRACKS:
            raise ValueError(f"no optional asv track {name!r}; known: {', '.join(TRACKS)}")
        f = vars(OptionalTracks)[f"track_{name}"]
        g = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
        g.__qualname__, g.__module__ = f"{class_name}.{f.__name__}", module
        g.unit = f.unit  # type: ignore[attr-defined]  # read by asv
        out[f.__name__] = g
    return out


# ---- perfsuite's own workloads: benchmarks/ makes a module bench_<name> of each declaration ------------

SIZES = ("ci", "cpu", "gpu")


def asv_size() -> str:
    """asv needs its params at import, before torch can say whether there is a GPU: a GPU host
    sets PERFSUITE_ASV_SIZE=gpu (docker/ does); everywhere else the `ci` grids are used."""
    import os

    size = os.environ.get("PERFSUITE_ASV_SIZE", "ci")
    if size not in SIZES:
        raise ValueError(f"PERFSUITE_ASV_SIZE must be one of {', '.join(SIZES)}, got {size!r}")
    return size


def declared(size: str) -> dict:
    """What asv needs of every one of perfsuite's own workloads, as JSON-able data: {name: {"grid",
    "processes", "max_time", "tracks", "time" (asv can time the step here: not distributed),
    "amp"}}. (A user's workloads, registered in this process or not, have `expose`.)"""
    registry = _module("perfsuite.core.registry")
    out = {}
    for name in registry.names():
        w = registry.get(name)
        if not w.builtin:
            continue
        settings = dict(getattr(w, "asv", None) or {})
        out[name] = {
            "grid": w.grid(size),
            "processes": int(settings.get("processes", 1)),
            "max_time": float(settings.get("max_time", 5.0)),
            "tracks": list(settings.get("tracks", ())),
            "time": getattr(w, "launcher", None) is None,
            "amp": bool(settings.get("amp", False)),
        }
    return out


def declarations(root, size: str) -> dict:
    """`declared(size)` of the perfsuite in the working tree at `root`, whichever is installed.

    asv imports today's benchmarks against perfsuite as installed at older commits, and a
    benchmark's parameters must not depend on the commit measured: so the workloads and their
    grids are the working tree's. Where the installed perfsuite is that tree's (asv's
    --python=same, tests) they are read here; otherwise from a fresh interpreter with the tree
    first on its path (declarations import no torch)."""
    import json
    import os
    import subprocess
    import sys

    root = Path(root).resolve()
    try:
        installed = Path(_module("perfsuite").__file__).resolve().parent
    except ImportError:
        installed = None
    if installed == root / "perfsuite":
        return declared(size)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    code = "import json, sys; from perfsuite.frontends.asv import declared; print(json.dumps(declared(sys.argv[1])))"
    run = subprocess.run([sys.executable, "-c", code, size], cwd=root, env=env, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"reading the workloads' declarations from {root} failed:\n{run.stderr}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _stem(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.replace("-", "_").split("_"))


def _setup_cache(name: str, grid: dict, max_time: float, processes: int, class_name: str, module: str):
    """The Track class's setup_cache: one measured run of every case of the grid.

    asv keys a setup_cache's results by its module and line, so each workload's is its own
    function (its module is the workload's); and asv versions a benchmark by a hash of its
    source, so `pretty_source` is the text the hand-written bench_<name>.py had, keeping results
    stored before benchmarks/ was generated (same names, same params) on the same version."""

    def setup_cache(self):
        return measure_cases(name, grid, max_time=max_time, processes=processes)

    setup_cache.__qualname__, setup_cache.__module__ = f"{class_name}.setup_cache", module
    more = f', processes=worker_processes("{name}")' if processes > 1 else ""
    setup_cache.pretty_source = (  # type: ignore[attr-defined]  # read by asv
        f'def setup_cache(self):\n    return measure_cases("{name}", GRID, max_time={max_time!r}{more})'
    )
    return setup_cache


def fill_module(namespace: dict, name: str, declaration: dict) -> list[str]:
    """Define, in the module `namespace`, workload `name`'s asv classes from its declaration
    (`declared`): `<Name>Track` (setup_cache measures the grid once; track_* read the records,
    with the optional tracks it names) and, unless its step runs in other processes, `<Name>Time`."""
    module = namespace["__name__"]
    grid = {k: list(v) for k, v in declaration["grid"].items()}
    stem = _stem(name)
    namespace["GRID"] = grid
    body = {
        "__module__": module,
        "setup_cache": _setup_cache(
            name, grid, declaration["max_time"], declaration["processes"], f"{stem}Track", module
        ),
        **_optional_tracks(declaration["tracks"], f"{stem}Track", module),
    }
    namespace[f"{stem}Track"] = type(f"{stem}Track", (make_track_suite(name, grid),), body)
    made = [f"{stem}Track"]
    if declaration["time"]:
        namespace[f"{stem}Time"] = type(f"{stem}Time", (make_time_suite(name, grid),), {"__module__": module})
        made.append(f"{stem}Time")
    return made


def amp_grid(declarations: dict) -> dict:
    """The AMP benchmark's grid: every workload that declares asv={"amp": True}, against bf16 and fp16."""
    return {"workload": sorted(n for n, d in declarations.items() if d["amp"]), "precision": ["bf16", "fp16"]}


# ---- the user's own workloads: `from perfsuite.frontends.asv import expose; expose(globals())` ------


def _user_workloads(start) -> list:
    """The workloads declared by the files the project around `start` names."""

    discover = _module("perfsuite.core.discover")
    discover.discover(start=Path(start))
    return discover.project_workloads(discover.find_project(Path(start)))


def _user_grid(w) -> dict:
    """asv's parameters of a user workload: its declared grid at PERFSUITE_ASV_SIZE, else its
    default sweep (the other parameters keep their defaults)."""
    return w.grid(asv_size())


def _measure_user_workloads(self):
    """One measured run of every user workload's default sweep. asv keys a setup_cache by its
    source line, so this one function is every exposed class's setup_cache: measured once, shared."""
    import os

    return {
        w.name: measure_cases(
            w.name,
            _user_grid(w),
            max_time=(w.asv or {}).get("max_time", _MAX_TIME),
            processes=(w.asv or {}).get("processes", _PROCESSES),
        )
        for w in _user_workloads(os.environ.get("PERFSUITE_ASV_START", os.getcwd()))
    }


_MAX_TIME = 5.0
_PROCESSES = 1


def expose(namespace: dict, max_time: float = 5.0, processes: int = 1) -> list[str]:
    """Define, in an asv benchmark module's `namespace`, a `<Name>Track` (perfsuite's median,
    seconds per item and per TFLOP, the step's peak memory) and a `<Name>Time` (asv's own timing of the
    step) for every workload of the project around that module; returns the class names."""
    import os

    global _MAX_TIME, _PROCESSES
    _MAX_TIME, _PROCESSES = max_time, processes
    start = Path(namespace.get("__file__", os.getcwd())).resolve().parent
    os.environ.setdefault("PERFSUITE_ASV_START", str(start))  # setup_cache runs in a fresh process
    made = []
    for w in _user_workloads(start):
        grid = _user_grid(w)
        stem = _stem(w.name)
        if f"{stem}Track" in made:  # `my-model` and `my_model` would share a class silently
            raise ValueError(f"workloads {w.name!r} and another both become asv class {stem}Track: rename one")
        track_base = make_track_suite(w.name, grid)

        def setup(self, cache, *params, _name=w.name, _base=track_base):
            _base.setup(self, cache.get(_name, {"_skip": f"{_name} was not measured"}), *params)

        module = namespace.get("__name__", __name__)
        body = {
            "__module__": module,
            "setup": setup,
            "setup_cache": _measure_user_workloads,
            **_optional_tracks((w.asv or {}).get("tracks", ()), f"{stem}Track", module),
        }
        namespace[f"{stem}Track"] = type(f"{stem}Track", (track_base,), body)
        namespace[f"{stem}Time"] = type(
            f"{stem}Time", (make_time_suite(w.name, grid),), {"__module__": body["__module__"]}
        )
        made += [f"{stem}Track", f"{stem}Time"]
    return made
