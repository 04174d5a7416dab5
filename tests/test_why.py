"""`perfsuite why` (issues 24 and 36): matching by name and shape, each row's noise floor from
its windows, the reconciliation with the measured difference, and the report saying what the
console says, against hand-built sides and a stored document; the interleaving of the sides with
fake sides (no timing), one real profiler window, and — slow — the built-in activation's custom
autograd Function against torch's built-in, end to end."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfsuite.compare.kinds import load_result
from perfsuite.compare.why import ProfiledSide, WhyResult, WhySide, merge_rounds, why
from perfsuite.compare.why_rows import CHANGED, GONE, NEW, _shape_distance, align

REPO = Path(__file__).resolve().parents[1]


def op(name, us, calls=1, shapes="[[4]]", nbytes=0.0):
    return {
        "name": name,
        "shapes": shapes,
        "calls": calls,
        "self_cpu_us": us,
        "self_device_us": 0.0,
        "self_cpu_bytes": nbytes,
        "self_device_bytes": 0.0,
    }


def test_rows_align_by_name_and_shapes_sorted_by_the_size_of_their_difference():
    a = [op("aten::mm", 100), op("aten::relu", 10), op("aten::mm", 5, shapes="[[2]]")]
    b = [op("aten::mm", 101), op("aten::tanh", 50, nbytes=64), op("aten::mm", 5, shapes="[[2]]")]
    rows = align(a, b, "self_cpu_us")
    assert [(r.name, r.shapes, r.mark) for r in rows][:3] == [
        ("aten::tanh", "[[4]]", NEW),
        ("aten::relu", "[[4]]", GONE),
        ("aten::mm", "[[4]]", ""),
    ]
    assert rows[1].delta_us == -10
    # Without per-window times (as in a document written before they were kept) no row has a
    # floor; a name one side never runs is outside it all the same.
    assert all(r.noise_us is None for r in rows)
    assert [r.within_noise for r in rows] == [False, False, None, None]


def test_explained_share_memory_and_round_trip():
    a = WhySide(
        "A", {"n": 1}, [op("aten::mm", 100), op("aten::relu", 10)], [200e-6] * 5, {"host_peak_delta_bytes": 1000}
    )
    b = WhySide(
        "B",
        {"n": 1},
        [op("aten::mm", 100), op("aten::tanh", 80, nbytes=4096)],
        [300e-6] * 5,
        {"host_peak_delta_bytes": 5096},
    )
    r = WhyResult("w", "cpu", "--vary n=1,2", a, b, steps=5, rounds=4)
    assert r.measured_delta_us == pytest.approx(100)
    assert r.explained == pytest.approx((80 - 10) / 100)
    assert r.memory_delta_bytes == 4096 and [g.name for g in r.grew] == ["aten::tanh"]
    back = WhyResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.to_dict() == r.to_dict()
    from perfsuite.storage.files import atomic_write_text, document

    # Through the versioned document too.
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"why-{os.getpid()}.why.json"
    try:
        atomic_write_text(path, document("why", [r.to_dict()]))
        assert WhyResult.from_dict(load_result(path, "why")[0]).explained == pytest.approx(0.7)
    finally:
        path.unlink(missing_ok=True)


def test_rounds_are_averaged_keeping_each_windows_time_and_an_op_missing_from_a_window_counts_zero_there():
    merged = {o["name"]: o for o in merge_rounds([[op("x", 10), op("y", 4)], [op("x", 20)]])}
    assert merged["x"]["self_cpu_us"] == 15 and merged["y"]["self_cpu_us"] == 2 and merged["y"]["calls"] == 0.5
    assert merged["x"]["windows"]["self_cpu_us"] == [10, 20] and merged["y"]["windows"]["self_cpu_us"] == [4, 0]


def side(label, windows, step_s, memory=None):
    """A side as differential_profile builds it, from canned windows of operators."""
    return WhySide(label, {}, merge_rounds(windows), list(step_s), memory or {})


def pairs(a_s, b_s, n=12, jitter=2e-6):
    """Interleaved blocks' step times: n pairs, each side a little spread."""
    return ([a_s + jitter * (k % 3 - 1) for k in range(n)], [b_s + jitter * ((k + 1) % 3 - 1) for k in range(n)])


def printed(result) -> str:
    from rich.console import Console

    from perfsuite.cli.why import print_why

    console = Console(file=io.StringIO(), width=260, soft_wrap=True)
    print_why(result, console)
    return console.file.getvalue()


