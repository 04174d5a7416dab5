"""Instructions per step under Callgrind (issue 56, item 2): counted outside the timing, in a child;
every way it cannot be counted is said in the record, and the timing stands."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import sys
from pathlib import Path

import pytest
from records import make_record

from perfsuite.compare import work
from perfsuite.compare.records import compare_records
from perfsuite.core.errors import ConfigError, RecordError
from perfsuite.core.record import Record
from perfsuite.measuring import instructions


def _fake_valgrind(tmp_path: Path, version: str, run: str) -> dict:
    """A `valgrind` (and `callgrind_control`) on PATH that prints `version` and runs `run` (shell)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("valgrind", run), ("callgrind_control", "exit 0")):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nif [ "$1" = "--version" ]; then echo "{version}"; exit 0; fi\n{body}\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_the_total_is_read_from_callgrinds_file(tmp_path):
    out = tmp_path / "callgrind.out"
    out.write_text("version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: 123\n\nfn=x\n0 5\ntotals: 2732774\n")
    assert instructions.read_total(out) == 2732774
    out.write_text("events: Ir\nsummary: 4567\n")  # an older Callgrind writes summary only
    assert instructions.read_total(out) == 4567
    out.write_text("events: Ir\n")
    assert instructions.read_total(out) is None
    assert instructions.read_total(tmp_path / "missing") is None


def test_what_is_missing_is_named(tmp_path, monkeypatch):
    assert "not one" in instructions.unavailable("cuda:0")
    monkeypatch.setenv("PATH", str(tmp_path))  # no valgrind anywhere
    assert "valgrind is not installed (apt install valgrind)" in instructions.unavailable("cpu")
    monkeypatch.setenv("PATH", _fake_valgrind(tmp_path, "valgrind-3.10.1", "exit 0")["PATH"])
    assert "valgrind 3.10.1 is too old" in instructions.unavailable("cpu")
    got = instructions.count("matmul", {"n": 64}, "cpu")
    assert got["status"] == "unavailable" and "too old" in got["reason"]
    Record.from_dict({**make_record().to_dict(), "instructions": got})  # the record keeps the reason


def test_a_child_that_fails_is_a_failed_count_with_valgrinds_last_words(tmp_path, monkeypatch):
    monkeypatch.setattr(instructions, "child_folder_path", lambda: str(tmp_path / "count"))
    monkeypatch.setenv(
        "PATH", _fake_valgrind(tmp_path, "valgrind-3.19.0", 'echo "==1== fatal: boom" >&2; exit 1')["PATH"]
    )
    if instructions.unavailable("cpu") is not None:
        pytest.skip(f"this torch cannot be counted at all: {instructions.unavailable('cpu')}")
    got = instructions.count("matmul", {"n": 64}, "cpu")
    assert got["status"] == "failed" and "exit 1" in got["reason"] and "boom" in got["reason"]


# A stand-in for Valgrind's server of counts (perfsuite.measuring.instructions_child): ready, then per
# line on its standard input a count of 3000 in all (per step: 3000 over the steps counted), written where Callgrind writes
# one; a job for the workload "boom" fails in its child, "hang" never answers. Each server start
# and each count is a line in `seen`.
SERVER = """for a in "$@"; do case "$a" in --callgrind-out-file=*) out="${{a#*=}}";; esac; done
echo "start $$" >> {seen}
echo '{{"status": "ready"}}'
n=0
while read line; do
  n=$((n+1)); pid="$$$n"; start=$(date +%s.%N); sleep {pause}
  grep -q '"hang"' job.json && sleep 60
  if grep -q '"boom"' job.json; then
    echo '{{"status": "failed", "reason": "ValueError: boom"}}' > result.json
  else
    printf 'events: Ir\\ntotals: 3000\\n' > "$(echo "$out" | sed "s/%p/$pid/")"
    echo '{{"status": "ok"}}' > result.json
  fi
  echo "count $(pwd) $start $(date +%s.%N)" >> {seen}
  echo "{{\\"status\\": \\"done\\", \\"pid\\": $pid, \\"exit\\": 0}}"
done
sleep {linger}  # a server still busy when asked to end"""


def _fake_server(tmp_path, monkeypatch, pause: float = 0.0, linger: float = 0.0) -> Path:
    seen = tmp_path / "seen"
    body = SERVER.format(seen=seen, pause=pause, linger=linger)
    monkeypatch.setenv("PATH", _fake_valgrind(tmp_path, "valgrind-3.19.0", body)["PATH"])
    # a folder of this test's own: a real count elsewhere on the machine holds the shared one
    monkeypatch.setattr(instructions, "child_folder_path", lambda: str(tmp_path / "count"))
    if instructions.unavailable("cpu") is not None:
        pytest.skip(f"this torch cannot be counted at all: {instructions.unavailable('cpu')}")
    return seen


