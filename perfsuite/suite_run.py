"""Running a validated suite into an output directory, resumably.

Each entry writes `<out>/<name>.json` (kind run: a results file, rewritten after every case),
`<name>.pair.json` or `<name>.amp.json`. `run-config.json` holds the resolved configuration and
the suite file's hash. Started again on the same directory with the same configuration, only
missing cases are measured; failed cases are retried only with `retry_failed`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console
from rich.text import Text

from perfsuite.errors import ConfigError, PerfsuiteError, Unsupported
from perfsuite.record import case_key
from perfsuite.suite import Suite, config_digest, resolved_config


@dataclass
class SuiteOutcome:
    measured: int = 0
    skipped_done: int = 0
    skipped_failed: int = 0
    unsupported: int = 0
    failed: int = 0


def prepare_output(out: Path, config: dict) -> None:
    """Create `out`, refuse an unwritable one, and refuse to mix two configurations in one."""
    from perfsuite.storage import atomic_write_text, writable_dir

    writable_dir(out, "output directory")

    cfg_path = out / "run-config.json"
    digest = config_digest(config)
    if cfg_path.exists():
        try:
            old = json.loads(cfg_path.read_text())
        except (OSError, json.JSONDecodeError):
            raise ConfigError(f"{cfg_path} is unreadable; use another output directory") from None
        if old.get("digest") != digest:
            raise ConfigError(f"output directory {out} holds a run of a different configuration "
                              f"(suite {old.get('suite')!r}, sha256 {str(old.get('sha256'))[:12]}); "
                              "resume with the same file and parameters, or choose another --out")
        return
    atomic_write_text(cfg_path, json.dumps({**config, "digest": digest}, indent=1))


def check_cases(suite: Suite, device: str) -> dict[tuple, str]:
    """Every case checked before any runs: missing paths are errors naming the entry; cases the
    device cannot run are returned with their reason (they will be skipped, not failed)."""
    from perfsuite import registry

    unsupported = {}
    for i, e in enumerate(suite.entries):
        w = registry.get(e.workload)
        variants = [{e.vary[0]: v} for v in e.vary[1]] if e.vary else [{}]
        precisions = [{"precision": p} for p in e.precisions] if e.kind == "amp" else [{}]
        for case in e.cases():
            for extra in variants + precisions:
                full = {**case, **extra}
                try:
                    w.check(full, device)
                except Unsupported as exc:
                    unsupported[case_key(w.name, w.resolve(case), device) + (e.name,)] = str(exc)
                except ConfigError as exc:
                    raise ConfigError(f"suites[{i}].params: {exc}") from None
    return unsupported


def run_suite(suite: Suite, out: Path, console: Console, retry_failed: bool = False,
              peak_file: Path | None = None) -> SuiteOutcome:
    from perfsuite import registry, runner
    from perfsuite.config import RunConfig, resolve_device
    from perfsuite.env import fingerprint
    from perfsuite.measure.timing import clock_for
    from perfsuite.pairing import pair
    from perfsuite.peak import peak_for
    from perfsuite.storage import ResultsWriter, atomic_write_text, failure_entry
    from perfsuite.training.amp_compare import compare_precisions

    device = resolve_device(suite.device)
    unsupported = check_cases(suite, device)
    config = resolved_config(suite, device)
    prepare_output(out, config)
    env = fingerprint()
    peak = peak_for(peak_file, env, device) if peak_file else None
    outcome = SuiteOutcome()
    run_info = {"suite": suite.name, "suite_sha256": suite.sha256, "config_digest": config_digest(config)}

    for e in suite.entries:
        w = registry.get(e.workload)
        cases = e.cases()
        if e.kind == "run":
            writer = ResultsWriter.resume(out / f"{e.name}.json")
            done = {r.case_key() for r in writer.records}
            for case in cases:
                resolved = w.resolve(case)
                key = case_key(w.name, resolved, device)
                if key + (e.name,) in unsupported:
                    outcome.unsupported += 1
                    console.print(Text(f"skip {e.name} {case}: {unsupported[key + (e.name,)]}", style="yellow"))
                    continue
                if key in done:
                    outcome.skipped_done += 1
                    continue
                if writer.has_failure(key):
                    if not retry_failed:
                        outcome.skipped_failed += 1
                        continue
                    writer.drop_failure(key)
                console.print(Text(f"{e.name}: {w.name} {case}"), highlight=False)
                try:
                    rec = runner.run_case(w, case, RunConfig(device=device, max_time=e.max_time), env=env, peak=peak)
                    writer.add(replace(rec, config={**rec.config, **run_info}))
                    outcome.measured += 1
                except (KeyboardInterrupt, PerfsuiteError):
                    raise
                except Exception as exc:  # out of memory, a crash in the step: recorded, the suite goes on
                    writer.add_failure(failure_entry(w.name, resolved, device, exc))
                    outcome.failed += 1
                    console.print(Text(f"failed {e.name} {case}: {exc}", style="red"))
            continue
        path = out / f"{e.name}.{e.kind}.json"
        if path.exists():
            outcome.skipped_done += len(cases)
            continue
        results = []
        clock = clock_for(device, "host")
        for case in cases:
            if case_key(w.name, w.resolve(case), device) + (e.name,) in unsupported:
                outcome.unsupported += 1
                continue
            console.print(Text(f"{e.name}: {e.kind} {w.name} {case}"), highlight=False)
            if e.kind == "pair":
                r = pair(w, case, e.vary[0], e.vary[1][0], e.vary[1][1], device, clock, e.max_time)
            else:
                r = compare_precisions(w.name, case, device, clock_for(device), e.precisions[0], e.precisions[1],
                                       pairs=e.pairs, steps=e.steps)
            results.append({**r.to_dict(), **run_info})
            outcome.measured += 1
        atomic_write_text(path, json.dumps(results, indent=1))
    return outcome