def reported(result) -> str:
    """The report's section for `result`, through its JSON as `perfsuite report` reads it."""
    from perfsuite.report.why_section import section

    return "\n".join(section([WhyResult.from_dict(json.loads(json.dumps(result.to_dict())))]))


def report_row(page: str, name: str) -> list[str]:
    """The cells of the report's table row for operator `name`."""
    line = next(line for line in page.splitlines() if f"`{name}`" in line)
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_a_new_operator_with_a_steady_difference_leads_a_noisy_unchanged_one_marked_within_noise():
    # As on the GPT commit that switched to scaled_dot_product_attention: unchanged GELU rows
    # whose per-window time swings more than the new operator costs led the table.
    gelu_a, gelu_b = [100, 900, 150, 850], [1200, 200, 1100, 300]  # +200 us on average, all noise
    sdpa_b = [50, 52, 49, 51]
    bmm_a = [30, 31, 29, 30]
    soft_a, soft_b = [20, 21, 19, 20], [60, 61, 59, 60]  # on both sides, 40 us slower on B in every window
    win_a = [
        [op("aten::gelu", g), op("aten::bmm", m), op("aten::softmax", s), op("aten::addmm", 40)]
        for g, m, s in zip(gelu_a, bmm_a, soft_a)
    ]
    win_b = [
        [
            op("aten::gelu", g),
            op("aten::scaled_dot_product_attention", s),
            op("aten::softmax", t),
            op("aten::addmm", 40),
        ]
        for g, s, t in zip(gelu_b, sdpa_b, soft_b)
    ]
    step_a, step_b = pairs(1000e-6, 1064e-6)
    r = WhyResult("gpt", "cpu", "--base X", side("A", win_a, step_a), side("B", win_b, step_b), steps=5, rounds=4)
    by_name = {row.name: row for row in r.rows}
    gelu = by_name["aten::gelu"]
    assert gelu.delta_us == pytest.approx(200) and gelu.within_noise and gelu.noise_us > 200
    assert by_name["aten::addmm"].within_noise and by_name["aten::addmm"].noise_us == 0
    assert [(row.name, row.mark, row.within_noise) for row in r.rows[:3]] == [
        ("aten::scaled_dot_product_attention", NEW, False),
        ("aten::softmax", "", False),
        ("aten::bmm", GONE, False),
    ]
    assert r.rows[-2:] == [gelu, by_name["aten::addmm"]]  # ranked below every row outside its noise
    # Only the rows outside their noise are reconciled: 50.5 + 40 - 30 us of the measured 66 us
    # (the median of the pairs' differences, 66, 66, 60, ...); GELU's +200 us of noise is left out.
    assert r.measured_delta_us == pytest.approx(66) and r.listed_delta_us == pytest.approx(60.5)
    table = printed(r).splitlines()
    first = next(i for i, line in enumerate(table) if "aten::" in line)
    assert "aten::scaled_dot_product_attention" in table[first] and "new" in table[first]
    gelu_line = next(line for line in table if "aten::gelu" in line)
    assert gelu_line.rstrip(" │").endswith("within")
    assert "explains 92% of the measured difference" in printed(r)
    assert "95% CI +6.0% to +6.6% over 12 pairs" in printed(r)
    # The report says the same: the measured difference of the pairs (a ratio of the medians
    # says +6.4%), each row's interval, the rows within it marked, the reconciliation.
    page = reported(r)
    assert (
        "B - A +66 us (+6.6%; 95% CI +6.0% to +6.6% over 12 pairs of one process a side)" in page
        and "+6.4%" not in page
    )
    assert report_row(page, "aten::gelu")[5:] == ["1.277 ms", "1/1", "", "", "within"]
    assert report_row(page, "aten::scaled_dot_product_attention")[5:] == ["3.77 us", "0/1", "", "new", ""]
    assert "explains 92% of the measured difference" in page
    # A name one side never runs differs however its windows spread: its size is uncertain, not its existence.
    wild = WhyResult(
        "gpt",
        "cpu",
        "--base X",
        side("A", [[op("aten::addmm", 40)]] * 4, step_a),
        side("B", [[op("aten::addmm", 40), op("aten::silu", s)] for s in (145, 99, 38, 65)], step_b),
        steps=5,
        rounds=4,
    )
    silu = wild.rows[0]
    assert silu.name == "aten::silu" and silu.noise_us > silu.delta_us and silu.within_noise is False