def test_every_count_runs_its_child_in_one_folder_one_at_a_time(tmp_path, monkeypatch):
    """The count's folder is in the server's working directory, its argv and its sys.path: a random
    folder per count moved identical code's count by about 0.01% (reports/work/count-state-2026-11-30.md).
    Every count uses one folder, emptied after, and two counts at once take turns in it."""
    import threading

    seen = _fake_server(tmp_path, monkeypatch, pause=0.3)
    got: list[dict] = []
    counts = [threading.Thread(target=lambda: got.append(instructions.count("matmul", {"n": 64}, "cpu")))
              for _ in range(2)]  # fmt: skip
    for t in counts:
        t.start()
    for t in counts:
        t.join()
    assert [g["per_step"] for g in got] == [3000 / instructions.STEPS] * 2, got
    lines = seen.read_text().splitlines()
    assert [x.split()[0] for x in lines] == ["start", "count", "start", "count"]  # one server, then the other
    (_, cwd1, s1, e1), (_, cwd2, s2, e2) = (x.split() for x in lines if x.startswith("count"))
    assert cwd1 == cwd2 and float(s2) >= float(e1)  # one folder, one after the other
    assert list(Path(cwd1).iterdir()) == []  # emptied after


DRIVER = """
import sys, time
from perfsuite.measuring import instructions
instructions.child_folder_path = lambda: sys.argv[1]
counter = instructions.Counter()
counter._start(time.monotonic() + 60, 60)
print(counter._proc.pid, flush=True)
time.sleep(120)
"""


def test_a_counters_server_ends_with_a_driver_killed_by_sigkill(tmp_path, monkeypatch):
    """A driver killed by SIGKILL released the count folder's lock while its server went on under
    Callgrind for minutes (found 2026-11-30): the server now ends with it."""
    import subprocess
    import time

    # a server that says it is ready and then waits, as a real one waits for its next count
    fake = _fake_valgrind(tmp_path, "valgrind-3.19.0", 'echo \'{"status": "ready"}\'; exec sleep 120')
    env = {**os.environ, **fake, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path / "count")], stdout=subprocess.PIPE,
                              text=True, env=env)  # fmt: skip
    server = None
    try:
        server = int(driver.stdout.readline())
        os.kill(server, 0)  # alive while its driver is
        driver.kill()
        driver.wait()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if Path(f"/proc/{server}/stat").read_text().split()[2] == "Z":  # ended, not yet reaped
                    break
            except FileNotFoundError:
                break
            time.sleep(0.1)
        else:
            with contextlib.suppress(ProcessLookupError):  # still ours: not reaped, so not reused
                os.kill(server, signal.SIGKILL)
            pytest.fail(f"the server {server} still runs 30 s after its driver was killed")
    finally:
        driver.kill()
        driver.wait()
        driver.stdout.close()


STEPS_FILE = """
import time
from pathlib import Path

import perfsuite


@perfsuite.workload()
def slow_steps(device: str):
    def step():
        with open(Path(__file__).with_name("calls"), "a") as calls:
            calls.write("x")
        time.sleep(0.4)

    return perfsuite.Step(step, items=1, unit="calls")
"""


