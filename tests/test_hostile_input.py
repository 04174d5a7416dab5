"""Hostile input, driven through the command line: every bad file or value is exit 2 with a message
naming the file, key and value; nothing is written outside the chosen folder or through a link;
no traceback, no exit 4, no lost result, no silently used value (issue 25).

Each test here failed on the code before the issue (most with exit 4, a silent acceptance, a file
written outside its folder, or a hang)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from records import make_record

from perfsuite.cli import app as cli
from perfsuite.core.text import printable, slug
from perfsuite.storage import read, write
from perfsuite.storage.files import ResultsWriter

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and code != 4, err
    return code, out, err


def results_file(path: Path, *records) -> Path:
    w = ResultsWriter(path)
    for r in records:
        w.add(r)
    return path


def raw_results(path: Path, edit) -> Path:
    """A results file of one record, its dict changed by `edit` (written as the text it returns,
    or as JSON of the dict)."""
    doc = {"format": "perfsuite.results", "schema_version": 3, "records": [make_record().to_dict()], "failures": []}
    text = edit(doc)
    path.write_text(text if isinstance(text, str) else json.dumps(doc))
    return path


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*")}


# ---- 1. files written where the data points ---------------------------------------------------


@pytest.mark.parametrize("name", ["../../outside/evil", "/tmp/perfsuite-hostile-abs/evil", "a/b/c", "x" * 300])
def test_report_keeps_data_derived_names_inside_out_dir(tmp_path, capsys, name):
    src = results_file(tmp_path / "in" / "r.json", make_record(workload=name))
    out = tmp_path / "deep" / "er" / "rep"
    out.mkdir(parents=True)
    before = files_under(tmp_path) - files_under(out)
    code, _, _ = run(capsys, "report", src, "--out-dir", out)
    assert code == 0
    assert files_under(tmp_path) - files_under(out) == before  # nothing new outside out/
    assert not Path("/tmp/perfsuite-hostile-abs").exists()
    pngs = list(out.glob("*.png"))
    assert len(pngs) == 1 and pngs[0].parent == out and len(pngs[0].name) <= 110


def test_report_refuses_to_write_through_a_symlinked_summary(tmp_path, capsys):
    src = results_file(tmp_path / "r.json", make_record())
    out = tmp_path / "rep"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (out / "summary.md").symlink_to(victim)
    code, _, err = run(capsys, "report", src, "--out-dir", out)
    assert code == 2 and "symbolic link" in err
    assert victim.read_text() == "keep me"


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_refuses_a_dangling_symlink_as_out(tmp_path, capsys, fmt):
    pytest.importorskip("pyarrow")
    src = results_file(tmp_path / "r.json", make_record())
    target = tmp_path / "elsewhere" / f"planted.{fmt}"
    target.parent.mkdir()
    link = tmp_path / f"t.{fmt}"
    link.symlink_to(target)
    code, _, err = run(capsys, "export", fmt, src, "--out", link)
    assert code == 2 and "symbolic link" in err
    assert not target.exists()


def test_roofline_chart_refuses_a_dangling_symlink(tmp_path, capsys):
    target = tmp_path / "planted.png"
    link = tmp_path / "r.png"
    link.symlink_to(target)
    code, _, err = run(
        capsys,
        "roofline",
        DATA / "ncu_details.csv",
        "--peak-compute",
        "19.5",
        "--peak-bw",
        "1555",
        "--out",
        link,
        "--summary",
        tmp_path / "s.csv",
    )
    assert code == 2 and "symbolic link" in err
    assert not target.exists()


def _suite(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p


def test_a_suite_lock_that_is_a_dangling_symlink_is_refused(tmp_path, capsys):
    cfg = _suite(tmp_path, "name: t\nmax_time: 0.3\nchecks: false\nsuites: [{workload: noop}]\n")
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "created-by-the-lock"
    (out / ".lock").symlink_to(target)
    code, _, err = run(capsys, "--peak-file", tmp_path / "none.json", "run", "--config", cfg, "--out", out)
    assert code == 2 and "symbolic link" in err
    assert not target.exists() and not (out / "noop.json").exists()


@pytest.mark.parametrize("name", ["../../suites/ci", "/etc/passwd", "../x"])
def test_suite_names_a_shipped_suite_not_a_path(capsys, name):
    code, _, err = run(capsys, "run", "--suite", name)
    assert code == 2 and "--config" in err


def test_compare_shows_escape_sequences_from_data_but_does_not_send_them(tmp_path, capsys):
    evil = "mat\x1b]0;pwned\x07mul\x1b[31m"
    a = results_file(tmp_path / "a.json", make_record(workload=evil, seed=1))
    b = results_file(tmp_path / "b.json", make_record(workload=evil, seed=2))
    code, out, err = run(capsys, "compare", a, b)
    assert code in (0, 1) and "mat" in out
    assert "\x1b" not in out + err and "\x07" not in out + err


def test_report_tables_hold_no_control_characters_or_stray_pipes(tmp_path, capsys):
    src = results_file(tmp_path / "r.json", make_record(workload="a|b\x1b[2J", params={"n": "x|y\r"}))
    code, _, _ = run(capsys, "report", src, "--out-dir", tmp_path / "rep")
    page = (tmp_path / "rep" / "summary.md").read_text()
    assert code == 0 and "\x1b" not in page and "\r" not in page and "x\\|y" in page


# ---- 2. values that travel inward -------------------------------------------------------------


def _set(path, value):
    def edit(doc):
        target = doc["records"][0]
        *keys, last = path
        for k in keys:
            target = target[k]
        target[last] = value

    return edit


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: json.dumps(d).replace('"block_size": 1', '"block_size": ' + "9" * 5001), "5001 digits"),
        (_set(("peak",), {"flops_per_s": "fast"}), "peak.flops_per_s"),
        (_set(("params", "n"), float("nan")), "params.n"),
        (_set(("created",), 5), "created"),
        (_set(("id",), ["x"]), "id"),
        (_set(("block_size",), 2**60), "block_size"),
        (lambda d: json.dumps(d).replace('"samples_s": [', '"samples_s": [1.0], "samples_s": [', 1), "duplicate key"),
    ],
)
def test_bad_results_values_are_exit_2_naming_the_key(tmp_path, capsys, edit, message):
    bad = raw_results(tmp_path / "bad.json", edit)
    good = results_file(tmp_path / "good.json", make_record())
    code, _, err = run(capsys, "compare", good, bad)
    assert code == 2 and str(bad) in err.replace("\n", "") and message in err.replace("\n", "")


def test_a_record_with_too_many_samples_is_refused(tmp_path, capsys):
    from perfsuite.core.documents import MAX_SAMPLES

    def edit(doc):
        text = json.dumps(doc, indent=None)
        return text.replace('"samples_s": [', '"samples_s": [' + "0.001," * MAX_SAMPLES, 1)

    bad = raw_results(tmp_path / "big.json", edit)
    good = results_file(tmp_path / "good.json", make_record())
    code, _, err = run(capsys, "compare", good, bad)
    assert code == 2 and "samples_s" in err


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(read, "MAX_FILE_BYTES", 10_000)
    big = results_file(tmp_path / "big.json", make_record(n=2000))
    good = results_file(tmp_path / "good.json", make_record())
    monkeypatch.setattr(read, "MAX_FILE_BYTES", 10_000)
    code, _, err = run(capsys, "compare", good, big)
    assert code == 2 and "limit" in err


def test_peak_fraction_from_a_string_peak_never_reaches_the_report(tmp_path, capsys):
    bad = raw_results(tmp_path / "bad.json", _set(("peak",), {"flops_per_s": "1e12"}))
    code, out, err = run(capsys, "report", bad, "--out-dir", tmp_path / "rep")
    assert code == 2 and "peak.flops_per_s" in (out + err).replace("\n", "")


def _pytest_benchmark(benchmarks) -> dict:
    return {"machine_info": {}, "benchmarks": benchmarks}


def _bench(name="test_x", group="g", iterations=1, params=None):
    return {
        "name": name,
        "group": group,
        "params": params,
        "stats": {"data": [1e-3, 1.1e-3, 0.9e-3], "iterations": iterations},
    }


@pytest.mark.parametrize(
    "doc, message",
    [
        (_pytest_benchmark([_bench(iterations=0)]), "iterations"),
        (
            _pytest_benchmark([_bench(name="test_a", params={"n": 1}), _bench(name="test_b", params={"n": 1})]),
            "same case",
        ),
    ],
)
def test_pytest_benchmark_files_that_would_be_misread(tmp_path, capsys, doc, message):
    bad = tmp_path / "pb.json"
    bad.write_text(json.dumps(doc))
    code, _, err = run(capsys, "compare", bad, bad)
    assert code == 2 and message in err


def test_asv_params_that_expand_to_a_huge_grid_are_refused_before_expanding(tmp_path, capsys):
    params = [[str(i) for i in range(10)] for _ in range(10)]  # 10^10 combinations
    doc = {
        "result_columns": ["result", "params", "samples"],
        "params": {},
        "results": {"b.time_x": [[1.0], params, [[1e-3]]]},
    }
    bad = tmp_path / "asv.json"
    bad.write_text(json.dumps(doc))
    code, _, err = run(capsys, "compare", bad, bad)
    assert code == 2 and "combinations" in err


@pytest.mark.parametrize(
    "peak, message",
    [
        (float("nan"), "flops_per_s.fp32"),
        ("fast", "flops_per_s.fp32"),
        (-5e10, "flops_per_s.fp32"),
    ],
)
def test_a_bad_peak_file_stops_run_before_measuring_and_leaves_no_claim(tmp_path, capsys, peak, message):
    pf = tmp_path / "peak.json"
    pf.write_text(
        json.dumps(
            {
                "format": "perfsuite.peaks",
                "schema_version": 1,
                "results": {"cpu|x|threads=2": {"flops_per_s": {"fp32": peak}, "bytes_per_s": 1e10}},
            }
        )
    )
    out = tmp_path / "r.json"
    code, _, err = run(capsys, "--peak-file", pf, "run", "noop", "--max-time", "0.3", "--out", out)
    assert code == 2 and message in err.replace("\n", "") and str(pf) in err.replace("\n", "")
    assert not out.exists()
    code, _, _ = run(capsys, "--peak-file", tmp_path / "none.json", "run", "noop", "--max-time", "0.3", "--out", out)
    assert code == 0 and out.exists()  # the same --out works once the input is fixed


@pytest.mark.parametrize(
    "text, message",
    [
        ("suites: [{workload: noop}]\nsuites: [{workload: matmul}]\n", "duplicate key 'suites'"),
        ("suites: [{workload: noop, vary: {x: [1, 2]}}]\n", "suites[0].vary: applies to kind pair only"),
        ("suites: [{workload: noop, pairs: 5}]\n", "suites[0].pairs: applies to kind amp only"),
        ("name: null\nsuites: [{workload: noop}]\n", "name: None is not a safe file name"),
        ("suites: [{workload: noop, name: null}]\n", "suites[0].name: None is not a safe file name"),
        ("suites: [{workload: autoencoder, kind: amp, precisions: 5}]\n", "suites[0].precisions: must be two of"),
        ("suites: [{workload: autoencoder, kind: amp, precisions: [fp32, fp32]}]\n", "with itself"),
        ("output: 5\nsuites: [{workload: noop}]\n", "output: must be a folder's path"),
        ("1: x\nzz: y\nsuites: [{workload: noop}]\n", "unknown key"),
        ("max_time: .nan\nsuites: [{workload: noop}]\n", "max_time: must be a positive number"),
        ("suites: [{workload: noop, name: x.amp}]\n", "suites[0].name: 'x.amp' ends like another kind's file"),
        ("suites: [{workload: 5}]\n", "suites[0].workload: must be a workload's name"),
        (
            "suites: [{workload: matmul, params: {n: [" + ",".join(["256"] * 200) + "], "
            "dtype: [fp32, bf16, fp16, fp32, bf16, fp16, fp32, bf16, fp16, fp32, bf16, fp16, fp32, bf16, fp16, fp32, "
            "bf16, fp16, fp32, bf16, fp16, fp32, bf16, fp16, fp32, bf16, fp16, fp32, bf16, fp16, fp32, bf16, fp16, "
            "fp32, bf16, fp16, fp32, bf16, fp16, fp32, bf16, fp16, fp32, bf16, fp16, fp32, bf16, fp16, fp32, bf16, "
            "fp16, fp32, bf16, fp16]}}]\n",
            "the sweep expands to",
        ),
        (
            "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
            "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
            "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
            "i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]\nj: &j [*i, *i, *i, *i, *i, *i, *i, *i, *i]\n"
            "k: &k [*j, *j, *j, *j, *j, *j, *j, *j, *j]\nl: &l [*k, *k, *k, *k, *k, *k, *k, *k, *k]\n"
            "m: &m [*l, *l, *l, *l, *l, *l, *l, *l, *l]\nsuites: [{workload: noop}]\n",
            "more than 100 aliases",
        ),
    ],
)
def test_invalid_suites_are_exit_2_and_create_nothing(tmp_path, capsys, text, message):
    cfg = _suite(tmp_path, text)
    out = tmp_path / "out"
    code, _, err = run(capsys, "run", "--config", cfg, "--out", out)
    assert code == 2 and message in err.replace("\n", ""), err
    assert not out.exists()


def test_a_bad_peak_file_leaves_no_suite_folder(tmp_path, capsys):
    pf = tmp_path / "peak.json"
    pf.write_text(json.dumps({"x": {"flops_per_s": {"fp32": "NaN"}}}))
    cfg = _suite(tmp_path, "max_time: 0.3\nchecks: false\nsuites: [{workload: noop}]\n")
    out = tmp_path / "out"
    code, _, err = run(capsys, "--peak-file", pf, "run", "--config", cfg, "--out", out)
    assert code == 2 and "flops_per_s" in err
    assert not out.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["gate", "noop", "--threshold", "nan"],
        ["gate", "noop", "--fdr", "2"],
        ["gate", "noop", "--learn-floor", "-3"],
        ["gate", "noop", "--builds", "-1"],
        ["gate", "noop", "--trials", "0"],
        ["compare", "a", "b", "--alpha", "2"],
        ["run", "noop", "--min-time", "nan"],
        ["run", "noop", "--min-time", "-1"],
        ["run", "noop", "--cpus", "99999999999999999999"],
        ["run", "noop", "--threads", "99999999999999999999"],
        ["amp", "autoencoder", "--pairs", "-5"],
    ],
)
def test_numeric_options_out_of_range_are_exit_2_before_anything_runs(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2 and "error: argument" in capsys.readouterr().err


def test_cpus_range_of_a_hundred_billion_is_refused_without_building_it():
    # In a child process with 2 GB of address space: the old parser built the list first.
    code = (
        "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30));"
        "from perfsuite.cli.parser import build_parser; build_parser().parse_args"
        "(['run', 'noop', '--cpus', '0-100000000000'])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 2 and "CPU numbers above" in proc.stderr


def test_compare_with_alpha_two_was_silently_accepted(tmp_path, capsys):
    a = results_file(tmp_path / "a.json", make_record(seed=1))
    with pytest.raises(SystemExit) as exc:
        cli.main(["compare", str(a), str(a), "--alpha", "2"])
    assert exc.value.code == 2


def test_amp_refuses_to_compare_a_precision_with_itself_before_measuring(capsys):
    code, _, err = run(capsys, "amp", "autoencoder", "--precisions", "fp32,fp32")
    assert code == 2 and "with itself" in err


@pytest.mark.parametrize(
    "floors, message",
    [
        ({"matmul[n=256,dtype=fp32]": float("nan")}, "noise-floors"),
        ({"m": "0.02"}, "noise-floors"),
        ({"m": -1}, "noise-floors"),
    ],
)
def test_floors_holding_nan_strings_or_negatives_are_refused(tmp_path, capsys, floors, message):
    a = results_file(tmp_path / "a.json", make_record(seed=1))
    f = tmp_path / "floors.json"
    f.write_text(json.dumps(floors))
    code, _, err = run(capsys, "compare", a, a, "--floors", f)
    assert code == 2 and message in err and str(f) in err.replace("\n", "")


def test_pair_document_with_nan_ratios_is_refused_by_report(tmp_path, capsys):
    src = results_file(tmp_path / "r.json", make_record())
    pair = tmp_path / "x.pair.json"
    pair.write_text(
        json.dumps(
            {
                "format": "perfsuite.pair",
                "schema_version": 1,
                "results": [
                    {"workload": "w", "params": {}, "a": 1, "b": 2, "ratios": [1.0, float("nan")], "time_ratio": 1.0}
                ],
            }
        )
    )
    code, out, _ = run(capsys, "report", src, "--pair", pair, "--out-dir", tmp_path / "rep")
    # Like a bad results file: named and skipped, the report goes on without it.
    assert code == 0 and "skipped" in out and "ratios" in out
    assert "| w |" not in (tmp_path / "rep" / "summary.md").read_text()


def _ncu(tmp_path, old, new) -> Path:
    text = (DATA / "ncu_details.csv").read_text()
    assert old in text
    p = tmp_path / "bad.csv"
    p.write_text(text.replace(old, new, 1))
    return p


@pytest.mark.parametrize(
    "old, new, message",
    [
        ('"Metric Unit","Metric Value"', '"Metric Value","Metric Value"', "appears more than once"),
        ('"Kbyte","800"', '"Kbyte","1,00,0"', "'1,00,0' is not a number"),
    ],
)
def test_nsight_csvs_that_would_be_misread_are_refused(tmp_path, capsys, old, new, message):
    out = tmp_path / "r.png"
    code, _, err = run(
        capsys, "roofline", _ncu(tmp_path, old, new), "--peak-compute", "19.5", "--peak-bw", "1555", "--out", out
    )
    assert code == 2 and message in err.replace("\n", "")
    assert not out.exists()


def test_a_suite_run_entry_named_like_an_amp_document_is_refused(tmp_path, capsys):
    cfg = _suite(tmp_path, "suites: [{workload: noop, name: fast.amp}]\n")
    code, _, err = run(capsys, "run", "--config", cfg, "--out", tmp_path / "o")
    assert code == 2 and "fast.amp" in err


# ---- special files ----------------------------------------------------------------------------


def _cli(*argv, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "import sys; from perfsuite.cli.app import main; sys.exit(main())", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@pytest.mark.parametrize(
    "command", [["report", "--out-dir", "REP"], ["export", "csv", "--out", "OUT.csv"], ["compare", "GOOD"]]
)
def test_a_fifo_named_json_in_a_results_folder_does_not_hang(tmp_path, command):
    folder = tmp_path / "res"
    good = results_file(folder / "good.json", make_record())
    os.mkfifo(folder / "trap.json")
    argv = [
        str(tmp_path / "REP")
        if a == "REP"
        else str(tmp_path / "OUT.csv")
        if a == "OUT.csv"
        else str(good)
        if a == "GOOD"
        else a
        for a in command
    ]
    if command[0] == "compare":
        argv = ["compare", str(good), str(folder / "trap.json")]
    else:
        argv.insert(2 if command[0] == "export" else 1, str(folder))
    proc = _cli(*argv)
    assert "Traceback" not in proc.stderr and "not a regular file" in proc.stdout + proc.stderr
    assert proc.returncode in (0, 2)


def test_closed_stdout_is_exit_2_without_a_traceback():
    proc = subprocess.run(
        f"{sys.executable} -c 'import sys; from perfsuite.cli.app import main; sys.exit(main())' list >&-",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "standard output" in proc.stderr


# ---- the writer and the text filters, property by property --------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_slug_is_a_plain_bounded_file_name(text):
    s = slug(text)
    assert s and "/" not in s and "\0" not in s and not s.startswith(".") and s not in (".", "..")
    assert len(s) <= 100


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_file_in_stays_inside_the_folder(tmp_path_factory, name):
    folder = tmp_path_factory.mktemp("w")
    path = write.file_in(folder, name, ".png")
    assert path.resolve().parent == folder.resolve()
    write.write_bytes(path, b"x")
    assert path.read_bytes() == b"x"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_printable_leaves_no_control_character(text):
    import unicodedata

    assert not any(unicodedata.category(c) in ("Cc", "Cf") for c in printable(text))


def test_two_long_names_sharing_a_start_stay_apart():
    a, b = "w" * 300 + "a", "w" * 300 + "b"
    assert slug(a) != slug(b) and len(slug(a)) <= 100


def test_write_new_refuses_existing_names_and_dangling_links(tmp_path):
    from perfsuite.core.errors import StorageError

    link = tmp_path / "l"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(StorageError, match="exists"):
        write.write_new_text(link, "x")
    assert not (tmp_path / "nowhere").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_full_disk_is_a_storage_error_naming_the_file(tmp_path, monkeypatch):
    import errno

    from perfsuite.core.errors import StorageError

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StorageError, match="No space left"):
        write.write_text(tmp_path / "f.json", "{}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"a": 1, "a": 2}', "duplicate key 'a'"),
        ("[" + "1" * 40 + "]", "40 digits"),
        ("[1,", "not valid JSON"),
    ],
)
def test_the_reading_door(tmp_path, text, message):
    from perfsuite.core.errors import RecordError

    p = tmp_path / "x.json"
    p.write_text(text)
    with pytest.raises(RecordError, match=message):
        read.read_json(p)


def test_old_unversioned_run_config_split_and_sweep_files_still_read(tmp_path):
    from perfsuite.core import documents

    for kind in ("run-config", "split", "qwen-sweep"):
        assert documents.version_of({"digest": "x"}, kind, "f") == 0
        assert documents.version_of(documents.envelope(kind), kind, "f") == documents.VERSIONS[kind]


def test_a_target_too_small_to_advise_on_costs_the_advice_not_the_record(tmp_path, capsys):
    """Issue 51: `run --target-ci 1e-300` measured, then the budget advice overflowed squaring
    hw / 1e-300 and the record was lost (exit 3). The record is kept, the advice still said."""
    out = tmp_path / "r.json"
    code, text, err = run(
        capsys, "run", "noop", "--max-time", "0.3", "--processes", "1", "--target-ci", "1e-300", "--out", out
    )
    assert code == 0, err
    (rec,) = json.loads(out.read_text())["records"]
    assert rec["samples_s"] and "next:" in text + err


def test_a_deleted_working_folder_does_not_break_the_side_workers_import(tmp_path):
    """Issue 51: the side worker read os.getcwd() at import, in the fork server every gate,
    bisect and history starts; with the working folder deleted under the command that was a
    traceback, exit 1."""
    gone = tmp_path / "gone"
    gone.mkdir()
    code = "import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); import perfsuite.compare.side_worker as w; print(w.FRESH_PATH[0])"
    res = subprocess.run(
        [sys.executable, "-c", code, str(gone)], capture_output=True, text=True, timeout=120, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(REPO)


@pytest.mark.parametrize("spec", ["choices=5", "choices='abc'", "min='1'", "max=[3]", "help=7"])
def test_a_malformed_perfsuite_param_is_a_message_not_perfsuites_traceback(tmp_path, capsys, spec, forget_workloads):
    """Issue 51: `perfsuite.param(choices=5)` showed perfsuite's own traceback (tuple(5))."""
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "w.py").write_text(
        "import perfsuite\n\n"
        f"@perfsuite.workload(params={{'n': perfsuite.param(4, {spec})}})\n"
        "def w(n, device):\n"
        "    return perfsuite.Step(lambda: None)\n"
    )
    code, out, err = run(capsys, "--workloads", tmp_path / "bench", "list")
    assert code == 2 and "perfsuite.param" in out + err and spec.split("=")[0] in out + err