def test_an_operator_whose_shapes_changed_is_changed_showing_both_not_new_and_gone():
    mlp_a = [
        op("aten::linear", 10, shapes="[[32, 256], [256, 256], [256]]"),
        op("aten::linear", 3, shapes="[[32, 256], [10, 256], [10]]"),
        op("aten::mm", 7, shapes="[[32, 256]]"),
    ]
    # B's batch doubled, its rows listed in the other order (so pairing by order alone would cross
    # them), and it runs aten::mm on one shape more.
    mlp_b = [
        op("aten::linear", 5, shapes="[[64, 256], [10, 256], [10]]"),
        op("aten::linear", 20, shapes="[[64, 256], [256, 256], [256]]"),
        op("aten::mm", 7, shapes="[[32, 256]]"),
        op("aten::mm", 9, shapes="[[64, 8]]"),
    ]
    rows = {(r.name, r.shapes): r for r in align(mlp_a, mlp_b, "self_cpu_us")}
    assert set(rows) == {
        ("aten::linear", "[[32, 256], [256, 256], [256]] -> [[64, 256], [256, 256], [256]]"),
        ("aten::linear", "[[32, 256], [10, 256], [10]] -> [[64, 256], [10, 256], [10]]"),
        ("aten::mm", "[[32, 256]]"),
        ("aten::mm", "(none) -> [[64, 8]]"),
    }
    assert {key: r.mark for key, r in rows.items() if r.mark != CHANGED} == {("aten::mm", "[[32, 256]]"): ""}
    big = rows["aten::linear", "[[32, 256], [256, 256], [256]] -> [[64, 256], [256, 256], [256]]"]
    assert big.delta_us == 10 and big.to_dict()["mark"] == CHANGED
    # What pairs: the same shape, then the nearest; an unreadable shape is far from everything.
    assert _shape_distance("[[32, 256]]", "[[64, 256]]") < _shape_distance("[[32, 256]]", "[[32, 256], []]")
    assert _shape_distance("[[1]]", "not a list") == _shape_distance("[[1]]", "[[") == 1000


def test_listed_differences_far_above_the_measured_one_are_not_called_a_share_of_it():
    # The profiler's cost per call in every self time: B's many small calls weigh 1.9 ms under the
    # profiler against a measured 1 ms.
    win_a = [[op("aten::add", 100 + k, calls=2)] for k in range(4)]
    win_b = [[op("aten::add", 100 + k, calls=2), op("aten::mul", 1900 + k, calls=400)] for k in range(4)]
    over = WhyResult(
        "w",
        "cpu",
        "--base X",
        side("A", win_a, pairs(5e-3, 5e-3)[0]),
        side("B", win_b, pairs(5e-3, 6e-3)[1]),
        steps=5,
        rounds=4,
    )
    assert over.listed_delta_us / over.measured_delta_us == pytest.approx(1.9, rel=0.01)
    assert over.explained is None and over.to_dict()["explained"] is None
    text = printed(over)
    assert "1.9 times it, so they cannot be reconciled" in text
    assert "400 more operator calls per step: A 2, B 402" in text
    assert "190%" not in text and "explains" not in text
    # Nor in the report: its sentence, no share ("explain -" or a percentage of the difference).
    page = reported(over)
    assert "1.9 times it, so they cannot be reconciled" in page and "400 more operator calls per step" in page
    assert "190%" not in page and "explain" not in page
    # A measured difference inside its own interval is no denominator either.
    same = WhyResult(
        "w",
        "cpu",
        "--base X",
        side("A", win_a, pairs(5e-3, 5e-3)[0]),
        side("B", win_b, pairs(5e-3, 5e-3)[1]),
        steps=5,
        rounds=4,
    )
    assert same.measured_within_noise and same.explained is None
    assert "within its noise (95% CI" in same.reconciliation
    assert "within its noise (95% CI" in reported(same) and "explain" not in reported(same)
    # Pointing the other way: B's operators cost more, its step less.
    other = WhyResult(
        "w",
        "cpu",
        "--base X",
        side("A", win_a, pairs(5e-3, 5e-3)[0]),
        side("B", win_b, pairs(5e-3, 4e-3)[1]),
        steps=5,
        rounds=4,
    )
    assert other.explained is None and "point the other way" in other.reconciliation
    # And reconcilable: 1.9 ms of a measured 2 ms.
    fits = WhyResult(
        "w",
        "cpu",
        "--base X",
        side("A", win_a, pairs(5e-3, 5e-3)[0]),
        side("B", win_b, pairs(5e-3, 7e-3)[1]),
        steps=5,
        rounds=4,
    )
    assert fits.explained == pytest.approx(0.95, rel=0.01)
    assert "explains 95% of the measured difference" in printed(fits)


