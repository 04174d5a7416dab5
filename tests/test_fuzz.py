"""Hostile input, generated: no input a user can give ends in a traceback or a misleading exit code.

Each property drives the real CLI in-process (`cli.main`) and asserts: the exit code is one that
means "bad input" (2) or a legitimate outcome, never 1 ("slower", which CI would read as a
regression) for a malformed file, never 4 (an internal error: a bug); no traceback on the console;
and nothing measured before is lost. Example counts are kept small so `make test` stays quick;
`HYPOTHESIS_PROFILE=long pytest tests/test_fuzz.py` tries many more.
"""

import json
import os
import string

import pytest
import yaml

# A dev dependency (`make setup` installs it); the GPU machine may lack it: skip there, say why.
pytest.importorskip("hypothesis", reason="hypothesis is not installed (pip install -e '.[dev]')")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from perfsuite.cli import app as cli

settings.register_profile(
    "default",
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.register_profile(
    "long",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

BAD_INPUT = 2


def _cli(capsys, *argv) -> tuple[int, str]:
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's own refusal (`-p` with no value): exit 2 and a usage line
        code = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, out + err
    assert code != cli.EXIT_INTERNAL, f"internal error for {argv}: {err}"
    return code, out + err


# --- parameters -----------------------------------------------------------------------------------
param_text = st.text(alphabet=string.printable, max_size=30)
param_item = st.one_of(
    param_text,
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(["n", "dtype", "size", "batch_size", "x", ""]), param_text),
)


@given(
    items=st.lists(param_item, min_size=1, max_size=3),
    device=st.sampled_from(["cpu", "auto", "cuda:abc", "cuda:7", "tpu", ""]),
)
def test_any_parameter_text_is_bad_input_or_a_plan(capsys, tmp_path_factory, items, device):
    """`perfsuite run matmul -p ...`: with a budget of zero cases measured (the output path is a
    folder that cannot be a file), every outcome is decided before measuring."""
    out = tmp_path_factory.mktemp("o")  # an existing folder: --out must refuse it before measuring
    argv = ["run", "matmul", "--device", device, "--max-time", "0.05", "--out", out]
    for item in items:
        argv += ["-p", item]
    code, text = _cli(capsys, *argv)
    assert code == BAD_INPUT, text


# --- suite files ------------------------------------------------------------------------------------
yaml_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 10**6), st.floats(allow_nan=True), st.text(max_size=12)
)
yaml_value = st.recursive(
    yaml_scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=12,
)
entry = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.sampled_from(["ok", "../x", "/abs/victim", ".hidden", "a" * 200]), yaml_scalar),
        "workload": st.one_of(st.sampled_from(["matmul", "noop", "resnet", "nope"]), yaml_scalar),
        "kind": st.one_of(st.sampled_from(["run", "pair", "amp", "other"]), yaml_scalar),
        "params": yaml_value,
        "max_time": yaml_scalar,
        "vary": yaml_value,
        "pairs": st.one_of(st.sampled_from(["many", 0, -1, 2]), yaml_scalar),
        "steps": yaml_scalar,
        "precisions": yaml_value,
    },
)
suite_doc = st.one_of(
    yaml_value,
    st.fixed_dictionaries(
        {"suites": st.lists(entry, max_size=3)},
        optional={
            "name": yaml_scalar,
            "device": st.sampled_from(["cpu", "cuda:x", 3]),
            "max_time": yaml_scalar,
            "output": yaml_scalar,
        },
    ),
)


@given(doc=suite_doc)
def test_any_suite_file_is_valid_or_refused_with_a_config_error(tmp_path_factory, doc):
    """Whatever the YAML holds, loading it gives a suite or a ConfigError naming the key (the CLI
    prints that and exits 2), never another exception."""
    from perfsuite.core.errors import ConfigError
    from perfsuite.suite.file import load_suite

    path = tmp_path_factory.mktemp("s") / "suite.yaml"
    path.write_text(yaml.safe_dump(doc))
    try:
        suite = load_suite(path)
    except ConfigError as exc:
        assert str(exc)
        return
    for e in suite.entries:  # what was accepted is safe to write under --out
        assert "/" not in e.name and not e.name.startswith(".")


@given(blob=st.binary(max_size=200))
def test_binary_or_garbage_suite_files_are_bad_input(capsys, tmp_path_factory, blob):
    path = tmp_path_factory.mktemp("s") / "suite.yaml"
    path.write_bytes(blob)
    code, text = _cli(capsys, "run", "--config", path, "--out", tmp_path_factory.mktemp("o") / "x", "--device", "cpu")
    # Garbage that happens to be a valid suite would run: only refusals are expected from bytes.
    assert code == BAD_INPUT, text


# --- results files ----------------------------------------------------------------------------------
json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=20,
)


def _record_like(draw_value):
    return st.fixed_dictionaries(
        {
            "format": st.just("perfsuite.results"),
            "schema_version": st.one_of(st.just(1), st.integers(), draw_value),
            "records": st.one_of(st.lists(draw_value, max_size=3), draw_value),
        }
    )


results_doc = st.one_of(
    json_value,
    _record_like(json_value),
    st.fixed_dictionaries({"machine_info": json_value, "benchmarks": st.lists(json_value, max_size=3)}),
    st.fixed_dictionaries({"result_columns": json_value, "results": st.dictionaries(st.text(max_size=8), json_value)}),
)