def test_sigterm_inside_a_command_is_a_keyboard_interrupt_carrying_its_exit_status():
    """perfsuite.cli.stop: within a command SIGTERM raises Stopped (a KeyboardInterrupt, so every
    road's Ctrl-C cleanup runs), a second one during the cleanup is ignored, and the handlers are
    restored afterwards; a SIGHUP ignored by `nohup` stays ignored."""
    import signal

    from perfsuite.cli.stop import Stopped, stopping_as_interrupt
    from perfsuite.run.execute import interrupted_exit

    before = signal.getsignal(signal.SIGTERM)
    old_hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with pytest.raises(Stopped) as got:
            with stopping_as_interrupt():
                assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
                try:
                    os.kill(os.getpid(), signal.SIGTERM)
                    for _ in range(10**6):  # the handler runs between bytecodes
                        pass
                finally:
                    os.kill(os.getpid(), signal.SIGTERM)  # during the cleanup: ignored
        assert isinstance(got.value, KeyboardInterrupt) and interrupted_exit(got.value) == 143
        assert signal.getsignal(signal.SIGTERM) == before
        assert interrupted_exit(KeyboardInterrupt()) == 130
    finally:
        signal.signal(signal.SIGHUP, old_hup)


def test_a_signal_while_torch_imports_waits_for_the_import_then_acts_as_it_would_have():
    """perfsuite.cli.stop.signals_held: a Ctrl-C inside torch's C++ import aborted the process
    (exit -6, 2 in 24 Ctrl-Cs 1.5 s into `run`). Held, it is delivered when the block ends, with
    the handlers of before: KeyboardInterrupt for SIGINT, Stopped for SIGTERM inside a command."""
    import signal

    from perfsuite.cli.stop import Stopped, signals_held, stopping_as_interrupt

    reached = []
    with pytest.raises(KeyboardInterrupt):
        with signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10**6):  # a handler would have run by now
                pass
            reached.append("end of block")
    assert reached == ["end of block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(Stopped) as got:
        with stopping_as_interrupt(), signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(10**6):
                pass
            reached.append("end of second block")
    assert reached[-1] == "end of second block" and got.value.signum == signal.SIGTERM
    with signals_held():  # nothing sent: nothing raised
        pass


def test_a_broken_torch_is_not_a_perfsuite_bug(tmp_path):
    """Review of the held import: torch imported before the user's files, unguarded, made every
    command naming workloads exit 4 ("a perfsuite bug") where a torch missing its CUDA libraries
    had been told as before (`list` exited 0 at 11bc4df)."""
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("raise OSError('libcudart.so.13: cannot open shared object file')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), str(Path(__file__).resolve().parents[1])])}
    res = subprocess.run(
        [sys.executable, "-m", "perfsuite", "list"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert res.returncode != 4 and "perfsuite bug" not in res.stderr, res.stdout[-2000:] + res.stderr[-2000:]


def test_a_planted_perfsuite_folder_link_is_refused_and_a_new_one_is_kept_out_of_git(tmp_path, capsys, monkeypatch):
    """Issue 51: a committed `.perfsuite` that is a symbolic link sent the bisect log and results.db
    outside the project. Issue 50: a `.perfsuite` perfsuite made showed in `git status` as the
    user's. The state folder is refused as a link; made new, it ignores itself."""
    outside = tmp_path / "outside"
    outside.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    (project / ".perfsuite").symlink_to(outside)
    monkeypatch.chdir(project)
    monkeypatch.delenv("PERFSUITE_STORE", raising=False)
    with pytest.raises(write.StorageError, match="symbolic link"):
        write.check_output(Path(".perfsuite") / "bisect" / "b.json", "--log")
    code, out, err = run(capsys, "run", "noop", "--max-time", "0.2", "--processes", "1", "--out", "r.json")
    assert code == 0 and json.loads(Path("r.json").read_text())["records"]  # the result is kept
    assert list(outside.iterdir()) == []  # nothing went through the link
    assert "symbolic link" in out + err  # the store said why it did not record
    # A project without one: the folder perfsuite makes ignores itself in git.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=fresh, check=True)
    write.check_output(fresh / ".perfsuite" / "history" / "h.json", "--log")
    (fresh / ".perfsuite" / "history" / "h.json").write_text("{}")
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=fresh, capture_output=True, text=True
    )
    assert status.stdout == "" and (fresh / ".perfsuite" / ".gitignore").read_text().endswith("*\n")


def test_a_yaml_alias_bomb_under_the_alias_limit_is_refused_and_merge_keys_are_legal(tmp_path):
    """Issue 51: 73 aliases (fewer than the limit of 100), each level naming the one before ten
    times, expand to 10^8 nodes and ran perfsuite out of memory; the expanded size is counted on
    the shared graph before anything walks it. Legal merge keys (`<<: *base`) were refused."""
    import time

    from perfsuite.core.errors import ConfigError

    bomb = tmp_path / "bomb.yaml"
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 8)]
    bomb.write_text("\n".join(levels) + "\n")
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="nodes once its aliases are expanded"):
        read.read_yaml(bomb)
    assert time.monotonic() - t0 < 5
    merged = tmp_path / "merge.yaml"
    merged.write_text("base: &b {batch_size: 8, width: 64}\ncase:\n  <<: *b\n  width: 128\n")
    assert read.read_yaml(merged)["case"] == {"batch_size": 8, "width": 128}
    twice = tmp_path / "twice.yaml"
    twice.write_text("case:\n  width: 1\n  width: 2\n")
    with pytest.raises(ConfigError, match="duplicate key 'width'"):
        read.read_yaml(twice)