class FakeSide(ProfiledSide):
    """Canned operators and a step time; logs the order of its requests."""

    def __init__(self, label, ops, step_s, log, clock):
        self.label, self.params, self.ops, self.step_s, self.log, self.clock = label, {}, ops, step_s, log, clock

    def profile(self, steps):
        self.log.append(("profile", self.label))
        return self.ops

    def time(self, n):
        self.log.append(("time", self.label))
        self.clock[0] += self.step_s * n
        return self.step_s * n

    def memory(self):
        return {"host_peak_delta_bytes": 0}


def test_the_sides_are_profiled_and_timed_interleaved_a_b_then_b_a():
    log, clock = [], [0.0]
    a = FakeSide("A", [op("aten::mm", 100)], 1e-3, log, clock)
    b = FakeSide("B", [op("aten::mm", 100), op("aten::tanh", 30)], 1.03e-3, log, clock)
    r = why("w", "cpu", "test", a, b, lambda: clock[0], steps=2, rounds=4)
    profiles = [who for what, who in log if what == "profile"]
    assert profiles == ["A", "B", "B", "A", "A", "B", "B", "A"]
    timed = [who for what, who in log if what == "time"][2:]  # after one step of each to size blocks
    assert timed[:4] == ["A", "B", "B", "A"] and len(timed) % 2 == 0
    assert r.listed[0].name == "aten::tanh" and r.explained == pytest.approx(1.0)
    assert r.notes == []  # a 3% difference is not called noise
    # sides with no work signature (as an older perfsuite's): the kind of change is not claimed
    assert r.work == "work not recorded" and r.kind_said() == "work not recorded"


def test_profile_ops_counts_one_steps_operators():
    import torch

    from perfsuite.profiling.ops import profile_ops

    x = torch.randn(64, 64)

    def step():
        torch.tanh(x @ x)

    rows = {r["name"]: r for r in profile_ops(step, steps=3)}
    assert rows["aten::tanh"]["calls"] == 1 and rows["aten::mm"]["calls"] == 1
    assert rows["aten::tanh"]["shapes"] == "[[64, 64]]" and rows["aten::tanh"]["self_cpu_bytes"] == 64 * 64 * 4


def test_a_graph_replayed_steps_device_time_is_shown_by_kernel_not_dropped():
    """Issue 54, item 7: kernels a replayed CUDA graph launches belong to no operator, so dropping
    kernel rows (right where operators hold their time) showed none of the step's device time.
    Profiler rows stood in (the CPU has no CUDA graph): where operators hold the kernels' time the
    kernels stay out; where they do not, the kernels are the device rows and nothing counts twice."""
    from types import SimpleNamespace

    from perfsuite.profiling.ops import by_kernel, device_rows, operator_rows

    def event(key, device_type, cpu_us, device_us):
        return SimpleNamespace(
            key=key, device_type=SimpleNamespace(name=device_type), input_shapes=[], count=2,
            self_cpu_time_total=cpu_us, self_device_time_total=device_us, self_cpu_memory_usage=0,
            self_device_memory_usage=0,
        )  # fmt: skip

    kernels = [event("sm90_gemm", "CUDA", 0, 300), event("elementwise_kernel", "CUDA", 0, 100)]
    eager = operator_rows([event("aten::mm", "CPU", 40, 300), event("aten::relu", "CPU", 10, 100), *kernels], 2)
    assert not by_kernel([eager])
    shown = device_rows(eager, by_kernel([eager]))
    assert [r["name"] for r in shown] == ["aten::mm", "aten::relu"]
    assert sum(r["self_device_us"] for r in shown) == 200  # per step
    replayed = operator_rows([event("cudaGraphLaunch", "CPU", 8, 0), *kernels, event("ProfilerStep#1", "CPU", 1, 0)], 2)
    assert by_kernel([replayed])
    names = {r["name"]: r for r in device_rows(replayed, by_kernel([replayed]))}
    assert set(names) == {"cudaGraphLaunch", "[kernel] sm90_gemm", "[kernel] elementwise_kernel"}
    assert sum(r["self_device_us"] for r in names.values()) == 200 and names["cudaGraphLaunch"]["self_cpu_us"] == 4
    # One side eager, the other replayed: both are read by kernel, so like rows are compared.
    both = by_kernel([eager, replayed])
    a, b = device_rows(eager, both), device_rows(replayed, both)
    assert both and {r["name"] for r in a} >= {"[kernel] sm90_gemm", "[kernel] elementwise_kernel"}
    assert sum(r["self_device_us"] for r in a) == sum(r["self_device_us"] for r in b) == 200
    assert all(r["self_device_us"] == 0 for r in a if not r["name"].startswith("[kernel]"))