@given(doc=results_doc)
def test_any_results_file_is_bad_input_for_compare_never_a_slowdown(capsys, tmp_path_factory, doc):
    path = tmp_path_factory.mktemp("r") / "r.json"
    path.write_text(json.dumps(doc))
    code, text = _cli(capsys, "compare", path, path)
    # A file compared with itself is never slower; a malformed one is bad input, never exit 1.
    assert code in (0, BAD_INPUT), text


@pytest.mark.parametrize("depth", [10_000, 100_000])
def test_deeply_nested_json_is_bad_input(capsys, tmp_path, depth):
    path = tmp_path / "deep.json"
    path.write_text("[" * depth + "]" * depth)
    code, text = _cli(capsys, "compare", path, path)
    assert code == BAD_INPUT and "deep.json" in text


# --- Nsight Compute CSV exports ---------------------------------------------------------------------
csv_cell = st.one_of(
    st.sampled_from(
        [
            "",
            "n/a",
            "1,234",
            "-1",
            "nan",
            "inf",
            "1e400",
            "0",
            "12.5",
            '"x"',
            "usecond",
            "Kbyte",
            "Gcycle/s",
            "\ufeffID",
        ]
    ),
    st.text(max_size=8),
)
csv_header = st.lists(
    st.sampled_from(
        [
            "ID",
            "Kernel Name",
            "Metric Name",
            "Metric Unit",
            "Metric Value",
            "gpu__time_duration.sum",
            "dram__bytes.sum",
            "sm__cycles_elapsed.avg",
            "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
            "sm__ops_path_tensor_src_fp16.sum",
            "==PROF== x",
        ]
    ),
    min_size=1,
    max_size=7,
)


@given(header=csv_header, rows=st.lists(st.lists(csv_cell, max_size=8), max_size=5), page=st.sampled_from(["", "raw"]))
def test_any_ncu_csv_is_read_or_refused_by_name(capsys, tmp_path_factory, header, rows, page):
    folder = tmp_path_factory.mktemp("ncu")
    lines = [",".join(f'"{h}"' for h in header)] + [",".join(f'"{c}"' for c in row) for row in rows]
    csv = folder / "step.csv"
    csv.write_text("\n".join(lines) + "\n")
    argv = ["roofline", csv, "--peak-compute", "50", "--peak-bw", "3000", "--out", folder / "c.png"]
    code, text = _cli(capsys, *argv)
    assert code in (0, BAD_INPUT), text


def test_a_second_run_into_a_locked_suite_folder_fails_at_once(tmp_path):
    """Two suite runs into one folder measured every case twice; the folder is now locked."""

    from perfsuite.core.errors import ConfigError
    from perfsuite.storage.folder import ResultsFolder

    with ResultsFolder(tmp_path, lock=True):
        with pytest.raises(ConfigError, match="in use by another perfsuite run"):
            ResultsFolder(tmp_path, lock=True).__enter__()
    with ResultsFolder(tmp_path, lock=True):  # released with its holder: no stale lock
        pass
    # Held by another process (the kernel's flock, not this object's state): refused the same way.
    import subprocess
    import sys

    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from perfsuite.storage.folder import ResultsFolder\n"
         f"f = ResultsFolder({str(tmp_path)!r}, lock=True).__enter__(); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match="in use by another perfsuite run"):
            ResultsFolder(tmp_path, lock=True).__enter__()
    finally:
        holder.kill()
        holder.communicate()
    with ResultsFolder(tmp_path, lock=True):  # the kernel let go with its process
        pass


# --- one field of a real record, or of a peak or floors file, replaced by anything -------------------
json_any = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=10,
)
RECORD_FIELDS = [
    "schema_version",
    "id",
    "created",
    "workload",
    "params",
    "device",
    "timing_method",
    "block_size",
    "samples_s",
    "work",
    "warmup",
    "memory",
    "nvml",
    "env",
    "peak",
    "config",
    "converged",
    "warnings",
    "extra",
    "conditions",
    "processes",
    "builds",
]


@given(field=st.sampled_from(RECORD_FIELDS), value=json_any)
def test_a_real_record_with_any_field_replaced_is_read_or_refused(capsys, tmp_path_factory, field, value):
    from records import make_record

    rec = make_record().to_dict()
    rec[field] = value
    folder = tmp_path_factory.mktemp("r")
    path = folder / "r.json"
    path.write_text(json.dumps({"format": "perfsuite.results", "schema_version": 3, "records": [rec]}))
    code, text = _cli(capsys, "compare", path, path)
    assert code in (0, BAD_INPUT), text
    code, text = _cli(capsys, "report", path, "--out-dir", folder / "rep")
    assert code in (0, BAD_INPUT), text
    assert {p.parent for p in folder.rglob("*.png")} <= {folder / "rep"}


@given(doc=json_any, kind=st.sampled_from(["peaks", "noise-floors"]))
def test_any_peak_or_floors_file_is_used_or_refused_before_measuring(capsys, tmp_path_factory, doc, kind):
    from perfsuite.core.errors import RecordError
    from perfsuite.storage.files import load_document

    path = tmp_path_factory.mktemp("d") / "d.json"
    path.write_text(json.dumps({"format": f"perfsuite.{kind}", "schema_version": 1, "results": doc}))
    try:
        got = load_document(path, kind)
    except RecordError as exc:
        assert str(path) in str(exc)
        return
    values = got.values() if kind == "noise-floors" else [x for p in got.values() for x in p["flops_per_s"].values()]
    assert all(v is None or (isinstance(v, (int, float)) and v >= 0 and v == v) for v in values)
