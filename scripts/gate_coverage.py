"""Coverage of the gate's interval under load, from the JSON files of scripts/gate_sides.py.

    python scripts/gate_coverage.py reports/gate/load/rounds-*.json --reference reports/gate/load/reference-*.json

The truth of a `same` or `layout` commit is 1 (the layout commit does no work in the step). The truth
of `slow` and `fast` is a reference: every round of every `--reference` gate (long, quiet gates of
the same commits: scripts/gate_sides.py --max-time 120) pooled, each round one unit of the interval
(perfsuite.compare.paired_gate.pooled), with no sequential stop. Without a reference, the in-process
estimate each file recorded is used (a rough one: it times the padding in one process).

Printed per kind and load level (busy processes beside the gate; the measured 1-minute load is
shown beside it): gates, how many intervals covered the truth, wrong words (slower of a change
that is not slower, faster of one that is not faster), the exit-5 rate, seconds a gate and the
median half-width of the interval. `--json` writes the same table.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _runs(paths: list[Path]) -> list[dict]:
    out = []
    for p in paths:
        doc = json.loads(p.read_text())
        for r in doc["runs"]:
            out.append({**r, "file": p.name, "estimated": doc.get("slowdown_estimated")})
    return out


def reference(paths: list[Path]) -> dict[str, tuple[float, float, float]]:
    """Per kind: (estimate, low, high) of the ratio from every round of the reference gates, pooled."""
    from perfsuite.compare.paired_gate import PairedRun, pooled
    from perfsuite.stats import verdict

    by_kind: dict[str, list[PairedRun]] = {}
    for r in _runs(paths):
        v = r.get("verdict")
        if not v:
            continue
        run = v["run"]
        # each round of a gate is one unit already (pooled numbered them); keep them apart across gates
        units = run["units"] or [0] * len(run["ratios"])
        for u in sorted(set(units)):
            ratios = [x for x, k in zip(run["ratios"], units) if k == u]
            by_kind.setdefault(r["kind"], []).append(PairedRun(ratios, 1))
    out = {}
    for kind, rounds in by_kind.items():
        every = pooled(rounds)
        lo, hi = verdict.ratio_interval(every.ratios, 0.01, every.units)
        out[kind] = (verdict.ratio_estimate(every.ratios, every.units), lo, hi, len(rounds))
    return out


def table(runs: list[dict], truths: dict[str, float]) -> list[dict]:
    rows = []
    for kind in ("same", "layout", "slow", "fast"):
        for busy in sorted({r["busy"] for r in runs}):
            mine = [r for r in runs if r["kind"] == kind and r["busy"] == busy]
            if not mine:
                continue
            truth = truths.get(kind, 1.0)
            got = [r for r in mine if r.get("verdict")]
            covered = sum(r["verdict"]["interval"][0] <= truth <= r["verdict"]["interval"][1] for r in got)
            wrong = sum(
                (r["verdict"]["word"] == "slower" and truth <= 1.0)
                or (r["verdict"]["word"] == "faster" and truth >= 1.0)
                for r in got
            )
            halves = [
                (math.log(r["verdict"]["interval"][1]) - math.log(r["verdict"]["interval"][0])) / 2
                for r in got
                if r["verdict"]["interval"][0] > 0 and math.isfinite(r["verdict"]["interval"][1])
            ]
            rows.append(
                {
                    "kind": kind,
                    "busy": busy,
                    "load_1m": statistics.median(r["load_1m"] for r in mine),
                    "gates": len(mine),
                    "measured": len(got),
                    "truth": truth,
                    "covered": covered,
                    "wrong_words": wrong,
                    "words": {
                        w: sum(r["verdict"]["word"] == w for r in got)
                        for w in ("slower", "faster", "same", "undecided")
                    },
                    "exit_5": sum(r["exit"] == 5 for r in mine),
                    "errors": len(mine) - len(got),
                    "seconds_median": statistics.median(r["seconds"] for r in mine),
                    "half_width_median": statistics.median(halves) if halves else None,
                }
            )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--reference", nargs="*", type=Path, default=[])
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    runs = _runs(args.files)
    truths: dict[str, float] = {}
    if args.reference:
        for kind, (est, lo, hi, n) in reference(args.reference).items():
            truths[kind] = est
            print(f"reference {kind}: {est:.4f} (98% CI {lo:.4f}-{hi:.4f}) over {n} rounds")
    else:
        est = next((r["estimated"] for r in runs if r.get("estimated")), 0.0)
        truths = {"slow": 1 + est, "fast": 1 / (1 + est)}
    rows = table(runs, truths)
    print(
        "| kind | busy | load | gates (errors) | truth | covered | wrong words | words (slower/faster/same/undecided) | exit 5 | s a gate | half-width |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        w = r["words"]
        hw = f"{r['half_width_median']:.1%}" if r["half_width_median"] is not None else "-"
        print(
            f"| {r['kind']} | {r['busy']} | {r['load_1m']:.1f} | {r['gates']} ({r['errors']}) | {r['truth']:.3f} | {r['covered']}/{r['measured']} "
            f"| {r['wrong_words']} | {w['slower']}/{w['faster']}/{w['same']}/{w['undecided']} | {r['exit_5']} "
            f"| {r['seconds_median']:.0f} | {hw} |"
        )
    total = sum(r["measured"] for r in rows)
    errors = sum(r["errors"] for r in rows)
    print(
        f"all: {sum(r['covered'] for r in rows)}/{total} measured gates covered their truth, "
        f"{sum(r['wrong_words'] for r in rows)} wrong words, {errors} gates without a verdict"
    )
    if args.json:
        args.json.write_text(json.dumps({"truths": truths, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