def test_why_reads_both_sides_device_time_by_one_rule():
    """Issue 54: each side decided kernel rows alone, so a step near the 95% line could show
    operator rows on one side and kernel rows on the other (a false +100% / -100% pair of rows).
    The differential profile decides once, over both sides' windows."""
    from perfsuite.compare.why import differential_profile

    def rows(held_us):
        return [
            {"name": "aten::mm", "shapes": "[]", "calls": 1.0, "self_cpu_us": 10.0, "self_device_us": held_us,
             "self_cpu_bytes": 0.0, "self_device_bytes": 0.0},
            {"name": "[kernel] gemm", "shapes": "[]", "calls": 1.0, "self_cpu_us": 0.0, "self_device_us": 100.0,
             "self_cpu_bytes": 0.0, "self_device_bytes": 0.0, "kernel": True},
        ]  # fmt: skip

    class Side:
        def __init__(self, label, held_us):
            self.label, self.params, self.held_us = label, {}, held_us

        def profile(self, steps):
            return rows(self.held_us)

        def time(self, n):
            return 1e-3 * n

        def memory(self):
            return {}

    clock = iter(range(10_000))
    a, b = differential_profile(Side("A", 96.0), Side("B", 94.0), lambda: next(clock) * 0.1, rounds=2)
    names_a, names_b = ({o["name"] for o in s.ops if o["self_device_us"]} for s in (a, b))
    assert names_a == names_b == {"[kernel] gemm"}


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


@pytest.mark.slow
def test_why_vary_lists_the_custom_functions_operators_and_the_report_shows_it(tmp_path):
    out = tmp_path / "a.why.json"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfsuite",
            "why",
            "activation",
            "--vary",
            "impl=custom,builtin",
            "-p",
            "numel=65536",
            "--device",
            "cpu",
            "--threads",
            "1",
            "--steps",
            "3",
            "--rounds",
            "2",
            "--json",
            str(out),
        ],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "against the measured" in res.stdout and "_SwishInput" in res.stdout
    (doc,) = json.loads(out.read_text())["results"]
    marks = {r["name"]: r["mark"] for r in doc["rows"]}
    # The hand-written autograd Function's forward and backward run on A only; torch's silu on B only.
    assert marks["_SwishInput"] == GONE and marks["_SwishInputBackward"] == GONE
    assert marks["aten::silu"] == NEW and marks["aten::silu_backward"] == NEW
    from perfsuite.cli import app as cli

    # The report in this process: it reads the document the command wrote (no second interpreter).
    assert cli.main(["report", str(out), "--out-dir", str(tmp_path / "rep")]) == 0
    page = (tmp_path / "rep" / "summary.md").read_text()
    assert "## Why: operators that changed" in page and "`aten::silu`" in page and "against the measured" in page
    # Issue 56, item 3: the kind of change, from the sides' work signatures, on the console and the page
    assert doc["work"] not in ("work not recorded", "same work") and doc["work_changes"], doc
    assert f"kind of change: {doc['work']}" in res.stdout and f"Kind of change: {doc['work']}" in page