def test_builds_beyond_the_limit_are_refused_before_anything_runs(capsys):
    """Issue 51: `--builds 1000000 --max-time 0.2` hung building a million copies."""
    with pytest.raises(SystemExit) as stop:
        cli.main(["run", "noop", "--builds", "1000000", "--max-time", "0.2"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "--builds" in err and "at most 64" in err
    from perfsuite.core.config import RunConfig
    from perfsuite.core.errors import ConfigError

    with pytest.raises(ConfigError, match="builds must be at most 64"):
        RunConfig(builds=65)


def _list_with_package(site: Path, name: str, metadata: bytes, entry_point: str) -> subprocess.CompletedProcess:
    """`perfsuite list` with an installed package (a .dist-info in `site`, on the path) declaring
    one workload entry point."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_bytes(metadata)
    (info / "entry_points.txt").write_text(f"[perfsuite.workloads]\n{entry_point}\n")
    return subprocess.run(
        [sys.executable, "-m", "perfsuite", "list"], capture_output=True, text=True, timeout=120, cwd=site,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(site)])},
    )  # fmt: skip


def test_a_package_with_unreadable_metadata_is_not_perfsuites_own(tmp_path):
    """Issue 51: an installed package declaring a workload entry point, whose METADATA holds a
    non-UTF-8 byte, made every workload command exit 4 (reading its name to tell it from
    perfsuite's own). Its entry point is loaded as any other: here it names a module that does not
    exist, which is exit 2 naming it."""
    metadata = b"Metadata-Version: 2.1\nName: bad\xff\xfe_pkg\nVersion: 1.0\n"
    res = _list_with_package(tmp_path, "bad_pkg", metadata, "x = no_such_module_anywhere")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "no_such_module_anywhere" in res.stderr and "internal error" not in res.stderr


def test_user_text_is_never_read_as_console_markup(tmp_path, capsys, forget_workloads):
    """Issue 51: a workload docstring holding "[/]" crashed `perfsuite list` (exit 4): rich read it
    as a closing tag. User text is printed as it is, brackets and all."""
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "w.py").write_text(
        "import perfsuite\n\n"
        "@perfsuite.workload(params={'n': perfsuite.param(4, help='a [/] help [bold]x')})\n"
        "def w(n, device):\n"
        '    """Docs with [/] and [red]markup."""\n'
        "    return perfsuite.Step(lambda: None, items=1)\n"
    )
    code, out, err = run(capsys, "--workloads", tmp_path / "bench", "list")
    assert code == 0, err
    assert "Docs with [/] and [red]markup." in out


def test_an_entry_point_that_exits_at_import_is_named_exit_2(tmp_path):
    """Issue 51: an installed workload package calling sys.exit('bye') at import ended perfsuite
    with exit 1 and only 'bye'; it is the package's error, named, exit 2."""
    (tmp_path / "byemod.py").write_text("raise SystemExit('bye')\n")
    res = _list_with_package(tmp_path, "byepkg", b"Metadata-Version: 2.1\nName: byepkg\nVersion: 1.0\n", "bye = byemod")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "entry point bye = byemod" in res.stderr and "bye" in res.stderr


def test_a_closed_stderr_costs_the_messages_not_the_exit_status(tmp_path):
    """Issue 51: started with standard error closed (`2>&-`), every command exited 1 (an
    AttributeError making the error console); it runs, and its exit status means what it says."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for argv, want in ((["list"], 0), (["run", "no_such_workload"], 2)):
        res = subprocess.run(
            [sys.executable, "-m", "perfsuite", *argv], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=tmp_path, env=env, timeout=120, pass_fds=(), preexec_fn=lambda: os.close(2),
        )  # fmt: skip
        assert res.returncode == want, (argv, res.stdout[-500:])


def test_run_keeps_out_of_a_results_folder_the_repository_tracks(tmp_path, capsys, monkeypatch):
    """Issue 50: in a repository whose results/ holds its own tracked files, `perfsuite run` wrote
    its JSON among them. It writes to .perfsuite/results then, and says so; a results/ that git
    holds only a placeholder of (perfsuite's own repository) is used as before."""
    git = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "table.csv").write_text("a,b\n")
    subprocess.run(["git", "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "their results"], check=True)
    code, out, err = run(capsys, "run", "noop", "--max-time", "0.2", "--processes", "1")
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["table.csv"]
    assert len(list((tmp_path / ".perfsuite" / "results").glob("*.json"))) == 1
    assert "tracked by git" in " ".join(out.split())
    subprocess.run(["git", "rm", "-q", "results/table.csv"], check=True)
    (tmp_path / "results").mkdir(exist_ok=True)
    (tmp_path / "results" / ".gitkeep").write_text("")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "a placeholder"], check=True)
    code, out, err = run(capsys, "run", "noop", "--max-time", "0.2", "--processes", "1")
    assert code == 0 and len(list((tmp_path / "results").glob("*.json"))) == 1