def _ended(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"  # ended, not yet reaped
    except FileNotFoundError:
        return True


@contextlib.contextmanager
def _plain_server(tmp_path: Path):
    """The real server of counts and its child under plain Python (a stand-in callgrind_control;
    torch's client requests do nothing outside Valgrind), with one job: `slow_steps`, whose every
    call adds an x to tmp_path/calls and sleeps 0.4 s. Yields the server and its folder."""
    import subprocess

    from perfsuite.measuring.instructions_child import JOB

    env = {**os.environ, **_fake_valgrind(tmp_path, "valgrind-3.19.0", "exit 1"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}  # fmt: skip
    folder = tmp_path / "count"
    folder.mkdir()
    (tmp_path / "steps.py").write_text(STEPS_FILE)
    job = {"workload": "slow_steps", "params": {}, "device": "cpu", "load": [str(tmp_path / "steps.py")], "steps": 3}
    (folder / JOB).write_text(json.dumps(job))
    server = subprocess.Popen([sys.executable, "-m", "perfsuite.measuring.instructions_child", str(folder)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=folder)  # fmt: skip
    try:
        assert json.loads(server.stdout.readline()) == {"status": "ready"}
        yield server, folder
    finally:
        server.kill()
        server.wait()
        server.stdin.close()
        server.stdout.close()


def test_a_counts_child_builds_without_running_the_step_for_its_flops(tmp_path):
    """The child's build makes no FLOP count (nobody reads it there; under Callgrind those runs of
    the step were most of a ResNet18 ci build): the step runs its warm-up and counted calls only."""
    from perfsuite.measuring.instructions_child import RESULT, WARMUP

    with _plain_server(tmp_path) as (server, folder):
        server.stdin.write("count\n")
        server.stdin.flush()
        assert json.loads(server.stdout.readline())["exit"] == 0
        assert json.loads((folder / RESULT).read_text()) == {"status": "ok"}
    assert (tmp_path / "calls").read_text() == "x" * (WARMUP + 3)


def test_a_count_whose_server_ended_stops_and_writes_nothing(tmp_path):
    """A child counting when its server was killed (with its driver) went on alone and wrote its
    result into the count folder, which the next count may own by then. The server is killed during
    the child's warm-up, and the child stops at its next call without writing."""
    import time

    from perfsuite.measuring.instructions_child import CHILD_OUTPUT, RESULT, WARMUP

    child = None
    try:
        with _plain_server(tmp_path) as (server, folder):
            server.stdin.write("count\n")
            server.stdin.flush()
            deadline = time.monotonic() + 60
            while not (folder / CHILD_OUTPUT).exists() and time.monotonic() < deadline:  # made as the child starts
                time.sleep(0.05)
            child = int(Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()[0])
        deadline = time.monotonic() + 30  # the server was killed on leaving the block
        while not _ended(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _ended(child), f"the child {child} still runs 30 s after its server was killed"
        # without the check it finishes its WARMUP + 3 calls (2 s) and writes its result: wait longer
        time.sleep(3)
        assert not (folder / RESULT).exists(), (folder / RESULT).read_text()
        assert len((tmp_path / "calls").read_text()) < WARMUP + 3
    finally:
        if child is not None and not _ended(child):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


def test_a_second_counter_in_the_thread_that_counts_is_refused_not_left_waiting(tmp_path, monkeypatch):
    """A Counter inside another, in one thread, waited for ever on the first one's lock (flock on a
    second descriptor): refused, naming why. Threads and processes still take turns (above)."""
    monkeypatch.setattr(instructions, "child_folder_path", lambda: str(tmp_path / "count"))
    with instructions.child_folder():
        with pytest.raises(RuntimeError, match="already counting in this thread"):
            with instructions.child_folder():
                pass
    with instructions.child_folder():  # free again after the first ended
        pass


def test_a_counter_starts_callgrind_once_for_many_counts_and_again_after_a_failure(tmp_path, monkeypatch):
    """A bisection's commits share one server (Callgrind's start, about 43 s here, paid once). A
    count whose step fails, or that runs past its time, stops the server: it says why, and the
    next count starts another."""
    seen = _fake_server(tmp_path, monkeypatch)
    with instructions.Counter() as counter:
        first = instructions.count("matmul", {"n": 64}, "cpu", counter=counter)
        second = instructions.count("matmul", {"n": 64}, "cpu", counter=counter)
        failed = instructions.count("boom", {}, "cpu", counter=counter)
        after = instructions.count("matmul", {"n": 64}, "cpu", counter=counter)
        hung = instructions.count("hang", {}, "cpu", counter=counter, timeout_s=2)
        last = instructions.count("matmul", {"n": 64}, "cpu", counter=counter)
    assert [c["status"] for c in (first, second, after, last)] == ["ok"] * 4
    assert failed["status"] == "failed" and "ValueError: boom" in failed["reason"]
    assert hung["status"] == "failed" and "did not finish in 2 s" in hung["reason"]
    starts = [x for x in seen.read_text().splitlines() if x.startswith("start")]
    assert len(starts) == 3  # the first, after the failed step, after the one past its time


def test_an_interrupted_counter_kills_its_server_at_once(tmp_path, monkeypatch):
    """Ctrl-C does not reach the server (a session of its own), and a count can take minutes: a
    Counter ended by an exception kills it rather than wait for it to end (this one lingers 30 s)."""
    _fake_server(tmp_path, monkeypatch, linger=30)
    with pytest.raises(KeyboardInterrupt), instructions.Counter() as counter:
        instructions.count("matmul", {"n": 64}, "cpu", counter=counter)
        server = counter._proc
        raise KeyboardInterrupt
    assert server is not None and server.returncode == -signal.SIGKILL


def test_a_step_given_directly_cannot_be_rebuilt_and_says_so():
    import torch

    import perfsuite

    rec = perfsuite.measure(lambda: torch.ones(8).sum(), max_time=0.3, processes=1, instructions=True)
    assert rec.instructions["status"] == "unavailable" and "given directly" in rec.instructions["reason"]


def test_run_asks_for_the_count_after_measuring_and_prints_it(tmp_path, monkeypatch, capsys):
    """The road from `run --instructions` to the record (the real count, under Callgrind, is
    tests/test_user_workloads.py's bisect by instructions, and scripts/instructions_spread.py)."""
    from perfsuite.cli import app

    asked = []

    def fake_count(workload, params, device, load=(), **kw):
        asked.append((workload, params, device))
        return {"status": "ok", "per_step": 2048.0, "total": 10240, "steps": 5, "method": "callgrind", "seconds": 1.0}

    monkeypatch.setattr(instructions, "count", fake_count)
    out = tmp_path / "r.json"
    argv = ["run", "matmul", "-p", "n=64", "--max-time", "0.3", "--processes", "1", "--instructions", "--out", str(out)]
    assert app.main(argv) == 0
    (rec,) = json.loads(out.read_text())["records"]
    assert asked == [("matmul", {"n": 64}, "cpu")] and rec["instructions"]["per_step"] == 2048.0
    said = " ".join(capsys.readouterr().out.split())
    flops = rec["work"]["flops_per_step"]
    assert f"instructions matmul[n=64,dtype=fp32]: 2,048 per step, {flops / 2048:.2f} FLOPs per instruction" in said
    # without the flag, nothing is counted
    assert app.main(argv[:-3] + ["--out", str(tmp_path / "plain.json")]) == 0 and len(asked) == 1


def test_a_runs_cases_share_one_server_of_counts(tmp_path, monkeypatch):
    """Callgrind's start (about 45 s) is paid once a run, not once a case: `run --instructions` over
    two cases starts one server (the stand-in above) and counts both in it, then stops it."""
    from perfsuite.cli import app

    seen = _fake_server(tmp_path, monkeypatch)
    out = tmp_path / "r.json"
    argv = ["run", "matmul", "-p", "n=64,128", "--max-time", "0.3", "--processes", "1", "--instructions",
            "--out", str(out)]  # fmt: skip
    assert app.main(argv) == 0
    records = json.loads(out.read_text())["records"]
    assert [r["instructions"]["status"] for r in records] == ["ok", "ok"], records
    assert [x.split()[0] for x in seen.read_text().splitlines()] == ["start", "count", "count"]


@pytest.mark.slow
def test_a_revisions_step_is_counted_from_its_workload_file_and_code_root(tmp_path):
    """Real counts under Callgrind, the way bisect --instructions counts commits: the workload
    file and the project's code of a checkout (here a copy of examples/my-project), built in the
    child from an empty working folder (its failures are the fake valgrind's tests above)."""
    import shutil

    why = instructions.unavailable("cpu")
    if why is not None:
        pytest.skip(f"instructions cannot be counted here: {why}")
    example = Path(__file__).resolve().parents[1] / "examples" / "my-project"
    counted = []
    with instructions.Counter() as counter:  # one server, as a bisection's commits share one
        for name in ("checkout-1", "checkout-2"):  # identical code at two paths, as two commits' worktrees
            root = tmp_path / name
            shutil.copytree(example, root, ignore=shutil.ignore_patterns(".asv", "__pycache__", ".perfsuite"))
            counted.append(instructions.count(
                "tiny_mlp", {"batch_size": 32}, "cpu", files=[str(root / "bench" / "tiny_mlp.py")],
                code_root=str(root), counter=counter,
            ))  # fmt: skip
    got = counted[0]
    assert got["status"] == "ok" and got["steps"] == instructions.STEPS and got["per_step"] > 100_000, got
    assert got["total"] == pytest.approx(got["per_step"] * got["steps"])
    # Identical code counts the same (each child forked from the server's one state): to the
    # instruction in every run here, and 2 instructions apart (0.00003%) once in a clean-clone CI
    # rehearsal (2026-11-30); a process per count moved it by 0.01-0.12%
    # (reports/work/count-state-2026-11-30.md), a hundred times this bound.
    assert abs(counted[1]["total"] - got["total"]) <= got["total"] * 1e-6, counted


def test_compare_reads_instructions_as_work_beside_the_signature():
    ok = lambda n: {"status": "ok", "per_step": n, "total": int(5 * n), "steps": 5, "method": "callgrind"}  # noqa: E731
    base = make_record(seed=1, instructions=ok(1_000_000.0))
    (same,) = compare_records([base], [make_record(seed=2, instructions=ok(1_000_300.0))]).cases
    assert same.work == work.SAME and "+0.03% instructions per step" in same.what_changed()
    (more,) = compare_records([base], [make_record(seed=2, instructions=ok(1_010_000.0))]).cases
    assert more.work == work.MORE and "+1.00% instructions per step (1,000,000 -> 1,010,000)" in more.what_changed()
    failed = {"status": "failed", "reason": "boom", "method": "callgrind"}
    (unknown,) = compare_records([base], [make_record(seed=2, instructions=failed)]).cases
    assert unknown.work == work.UNKNOWN


def test_a_count_said_ok_without_its_number_is_refused():
    d = make_record().to_dict()
    d["instructions"] = {"status": "ok", "method": "callgrind"}
    with pytest.raises(RecordError, match="instructions.per_step"):
        Record.from_dict(d)
    d["instructions"] = {"status": "great"}
    with pytest.raises(RecordError, match="instructions.status"):
        Record.from_dict(d)


def _commits(n: int):
    from perfsuite.compare.bisection import Commit

    return [Commit(f"{i:040x}", f"commit {i}") for i in range(n + 1)]  # [0] is good


def _counts(per: dict[int, float | None]):
    asked = []

    def count_at(commit):
        i = int(commit.sha, 16)
        asked.append(i)
        value = per[i]
        return {"status": "ok", "per_step": value} if value is not None else {"status": "failed", "reason": f"no {i}"}

    return count_at, asked


@pytest.mark.parametrize("step_at", [1, 2, 5, 7, 8])
def test_bisection_by_count_finds_the_step_with_one_count_per_commit(step_at):
    from perfsuite.compare.count_bisection import bisect_by_count

    commits = _commits(8)
    per = {i: 1_000_000.0 + (12_000.0 if i >= step_at else 0.0) + i for i in range(9)}  # +1.2% at step_at
    count_at, asked = _counts(per)
    run = bisect_by_count(commits[1:], commits[0], count_at)
    assert run.first == commits[step_at] and "bad is +1.2" in run.answer()
    assert len(asked) == len(set(asked)) <= 2 + 3  # good, bad, then log2(8) counts: never one twice


def test_bisection_by_count_skips_what_cannot_be_counted_and_says_so():
    from perfsuite.compare.count_bisection import bisect_by_count

    commits = _commits(4)
    per = {0: 1e6, 1: 1e6, 2: 1e6, 3: None, 4: 1.02e6}
    run = bisect_by_count(commits[1:], commits[0], _counts(per)[0])
    assert run.first is None and run.range == (commits[3], commits[4])  # 3 uncountable: it or 4
    per = {0: 1e6, 1: None, 2: 1.02e6, 3: 1.02e6, 4: 1.02e6}
    run = bisect_by_count(commits[1:], commits[0], _counts(per)[0])
    assert run.range == (commits[1], commits[2])  # 1 skipped, 2 like bad: 1 or 2
    per = {0: 1e6, 1: 1e6, 2: None, 3: 1e6, 4: 1.02e6}
    assert bisect_by_count(commits[1:], commits[0], _counts(per)[0]).first == commits[4]  # a skip before it
    per = {0: 1e6, 1: 1e6, 2: None, 3: None, 4: 1.02e6}
    run = bisect_by_count(commits[1:], commits[0], _counts(per)[0])
    assert run.first is None and run.range == tuple(commits[2:5]) and run.answer().startswith("one of ")
    with pytest.raises(ConfigError, match="--good 0000.*cannot be counted: no 0"):
        bisect_by_count(commits[1:], commits[0], _counts({**per, 0: None})[0])


def test_bisection_by_count_says_when_bad_did_not_move_and_looks_the_other_way_with_faster():
    from perfsuite.compare.count_bisection import bisect_by_count

    commits = _commits(4)
    flat = {i: 1e6 + i for i in range(5)}  # +0.0004%: below the 0.5% threshold
    count_at, asked = _counts(flat)
    run = bisect_by_count(commits[1:], commits[0], count_at)
    assert run.first is None and not run.range and asked == [0, 4] and "does not execute more" in run.answer()
    fewer = {i: 1e6 if i < 2 else 0.9e6 for i in range(5)}
    assert bisect_by_count(commits[1:], commits[0], _counts(fewer)[0]).first is None  # not more
    assert bisect_by_count(commits[1:], commits[0], _counts(fewer)[0], direction=-1).first == commits[2]