def test_a_stored_why_document_comes_back_with_the_same_rows_and_the_report_renders_it():
    from perfsuite.report.why_section import section

    # Written by bisect's why on the slow test's history: good against the commit adding a tanh.
    path = REPO / "tests" / "data" / "stored" / "why-doc1.json"
    (r,) = load_result(path, "why")
    d = json.loads(path.read_text())["results"][0]
    again = r.to_dict()
    assert {k: again[k] for k in ("a", "b", "steps", "rounds", "top", "notes", "metric")} == {
        k: d[k] for k in ("a", "b", "steps", "rounds", "top", "notes", "metric")
    }
    # Its rows, recomputed from the sides: written before rows kept their windows, they have no
    # noise floor, and are ranked by the size of their difference alone.
    assert r.listed[0].name == "aten::tanh" and r.listed[0].mark == NEW
    assert all(row.noise_us is None for row in r.rows) and r.explained == pytest.approx(0.66, abs=0.01)
    assert "explains 66% of the measured difference" in printed(r)
    # The report renders it with the same figures: the measured difference of its 15 pairs (the
    # ratio of the medians is +854.3%), no interval for rows without windows.
    page = "\n".join(section([r]))
    assert (
        "B - A +8.63 ms (+863.0%; 95% CI +754.1% to +1028.2% over 15 pairs of one process a side)" in page
        and "854.3%" not in page
    )
    assert "explains 66% of the measured difference" in page
    assert report_row(page, "aten::tanh")[4:] == ["+3.881 ms", "", "0/1", "", "new", ""]


def test_a_why_document_whose_sides_cannot_be_rendered_is_named_and_the_report_goes_on():
    from perfsuite.report.why_section import section

    a = WhySide("A", {}, [op("aten::mm", 100)], [1e-3] * 6, {})
    good = WhyResult(
        "w", "cpu", "--base X", a, WhySide("B", {}, [op("aten::mm", 130)], [1.03e-3] * 6, {}), steps=5, rounds=1
    ).to_dict()
    empty = {**good, "b": {**good["b"], "step_s": []}}  # hand-edited: no timed blocks
    page = "\n".join(section([WhyResult.from_dict(empty), WhyResult.from_dict(good)]))
    assert "a why document that cannot be read: ValueError" in page
    assert page.count("### w (--base X, cpu)") == 1 and "`aten::mm`" in page


