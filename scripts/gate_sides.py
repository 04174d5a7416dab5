"""False alarms and power of `perfsuite gate --base REV` on a user's workload, as a user runs it.

    python scripts/gate_sides.py --trials 20 --slowdown 0.05 --out reports/gate/sides-tiny-mlp.json

examples/my-project is copied into a temporary git repository. Unchanged code: a commit that
touches only a note, gated against its parent `--trials` times (every `perfsuite gate` that says
slower is a false alarm; "undecided", exit 5, is counted apart). Slowed code: a commit whose model adds 64x64 matmuls to the forward,
sized from an in-process timing to cost about `--slowdown` of the step, gated against its parent
`--trials` times (power). Every gate is the real command: each side in its own processes, the
base in a git worktree, the defaults unless given (`--max-time`, `--builds`, `--threads`).
Rates come with Wilson 95% intervals; the machine's load average is kept beside each gate.

Issue 49 (verdicts under load): `--kinds` chooses the commits gated, among
- same: a note only (unchanged code, unchanged layout);
- layout: the model file holds an extra buffer, allocated before the model and never used (a
  change that does no work in the step but moves every later allocation, as renaming a class
  or adding a field does; the truth is 1.000);
- slow: the padded forward above (`--slowdown` of the step);
- fast: the padded forward as the base, the commit removing the padding (a speed-up);
`--workload tiny_gpt` gates a two-layer transformer's forward (about 1-3 ms a step on one thread)
instead of tiny_mlp's training step; `--load N` keeps N busy processes running beside every gate
(a shared runner, a laptop doing other work), and `--loads 0,2,4` cycles through several.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GIT = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
PAD = 64  # the injected slowdown's unit: a PAD x PAD matmul
# The injected slowdown: matmuls on module-level tensors before the forward returns.
PADS = f"\n_PAD_A, _PAD_B, _PAD_OUT = torch.randn({PAD}, {PAD}), torch.randn({PAD}, {PAD}), torch.empty({PAD}, {PAD})\n"
RETURNS = {
    "tiny_mlp": "        return self.body(x)\n",
    "tiny_gpt": "        return self.head(self.blocks(self.embed(idx)))\n",
}
PADDING = """        for _ in range({count}):  # injected: about {fraction:.1%} of the step
            torch.mm(_PAD_A, _PAD_B, out=_PAD_OUT)
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True)


def _padding_count(
    fraction: float, threads: int | None, workload: str = "tiny_mlp", batch: int = 4
) -> tuple[int, float]:
    """Matmuls of PAD x PAD that cost `fraction` of the workload's step (tiny_mlp's training step
    at batch 32, or tiny_gpt's forward at batch 4), timed here."""
    import torch

    from perfsuite.measuring.timing import PerfCounterClock
    from perfsuite.stats.summary import median

    if threads:
        torch.set_num_threads(threads)
    sys.path.insert(0, str(ROOT / "examples" / "my-project"))
    from myproj.model import Net

    if workload == "tiny_gpt":
        space: dict = {"torch": torch}
        exec(TINY_GPT, space)  # the class the project's model file gets
        gpt, idx = space["TinyGPT"]().eval(), torch.randint(0, 512, (batch, 64))

        def step():
            with torch.no_grad():
                gpt(idx)

    else:
        net = Net(256)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        x, y = torch.randn(32, 256), torch.randint(0, 10, (32,))

        def step():
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()

    # A 64x64 unit: a 256x256 matmul costs about tiny_mlp's whole step, so one of them could not
    # make a 5% slowdown (the first runs of this script injected 2-4x and called it 8.7%).
    a, b, out = torch.randn(PAD, PAD), torch.randn(PAD, PAD), torch.empty(PAD, PAD)
    clock = PerfCounterClock()
    for _ in range(50):
        step()
    t_step = median([clock.time_block(step, 20) / 20 for _ in range(15)])
    t_mm = median([clock.time_block(lambda: torch.mm(a, b, out=out), 20) / 20 for _ in range(15)])
    count = max(1, round(fraction * t_step / t_mm))
    return count, count * t_mm / t_step