@pytest.mark.slow
def test_why_base_lists_the_new_operator_of_a_users_commit_first_and_bad_input_is_exit_2(tmp_path):
    from test_bisect import SLOW_FWD, SLOW_FWD_NEW, SLOW_INIT, SLOW_INIT_NEW, _commit, _project, _worktrees

    root = _project(tmp_path)
    model = root / "myproj" / "model.py"
    model.write_text(model.read_text().replace(SLOW_INIT, SLOW_INIT_NEW).replace(SLOW_FWD, SLOW_FWD_NEW))
    _commit(root, "a tanh in forward")

    why = (
        "why",
        "tiny_mlp",
        "-p",
        "batch_size=32",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--steps",
        "2",
        "--rounds",
        "2",
    )

    def why_cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "perfsuite", *why, *args],
            cwd=root,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )

    out = tmp_path / "t.why.json"
    res = why_cli("--base", "HEAD~1", "--json", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    (doc,) = json.loads(out.read_text())["results"]
    assert doc["rows"][0]["name"] == "aten::tanh" and doc["rows"][0]["mark"] == NEW, doc["rows"][:3]
    assert doc["a"]["label"] == "base HEAD~1" and doc["b"]["label"] == "working tree"
    # Issue 56, item 3: why says what kind of change it is, exactly, from the sides' work signatures
    assert doc["work"] == "more work" and any("aten.tanh" in c for c in doc["work_changes"]), doc["work_changes"]
    assert "kind of change: more work: " in res.stdout and "aten.tanh" in res.stdout.split("kind of change:")[1]
    assert _worktrees(root) == 1
    from cli_each import perfsuite_each

    bad = (
        (("--base", "nosuch"), "--base nosuch: no such commit"),
        (("--base", "HEAD", "--vary", "width=128,256"), "not allowed with argument"),
        (("--vary", "width=128"), "exactly two values"),
        (("--base", "HEAD", "--json", str(out)), "file exists"),
        (("--base", "HEAD", "--variant", "int9"), "unknown variant 'int9'"),
        (("--vary", "width=128,256", "--variant", "fp16"), "--variant: variant 'fp16' runs on cuda only, not cpu"),
    )
    # One interpreter for them all: each is refused before anything is measured (tests/cli_each.py).
    results = perfsuite_each(root, [(*why, *args) for args, _ in bad], _env())
    for (args, message), res in zip(bad, results):
        assert res.returncode == 2 and message in res.stderr, (args, res.stderr)


def _cuda_op(name, cpu_us, device_us):
    return {**op(name, cpu_us), "self_device_us": device_us}


def test_on_cuda_a_step_the_host_cannot_feed_is_ranked_by_host_time_and_a_busy_gpu_by_device_time():
    # As on the H100: 40 extra small matmuls per step cost the host ~100 us each to launch and the
    # GPU ~6 us each; ranked by device time the table explained a small share of the slowdown.
    a_ops = [_cuda_op("aten::addmm", 30, 5)]
    b_ops = [_cuda_op("aten::addmm", 30, 5), _cuda_op("aten::mm", 4000, 233), _cuda_op("cudaLaunchKernel", 300, 0)]
    a = WhySide("A", {}, a_ops, [1.1e-3] * 5, {})
    b = WhySide("B", {}, b_ops, [5.2e-3] * 5, {})
    host_bound = WhyResult("w", "cuda:0", "--base X", a, b, steps=5, rounds=2)
    assert host_bound.device_busy(b) == pytest.approx(238 / 5200)
    assert host_bound.metric == "self_cpu_us" and host_bound.explained > 0.9
    # The same operators where the GPU is the step's bottleneck: device time.
    busy_b = WhySide("B", {}, [_cuda_op("aten::addmm", 30, 5), _cuda_op("aten::mm", 40, 4000)], [4.2e-3] * 5, {})
    busy_a = WhySide("A", {}, [_cuda_op("aten::addmm", 30, 5)], [0.2e-3] * 5, {})
    device_bound = WhyResult("w", "cuda:0", "--base X", busy_a, busy_b, steps=5, rounds=2)
    assert device_bound.metric == "self_device_us" and device_bound.rows[0].delta_us == 4000
    # Ranked by host time, the memory shown is still the device's.
    grown = WhyResult(
        "w",
        "cuda:0",
        "--base X",
        a,
        WhySide("B", {}, [*b_ops[:1], {**b_ops[1], "self_device_bytes": 1024}], [5.2e-3] * 5, {}),
        steps=5,
        rounds=2,
    )
    assert grown.metric == "self_cpu_us" and [(g.name, g.delta_bytes) for g in grown.grew] == [("aten::mm", 1024)]
    # On the CPU there is no device time to weigh.
    assert WhyResult("w", "cpu", "--base X", a, b, steps=5, rounds=2).device_busy(b) is None


def test_kernel_rows_are_left_out_of_the_operators_their_time_belongs_to():
    from types import SimpleNamespace

    from perfsuite.profiling import ops

    class Kind:
        def __init__(self, name):
            self.name = name

    assert ops._on_the_device(SimpleNamespace(device_type=Kind("CUDA")))
    assert not ops._on_the_device(SimpleNamespace(device_type=Kind("CPU")))
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.mm(torch.ones(8, 8), torch.ones(8, 8))
    assert all(not ops._on_the_device(e) for e in prof.key_averages())  # a real CPU row is kept


def test_a_step_that_allocates_nothing_new_says_so_instead_of_a_zero_peak_each_side():
    # Issue 50: "A 0 B; B 0 B" read as a broken reading.
    a = side("A", [[op("aten::mm", 100)]], [200e-6] * 5, {"host_peak_delta_bytes": 0})
    b = side("B", [[op("aten::mm", 100)]], [200e-6] * 5, {"host_peak_delta_bytes": 0})
    text = printed(WhyResult("w", "cpu", "--vary n=1,2", a, b, steps=5, rounds=1))
    assert "no growth on either side" in text and "A 0 B" not in text
    b = side("B", [[op("aten::mm", 100)]], [200e-6] * 5, {"host_peak_delta_bytes": 8192})
    assert "B - A +8 KiB" in " ".join(printed(WhyResult("w", "cpu", "--vary n=1,2", a, b, steps=5, rounds=1)).split())


def test_the_step_line_says_only_the_paired_difference_not_a_median_that_contradicts_it():
    """Issue 50: the line printed both sides' own medians beside B - A, and they can disagree: here
    nine of twelve pairs say B is 0.26 ms slower, three (a neighbour's burst on A's half) say
    B is 10 ms faster, so B's own median is ~9.7 ms under A's while the paired difference is +0.26 ms."""
    from perfsuite.core.units import fmt_seconds

    a_s = [0.010] * 5 + [0.020] * 7
    b_s = [0.01026] * 5 + [0.02026] * 4 + [0.010] * 3
    r = WhyResult("w", "cpu", "--base X", side("A", [[]], a_s), side("B", [[]], b_s), steps=5, rounds=1)
    assert r.b.median_step_s < r.a.median_step_s - 0.009 and r.measured_delta_us == pytest.approx(260)
    line = r.step_summary()
    assert line.startswith("step (unprofiled, interleaved): A 20 ms, B - A +260 us (+1.3%;"), line
    assert fmt_seconds(r.b.median_step_s) not in line


def test_why_after_bisect_or_history_with_a_variant_profiles_that_variant(monkeypatch):
    """bisect and history --variant found the change on the variant's path; their why profiled the
    eager step (on nanoGPT's int8 bisection, 2026-11-30, it listed eager's operators). The sides
    are now built with the variant, and the result says so."""
    from perfsuite.compare import sides, why_sides
    from perfsuite.core.case import Case, Context
    from perfsuite.core.config import RunConfig
    from perfsuite.core.registry import get

    asked = []

    def start_all(specs, running, pool=None):
        asked.extend(specs)
        raise RuntimeError("stop here: the specs are what is checked")

    monkeypatch.setattr(sides, "start_all", start_all)
    arms = why_sides.WhyArms(("a", "f.py", None), ("b", "f.py", None), "x..y, variant int8-dynamic",
                             variant="int8-dynamic")  # fmt: skip
    with pytest.raises(RuntimeError, match="stop here"):
        arms.measure(Case(get("matmul"), {"n": 64}), RunConfig(device="cpu"), Context())
    assert [s["variant"] for s in asked] == ["int8-dynamic", "int8-dynamic"]
    asked.clear()
    with pytest.raises(RuntimeError, match="stop here"):
        why_sides.WhyArms(("a", "f.py", None), ("b", "f.py", None), "x..y").measure(
            Case(get("matmul"), {"n": 64}), RunConfig(device="cpu"), Context()
        )
    assert [s["variant"] for s in asked] == [None, None]  # no variant: the workload's own step


def test_why_variant_profiles_that_variant_on_both_roads_and_says_so(monkeypatch, capsys):
    """`why --variant` (issue 53): the variant a gate or history followed, profiled directly; the
    comparison's description names it."""
    from perfsuite.cli.app import main
    from perfsuite.compare import why_sides
    from perfsuite.core.errors import ConfigError

    seen = []

    def compare(workload, params, arms, device):
        seen.append((arms.how, arms.variant))
        raise ConfigError("stop here: the arms are what is checked")

    monkeypatch.setattr(why_sides, "compare", compare)
    base = ["why", "matmul", "--device", "cpu", "--variant", "int8-dynamic"]
    assert main([*base, "--vary", "n=64,128"]) == 2
    assert seen == [("--vary n=64,128, variant int8-dynamic", "int8-dynamic")]
    assert main([*base, "--base", "HEAD"]) == 2  # perfsuite's own checkout, in a temporary worktree
    assert seen[1] == ("--base HEAD, variant int8-dynamic", "int8-dynamic")
    assert "stop here" in capsys.readouterr().err


def test_why_times_its_unprofiled_blocks_with_the_gates_clock_and_says_which(monkeypatch):
    """Beside busy processes a wall clock read nanoGPT's int8 flash-attention commit +62% (95% CI
    +51% to +66%) slower where the gates said 7-10% faster: why's blocks take the gate's clock
    (each side's timing thread's CPU time, where the step never waits) and its step line says so."""
    from perfsuite.compare import sides, why_sides
    from perfsuite.core.case import Case, Context
    from perfsuite.core.config import RunConfig
    from perfsuite.core.registry import get

    asked = []

    class Step:
        def time(self, n, cpu_time=False):
            asked.append(cpu_time)
            return 0.001 * n

    class Side:
        label, waits, steps = "s", 0.0, [Step()]

    monkeypatch.setattr(sides, "start_all", lambda specs, running, pool=None: [Side(), Side()])
    monkeypatch.setattr(why_sides, "why", lambda *a: a[-1])  # the clock it was told
    arms = why_sides.WhyArms(("a", "f.py", None), ("b", "f.py", None), "x..y", threads=1)
    said = arms.measure(Case(get("matmul"), {"n": 64}), RunConfig(device="cpu"), Context())
    assert said == "thread CPU time"
    built = why_sides.ProcessSide(Side(), {}, cpu_time=True)
    built.time(3)
    assert asked == [True]
    r = WhyResult("w", "cpu", "--vary n=1,2", WhySide("A", {}, [], [0.010] * 8, {}), WhySide("B", {}, [], [0.011] * 8, {}),
                  steps=5, rounds=4, clock="thread CPU time")  # fmt: skip
    assert r.step_summary().startswith("step (unprofiled, interleaved, thread CPU time): A 10 ms")