TINY_GPT = '''

class TinyGPT(torch.nn.Module):
    """Two transformer layers over token embeddings: a short forward, as a GPT's (issue 49)."""

    def __init__(self, vocab: int = 512, width: int = 128, layers: int = 2, seq: int = 64) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        layer = torch.nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.0, batch_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.embed(idx)))
'''
TINY_GPT_WORKLOAD = '''

@perfsuite.workload(params={"batch_size": [1, 4, 16, 32, 128]})
def tiny_gpt(batch_size: int, device: str):
    """A small transformer's forward pass (inference)."""
    from myproj.model import TinyGPT

    model = TinyGPT().to(device).eval()
    idx = torch.randint(0, 512, (batch_size, 64), device=device)

    def step():
        with torch.no_grad():
            model(idx)

    return perfsuite.Step(step, items=batch_size, unit="samples")
'''
# The layout-only change: a buffer of an odd size, allocated at import before any model and held.
LAYOUT_CHANGE = "\n_UNUSED = torch.empty(12_345)  # a change that does no work in the step\n"


def _project(tmp: Path, name: str) -> Path:
    repo = tmp / name
    shutil.copytree(ROOT / "examples" / "my-project", repo)
    model = repo / "myproj" / "model.py"
    model.write_text(model.read_text() + TINY_GPT)
    bench = repo / "bench" / "tiny_mlp.py"
    bench.write_text(bench.read_text() + TINY_GPT_WORKLOAD)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    return repo


def _gate(repo: Path, args) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "perfsuite",
        "gate",
        args.workload,
        "-p",
        "batch_size=32" if args.workload == "tiny_mlp" else f"batch_size={args.batch}",
        "--base",
        "HEAD~1",
        "--device",
        "cpu",
        "--max-time",
        str(args.max_time),
    ]
    if args.builds:
        cmd += ["--builds", str(args.builds)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    cmd += args.gate_args.split()
    json_out = repo / f"gate-{time.monotonic_ns()}.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.monotonic()
    res = subprocess.run(
        [*cmd, "--json", str(json_out)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=args.max_time * 20 + 300,
    )
    seconds = time.monotonic() - t0
    doc = json.loads(json_out.read_text()) if json_out.exists() else {}
    json_out.unlink(missing_ok=True)
    (verdict,) = doc.get("results") or [None]
    return {
        "exit": res.returncode,
        "seconds": seconds,
        "load_1m": os.getloadavg()[0],
        "verdict": verdict,
        "stderr": res.stderr[-2000:] if res.returncode not in (0, 1, 5) or verdict is None else "",
    }


@contextlib.contextmanager
def _busy(n: int):
    """`n` processes spinning at normal priority beside the gate (stopped afterwards)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(1.0 if n else 0.0)
        yield
    finally:
        for q in procs:
            q.kill()
            q.wait()


def main() -> None:
    from perfsuite.compare.paired_gate import wilson_interval

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--slowdown", type=float, default=0.05)
    p.add_argument("--max-time", type=float, default=15.0)
    p.add_argument("--builds", type=int, default=None, help="the gate's --builds (default: its own)")
    p.add_argument(
        "--matmuls", type=int, default=None, help="the padding's matmuls (default: sized to --slowdown here)"
    )
    p.add_argument("--batch", type=int, default=4, help="tiny_gpt's batch (1: a shorter step)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--kinds", default="same,slow", help="commits gated: same, layout, slow, fast (comma-separated)")
    p.add_argument("--workload", choices=("tiny_mlp", "tiny_gpt"), default="tiny_mlp")
    p.add_argument("--loads", default="0", help="busy processes beside each gate, cycled per trial (e.g. 0,2,4)")
    p.add_argument("--gate-args", default="", help="more arguments for every gate (e.g. '--undecided pass')")
    args = p.parse_args()
    if args.out.exists():
        sys.exit(f"{args.out} exists")

    count, estimated = _padding_count(args.slowdown, args.threads, args.workload, args.batch)
    if args.matmuls:  # the same padding as another run of this script (a reference, a rerun)
        estimated, count = estimated * args.matmuls / count, args.matmuls
    with tempfile.TemporaryDirectory(prefix="gate-sides-") as tmp:
        same = _project(Path(tmp), "same")
        (same / "NOTES.md").write_text("a change that does not touch the step\n")
        _git(same, "add", "-A")
        _git(same, "commit", "-qm", "notes")
        slow = _project(Path(tmp), "slow")
        model = slow / "myproj" / "model.py"
        text = model.read_text().replace("import torch\n", "import torch\n" + PADS, 1)
        ret = RETURNS[args.workload]
        assert ret in text, f"no {ret!r} in the model file"
        model.write_text(text.replace(ret, PADDING.format(count=count, fraction=estimated) + ret, 1))
        _git(slow, "add", "-A")
        _git(slow, "commit", "-qm", "a slower forward")

        layout = _project(Path(tmp), "layout")
        model = layout / "myproj" / "model.py"
        text = model.read_text()
        model.write_text(text.replace("import torch\n", "import torch\n" + LAYOUT_CHANGE, 1))
        _git(layout, "add", "-A")
        _git(layout, "commit", "-qm", "an unused buffer: layout only")

        # fast: the padded forward is the base and the commit removes the padding (a real speed-up
        # of about the same size: a gate must never call it slower).
        fast = _project(Path(tmp), "fast")
        model = fast / "myproj" / "model.py"
        plain = model.read_text()
        model.write_text((slow / "myproj" / "model.py").read_text())
        _git(fast, "add", "-A")
        _git(fast, "commit", "-qm", "a slower forward")
        model.write_text(plain)
        _git(fast, "add", "-A")
        _git(fast, "commit", "-qm", "the padding removed")

        repos = {"same": same, "slow": slow, "layout": layout, "fast": fast}
        kinds = args.kinds.split(",")
        loads = [int(x) for x in args.loads.split(",")]
        runs = []
        for i in range(args.trials):  # alternate, so every kind sees the same stretch of the machine's load
            load = loads[i % len(loads)]
            order = kinds if i % 2 == 0 else kinds[::-1]
            with _busy(load):
                for kind in order:
                    r = _gate(repos[kind], args)
                    truth = {"slow": 1 + estimated, "fast": 1 / (1 + estimated)}.get(kind, 1.0)
                    v = r["verdict"]
                    covered = bool(v) and v["interval"][0] <= truth <= v["interval"][1]
                    runs.append({"kind": kind, "trial": i, "busy": load, "truth": truth, "covered": covered, **r})
                    # Every gate kept as it ends: an interrupted experiment keeps what it measured.
                    partial = args.out.with_suffix(".partial.json")
                    partial.parent.mkdir(parents=True, exist_ok=True)
                    partial.write_text(json.dumps({"runs": runs}, indent=1))
                    print(
                        f"{kind} {i} busy {load}: exit {r['exit']} in {r['seconds']:.0f}s, load {r['load_1m']:.1f}"
                        + (
                            f", {r['verdict']['word']}, median ratio {r['verdict']['median_ratio']:.3f}"
                            f" ({r['verdict']['interval'][0]:.3f}-{r['verdict']['interval'][1]:.3f})"
                            f" pairs {r['verdict']['pairs']}"
                            if r["verdict"]
                            else f" {r['stderr'][-300:]}"
                        ),
                        flush=True,
                    )
    out = {
        "trials": args.trials,
        "slowdown_requested": args.slowdown,
        "matmuls_added": count,
        "slowdown_estimated": estimated,
        "max_time": args.max_time,
        "builds": args.builds,
        "threads": args.threads,
        "workload": args.workload,
        "batch": args.batch,
        "loads": loads,
        "runs": runs,
    }
    for kind in kinds:
        mine = [r for r in runs if r["kind"] == kind]
        flagged = sum(r["exit"] == 1 for r in mine)
        errors = sum(r["exit"] not in (0, 1, 5) for r in mine)
        words = {
            w: sum(1 for r in mine if r["verdict"] and r["verdict"].get("word") == w)
            for w in ("slower", "faster", "same", "undecided")
        }
        lo, hi = wilson_interval(flagged, len(mine))
        covered = sum(r["covered"] for r in mine)
        # A wrong word: slower of a change that is not slower, faster of one that is not faster.
        wrong = sum(
            1
            for r in mine
            if r["verdict"]
            and (
                (r["verdict"]["word"] == "slower" and r["truth"] <= 1.0)
                or (r["verdict"]["word"] == "faster" and r["truth"] >= 1.0)
            )
        )
        out[kind] = {
            "flagged": flagged,
            "of": len(mine),
            "errors": errors,
            "ci95": [lo, hi],
            "words": words,
            "covered": covered,
            "wrong_words": wrong,
            "by_load": {
                str(n): {"of": len(m), "covered": sum(r["covered"] for r in m), "seconds": [r["seconds"] for r in m]}
                for n in loads
                for m in [[r for r in mine if r["busy"] == n]]
            },
        }
        print(
            f"{ {'same': 'unchanged', 'layout': 'layout only'}.get(kind, f'+{estimated:.1%}') }: slower {flagged}/{len(mine)} "
            f"(95% CI {lo:.0%}-{hi:.0%}), words {words}, {errors} errors, truth covered {covered}/{len(mine)}, wrong words {wrong}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    args.out.with_suffix(".partial.json").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
