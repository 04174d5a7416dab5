"""The hostile corpus (issue 41 item 5): every case in tests/hostile/*.yaml replayed, each in its own
folder, through `perfsuite.cli.app.main(argv)` in this process (a subprocess where a case needs one:
standard output on /dev/full or closed, a run that may hang).

For every case it checks:
- the exit code the case expects (default 2: bad input is exit 2, never 4 or 1; argparse's refusal,
  SystemExit(2), counts as exit 2);
- no Python traceback on the console (the user's own, which an import error of their workload file
  shows as documented, only where the case says `traceback: user`);
- no raw ESC, BEL, 8-bit CSI/OSC/DCS or bidi override on the console;
- nothing created, changed or removed outside the case's folder: its sibling `outside/` (a victim
  file, a folder, a link target) and the parent folder are compared before and after, and an
  absolute path the corpus aims at (`{abs}`) must not appear;
- nothing measured before a refusal: a case that expects exit 2 (and does not say `measures`)
  must not time anything. What measures is seen from the user's step (it marks a file the first
  time it runs, in any process) and from perfsuite's timing entry points in this process;
- nothing measured then lost: where a case measures and then fails, its `keeps` file holds the
  result, or the message names a file written during the case.

A case's failure message starts with its class: [security: written outside], [security: raw
escapes], [security: secret shown], [traceback], [wrong exit code], [bad value accepted],
[measurement lost], [measured before refusing], [hang], [message]. The corpus's format is
described in tests/hostile/README.md; `HOSTILE_LOG=FILE` records every case's outcome there.

Most cases are refused in milliseconds; the few that start a Python of their own and measure in it
are `slow: true` and replayed by test_hostile_case_slow (marked slow). As elsewhere in the tests,
the runner's full garbage collections (no_gc_pauses) and the 0.3 s window every record's
environment watches other processes for are cut short: neither is under test here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).parent / "hostile"
DATA = Path(__file__).parent / "data"
ABS = "/tmp/perfsuite-hostile-corpus-abs"  # `{abs}`: an absolute path a hostile name aims at
IN_PROCESS_LIMIT_S = 60
SUBPROCESS_LIMIT_S = 60

# What must never reach a console raw: ESC, BEL, the 8-bit CSI/OSC/DCS/ST, bidi overrides/isolates.
RAW = re.compile("[\x1b\x07\x9b\x9d\x90\x9c\u202a-\u202e\u2066-\u2069]")
TRACEBACK = "Traceback (most recent call last)"

SNIPPET_HEADER = '''\
import os as _os
import perfsuite

_marked = False


def _mark():
    """The first time a step runs in a process, note it beside the project (the test sees
    measuring in any process: worker and side processes do not inherit this case's environment)."""
    global _marked
    if not _marked:
        _marked = True
        path = _os.path.join(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))), ".hostile", "measured")
        try:
            fd = _os.open(path, _os.O_WRONLY | _os.O_CREAT | _os.O_APPEND, 0o644)
        except OSError:
            return
        _os.write(fd, b"x")
        _os.close(fd)

'''

DEFAULT_PYPROJECT = '[project]\nname = "hostile"\nversion = "0"\n\n[tool.perfsuite]\nworkloads = ["bench"]\n'


# ---- the corpus --------------------------------------------------------------------------------


def _load_corpus() -> tuple[dict, list[dict]]:
    snippets = yaml.safe_load((CORPUS / "snippets.yaml").read_text())
    cases = []
    for f in sorted(CORPUS.glob("*.yaml")):
        if f.name == "snippets.yaml":
            continue
        for case in yaml.safe_load(f.read_text()) or []:
            case["surface"] = f.stem
            cases.append(case)
    ids = [c["id"] for c in cases]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    assert not dup, f"case ids used twice: {dup}"
    return snippets, cases


SNIPPETS, CASES = _load_corpus()


def test_the_corpus_is_large_and_well_formed():
    known = {
        "id",
        "why",
        "surface",
        "argv",
        "exit",
        "mode",
        "stdout",
        "workload",
        "pyproject",
        "files",
        "results",
        "symlinks",
        "dirs",
        "fifos",
        "readonly",
        "git",
        "env",
        "disk_full",
        "err_has",
        "measures",
        "keeps",
        "absent",
        "traceback",
        "cwd",
        "timeout",
        "unchanged",
        "chmod",
        "err_lacks",
        "setup_argv",
        "background",
        "slow",
    }
    for c in CASES:
        assert set(c) <= known, (c["id"], set(c) - known)
        assert isinstance(c["argv"], list) and all(isinstance(a, (str, int, float)) for a in c["argv"]), c["id"]
        if "workload" in c:
            assert "\n" in c["workload"] or c["workload"] in SNIPPETS, c["id"]
    assert len(CASES) >= 200


# ---- placeholders ------------------------------------------------------------------------------

_LONG = re.compile(r"\{long:(\d+)(?::(.))?\}")
_NEST = re.compile(r"\{nest:(\d+)\}")
_NEST_OBJ = re.compile(r"\{nestobj:(\d+)\}")
_SWEEP = re.compile(r"\{sweep:(\d+)\}")


def fill(text: str, case_dir: Path, outside: Path) -> str:
    text = (
        text.replace("{case}", str(case_dir))
        .replace("{outside}", str(outside))
        .replace("{data}", str(DATA))
        .replace("{abs}", ABS)
        .replace("{repo}", str(REPO))
    )
    text = _LONG.sub(lambda m: (m.group(2) or "x") * int(m.group(1)), text)
    text = _NEST.sub(lambda m: "[" * int(m.group(1)) + "]" * int(m.group(1)), text)
    text = _SWEEP.sub(lambda m: ",".join(str(i) for i in range(1, int(m.group(1)) + 1)), text)
    return _NEST_OBJ.sub(lambda m: '{"a": ' * int(m.group(1)) + "1" + "}" * int(m.group(1)), text)


def _content(spec, case_dir: Path, outside: Path) -> bytes:
    """A file's bytes: a string (UTF-8), or a mapping:
    {parts: [text or {repeat, times}, ...]} for a large one, {copy: PATH, replace: [[old, new]]}
    for an edited copy of a file, {latin1: text} for bytes that are not UTF-8, and any of these
    with `gzip: true` compressed."""
    if isinstance(spec, str):
        return fill(spec, case_dir, outside).encode("utf-8", "surrogatepass")
    if "parts" in spec:
        text = "".join(
            fill(p, case_dir, outside) if isinstance(p, str) else p["repeat"] * int(p["times"]) for p in spec["parts"]
        )
    elif "copy" in spec:
        text = Path(fill(spec["copy"], case_dir, outside)).read_text()
        for old, new in spec.get("replace", []):
            assert old in text, (old, "not in", spec["copy"])
            text = text.replace(old, fill(new, case_dir, outside))
    elif "latin1" in spec:
        data = fill(spec["latin1"], case_dir, outside).encode("latin-1")
        text = None
    else:
        raise AssertionError(f"unknown file spec {spec}")
    if text is not None:
        data = text.encode("utf-8", "surrogatepass")
    if spec.get("gzip"):
        import gzip

        data = gzip.compress(data, compresslevel=1)
    return data


# ---- building a case's folder ------------------------------------------------------------------


def _results_doc(spec: dict) -> str:
    """A results file's text: records from tests/records.make_record, then edits to its dict
    (`edit: [[dotted.path, value], ...]`) and to its text (`replace: [[old, new], ...]`)."""
    from records import make_record

    from perfsuite.storage.files import results_document

    if "raw" in spec:
        return spec["raw"]
    recs = [make_record(**kw) for kw in spec.get("records", [{}])]
    doc = json.loads(results_document(recs, spec.get("failures", [])))
    for path, value in spec.get("edit", []):
        target = doc
        *keys, last = [int(k) if k.isdigit() else k for k in str(path).split(".")]
        for k in keys:
            target = target[k]
        if value == "__delete__":
            del target[last]
        else:
            target[last] = value
    text = json.dumps(doc, indent=1)
    for old, new in spec.get("replace", []):
        assert old in text, (old, "not in the generated results")
        text = text.replace(old, new, 1)
    return text


def _git(case_dir: Path, *argv: str) -> None:
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=hostile",
            "-c",
            "user.email=hostile@example.invalid",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
            *argv,
        ],
        cwd=case_dir,
        check=True,
        capture_output=True,
    )


def _chattr(flag: str, path: Path) -> bool:
    res = subprocess.run(["chattr", flag, str(path)], capture_output=True)
    return res.returncode == 0


def build_case(case: dict, case_dir: Path, outside: Path, frozen: list[Path]) -> list[Path]:
    """Write the case's files; what it makes read-only is added to `frozen` (made writable again
    by the fixture of that name)."""
    for d in case.get("dirs", []):
        (case_dir / fill(d, case_dir, outside)).mkdir(parents=True, exist_ok=True)
    if "workload" in case or "pyproject" in case:
        (case_dir / "pyproject.toml").write_text(fill(case.get("pyproject", DEFAULT_PYPROJECT), case_dir, outside))
    if "workload" in case:
        src = case["workload"]
        src = SNIPPETS[src] if src in SNIPPETS else src
        (case_dir / "bench").mkdir(exist_ok=True)
        (case_dir / "bench" / "w.py").write_text(SNIPPET_HEADER + textwrap.dedent(fill(src, case_dir, outside)))
    for rel, spec in (case.get("files") or {}).items():
        p = case_dir / fill(rel, case_dir, outside)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(_content(spec, case_dir, outside))
    for rel, spec in (case.get("results") or {}).items():
        p = case_dir / fill(rel, case_dir, outside)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(fill(_results_doc(spec), case_dir, outside))
    for rel in case.get("fifos", []):
        p = case_dir / fill(rel, case_dir, outside)
        p.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(p)
    if case.get("git"):
        commits = case["git"] if isinstance(case["git"], int) and case["git"] is not True else 1
        (case_dir / ".gitignore").write_text(".hostile/\n")
        _git(case_dir, "init", "-q")
        for i in range(commits):
            (case_dir / "history.txt").write_text(f"commit {i}\n")
            _git(case_dir, "add", "-A")
            _git(case_dir, "commit", "-q", "-m", f"commit {i}")
            _git(case_dir, "tag", f"c{i}")
    for rel, target in (case.get("symlinks") or {}).items():
        p = case_dir / fill(rel, case_dir, outside)
        p.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(fill(target, case_dir, outside), p)
    for rel, mode in (case.get("chmod") or {}).items():
        os.chmod(case_dir / fill(rel, case_dir, outside), int(str(mode), 8))
    for rel in case.get("readonly", []):
        p = case_dir / fill(rel, case_dir, outside)
        if not p.exists():
            p.mkdir(parents=True)
        if not _chattr("+i", p):
            pytest.skip("this machine cannot make a folder read-only for root (chattr +i)")
        frozen.append(p)
    return frozen


def snapshot(root: Path, skip: Path) -> dict[str, tuple]:
    """Every entry under `root` except `skip`: kind, size, mtime and link target."""
    out = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        here = Path(folder)
        if here == skip:
            dirs[:] = []
            continue
        for name in dirs + files:
            p = here / name
            if p == skip:
                continue
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            out[str(p.relative_to(root))] = (
                st.st_mode,
                st.st_size,
                st.st_mtime_ns,
                os.readlink(p) if os.path.islink(p) else None,
            )
        dirs[:] = [d for d in dirs if here / d != skip]
    return out


# ---- what measures ------------------------------------------------------------------------------


class Measured:
    """perfsuite's timing entry points in this process, each call counted."""

    # (modules, in the order tried: the package was renamed measure -> measuring), function (and
    # its older names: the timing loop was runner.measure before issue 52)
    TARGETS = [
        (("perfsuite.measuring.runner", "perfsuite.measure.runner"), ("time_blocks", "measure")),
        (("perfsuite.measuring.interleave", "perfsuite.measure.interleave"), "interleaved_blocks"),
        (("perfsuite.compare.amp",), "interleaved_times"),
        (("perfsuite.suite.peak",), "measure_peak"),
        (("perfsuite.profiling.trace",), "trace_window"),
    ]

    def __init__(self, monkeypatch) -> None:
        import importlib

        self.calls: list[str] = []
        self.completed: list[str] = []
        for modnames, names in self.TARGETS:
            for modname in modnames:
                try:
                    mod = importlib.import_module(modname)
                    break
                except ImportError:
                    continue
            else:
                raise AssertionError(f"none of {modnames} can be imported: where does perfsuite time now?")
            attr = next((a for a in ((names,) if isinstance(names, str) else names) if hasattr(mod, a)), None)
            if attr is None:
                raise AssertionError(f"{modname} has none of {names}: where does perfsuite time now?")
            original = getattr(mod, attr)
            wrapped = self._wrap(original, f"{modname}.{attr}")
            # every module that imported the function by name calls the counted one
            for other in [m for n, m in list(sys.modules.items()) if n.startswith("perfsuite") and m is not None]:
                if getattr(other, attr, None) is original:
                    monkeypatch.setattr(other, attr, wrapped)
        from perfsuite.compare import sides

        init = sides.Side.__init__
        calls = self.calls

        def side_init(obj, *a, **kw):
            calls.append("perfsuite.compare.sides.Side")
            return init(obj, *a, **kw)

        monkeypatch.setattr(sides.Side, "__init__", side_init)

    def _wrap(self, fn, name):
        calls, done = self.calls, self.completed

        def counted(*a, **kw):
            calls.append(name)
            out = fn(*a, **kw)
            done.append(name)  # a measurement finished: it must end up somewhere
            return out

        return counted


class _Hang(BaseException):
    """Raised by the alarm when an in-process case runs past its limit."""


def _alarm(signum, frame):
    raise _Hang()


# ---- running a case -----------------------------------------------------------------------------


def run_in_process(argv: list[str], capsys, limit: float) -> tuple[int | str, str, str]:
    from perfsuite.cli import app as cli

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        try:
            code: int | str = cli.main(argv)
        except SystemExit as exc:  # argparse's refusal (2), --help (0)
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except _Hang:
            code = "hang"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    out, err = capsys.readouterr()
    return code, out, err


def run_subprocess(argv: list[str], case: dict, case_dir: Path, env: dict) -> tuple[int | str, str, str]:
    cmd = [sys.executable, "-m", "perfsuite", *argv]
    how = case.get("stdout", "pipe")
    timeout = case.get("timeout", SUBPROCESS_LIMIT_S)
    err_path = case_dir / ".hostile" / "stderr.txt"
    out_path = case_dir / ".hostile" / "stdout.txt"
    with open(err_path, "w+", errors="replace") as err_f:
        if how == "devfull":
            stdout = open("/dev/full", "w")
        elif how == "closed":
            stdout = None
        else:
            stdout = open(out_path, "w+", errors="replace")
        try:
            kw = dict(cwd=case_dir, env=env, stdin=subprocess.DEVNULL, stderr=err_f, timeout=timeout)
            if how == "closed":
                shell = " ".join(_shq(a) for a in cmd) + " >&-"
                proc = subprocess.run(shell, shell=True, **kw)
            else:
                proc = subprocess.run(cmd, stdout=stdout, **kw)
            code: int | str = proc.returncode
        except subprocess.TimeoutExpired:
            code = "hang"
        finally:
            if stdout is not None:
                stdout.close()
        err_f.seek(0)
        err = err_f.read()
    out = out_path.read_text(errors="replace") if out_path.exists() else ""
    return code, out, err


def _shq(a: str) -> str:
    import shlex

    return shlex.quote(a)


@pytest.fixture(scope="session")
def short_tmp():
    """Temporary folders with short paths, one per case: a process a case starts keeps its fork
    server's socket there, and a Unix socket's path is at most 107 bytes (pytest's tmp_path is
    too long for it)."""
    import multiprocessing.util

    # The fork server's socket folder is made once per process, where the first start finds the
    # temporary folder: made now, in the usual one, it outlives every case's own.
    multiprocessing.util.get_temp_dir()
    folder = Path(tempfile.mkdtemp(prefix="phc-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def warmed(short_tmp):
    """One measurement before the cases: torch and the measuring code imported. A case stopped at
    its time limit (the alarm raises inside perfsuite) must not interrupt an import half-way, or
    every later case would find torch half-imported."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from perfsuite.cli import app as cli
    from perfsuite.storage import machine_drift

    folder = short_tmp / "warm-up"
    folder.mkdir()
    with pytest.MonkeyPatch.context() as mp, redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        mp.chdir(folder)
        mp.setenv("HOME", str(folder))
        mp.setenv("PERFSUITE_STORE", str(folder / "results.db"))
        mp.setenv(machine_drift.ENV_VAR, str(folder / "machine-speed.jsonl"))
        cli.main(["run", "noop", "--max-time", "0.1", "--processes", "1", "--out", str(folder / "r.json")])
        import torch.profiler  # noqa: F401 - trace, why and bisect's profiler windows


@pytest.fixture
def frozen():
    """Paths a case made read-only (chattr +i): made writable again whatever happens, or pytest
    could not remove the case's folder."""
    paths: list[Path] = []
    yield paths
    for p in paths:
        _chattr("-i", p)


_PATH_TOKEN = re.compile(r"([^\s'\"(),;]+)")  # absolute or relative to the case's folder


def _named_files(text: str, created: set[Path]) -> list[Path]:
    """Files written during the case that the console names (where a measurement was kept; a
    crash log is not such a place)."""
    out = []
    for tok in _PATH_TOKEN.findall(text.replace("\n", " ")):
        p = Path(tok.rstrip(".:")).absolute()
        if p in created and p.is_file() and p.stat().st_size > 0 and "perfsuite-crash-" not in p.name:
            out.append(p)
    return out


def _holds_result(p: Path) -> bool:
    """Whether a kept file holds a result: a results document with at least one record, or any
    other non-empty file (a JSON document of another kind, a log)."""
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return p.stat().st_size > 0
    if isinstance(doc, dict) and isinstance(doc.get("records"), list) and doc.get("format") == "perfsuite.results":
        return len(doc["records"]) > 0
    return bool(doc)


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


# Cases that still fail on perfsuite (issue 41 is open): each is expected to fail, strictly, so a
# fix makes its test fail until its id leaves tests/hostile/known-failures.txt.
KNOWN_FAILURES = set((Path(__file__).parent / "hostile" / "known-failures.txt").read_text().split())


def _cases(cases: list[dict]) -> list:
    return [
        pytest.param(c, id=c["id"], marks=pytest.mark.xfail(strict=True, reason="known defect, issue 41"))
        if c["id"] in KNOWN_FAILURES
        else pytest.param(c, id=c["id"])
        for c in cases
    ]


FAST = [c for c in CASES if not c.get("slow")]
SLOW = [c for c in CASES if c.get("slow")]


@pytest.mark.slow  # about 90 s for 680 cases: the full tier replays them
@pytest.mark.parametrize("case", _cases(FAST))
def test_hostile_case(case, tmp_path, capsys, monkeypatch, forget_workloads, short_tmp, no_gc_pauses, warmed, frozen):
    replay(case, tmp_path, capsys, monkeypatch, short_tmp, frozen)


@pytest.mark.slow
@pytest.mark.parametrize("case", _cases(SLOW))
def test_hostile_case_slow(
    case, tmp_path, capsys, monkeypatch, forget_workloads, short_tmp, no_gc_pauses, warmed, frozen
):
    """The cases that start a Python of their own and measure in it (standard output on
    /dev/full, a step's sys.exit), or fork worker processes: seconds each even when all is well."""
    replay(case, tmp_path, capsys, monkeypatch, short_tmp, frozen)


def replay(case, tmp_path, capsys, monkeypatch, short_tmp, frozen) -> None:
    case_dir, outside = tmp_path / "case", tmp_path / "outside"
    scratch = Path(tempfile.mkdtemp(dir=short_tmp))
    for d in (case_dir / ".hostile" / "home", outside / "dir"):
        d.mkdir(parents=True)
    (outside / "victim.txt").write_text("keep me\n")
    build_case(case, case_dir, outside, frozen)
    mark = case_dir / ".hostile" / "measured"
    hostile = case_dir / ".hostile"
    env = {
        "HOME": str(hostile / "home"),
        "TMPDIR": str(scratch),
        "PERFSUITE_STORE": str(hostile / "store" / "results.db"),
        "PERFSUITE_MACHINE": "test-machine",
        "PERFSUITE_MACHINE_LOG": str(hostile / "machine-speed.jsonl"),
    }
    from perfsuite.storage import machine_drift

    env[machine_drift.ENV_VAR] = env["PERFSUITE_MACHINE_LOG"]
    for k, v in (case.get("env") or {}).items():
        env[k] = fill(str(v), case_dir, outside)
    for k in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "PERFSUITE_MACHINE_LOG"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        if v == "__unset__":
            monkeypatch.delenv(k, raising=False)
        else:
            monkeypatch.setenv(k, v)
    env = {k: v for k, v in env.items() if v != "__unset__"}
    # Every command reads the machine's activity for its record's environment (other processes'
    # CPU use over 0.3 s): a shorter window here, as the gc pauses above, keeps 700 cases in a
    # minute. `perfsuite system --window` still watches as long as it is told.
    from perfsuite.measuring import fingerprint as environment

    monkeypatch.setattr(environment.collect_activity, "__defaults__", (0.02,))
    cwd = case_dir / fill(case.get("cwd", "."), case_dir, outside)
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    if case.get("disk_full"):
        import collections

        from perfsuite.storage import write

        usage = collections.namedtuple("usage", "total used free")
        monkeypatch.setattr(write.shutil, "disk_usage", lambda p: usage(1 << 30, (1 << 30) - 4096, 4096))
    argv = [fill(str(a), case_dir, outside) for a in case["argv"]]
    shutil.rmtree(ABS, ignore_errors=True)
    unchanged = {str(p): (case_dir / fill(p, case_dir, outside)).read_bytes() for p in case.get("unchanged", [])}

    setup_text = ""
    for setup in case.get("setup_argv", []):  # commands the case builds on (an import before a query):
        # their exit is not the case's, but their console is checked as the case's is
        code, out, err = run_in_process([fill(str(a), case_dir, outside) for a in setup], capsys, IN_PROCESS_LIMIT_S)
        setup_text += f"(set-up command exited {code})\n{out}{err}"
    if mark.exists():
        mark.unlink()

    before_outside = snapshot(tmp_path, case_dir)
    before_files = _files(case_dir) | _files(scratch)
    measured = Measured(monkeypatch)
    started = time.monotonic()
    busy = None
    if case.get("background"):  # another process on the machine, running through the case
        busy = subprocess.Popen(
            [sys.executable if a == "{python}" else fill(a, case_dir, outside) for a in case["background"]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.3)  # long enough to be seen busy
    try:
        if case.get("mode") == "subprocess":
            full_env = {**os.environ, **env, "PYTHONPATH": str(REPO)}
            code, out, err = run_subprocess(argv, case, cwd, full_env)
        else:
            code, out, err = run_in_process(argv, capsys, case.get("timeout", IN_PROCESS_LIMIT_S))
    finally:
        for p in frozen:
            _chattr("-i", p)
        if busy is not None:
            busy.kill()
            busy.wait()
    after_outside = snapshot(tmp_path, case_dir)
    written = (_files(case_dir) | _files(scratch)) - before_files
    text = out + err
    # The console wraps long lines (200 columns when piped): a phrase may be split at a space (the
    # space becomes the line break) or inside a long word (nothing lost): look in both joinings.
    flat = text.replace("\n", "")
    spaced = " ".join(text.split())

    def shows(phrase: str) -> bool:
        return phrase in flat or " ".join(phrase.split()) in spaced

    problems: list[str] = []
    expected = case.get("exit", 2)
    expected = expected if isinstance(expected, list) else [expected]
    did_measure = (mark.exists() and mark.stat().st_size > 0) or bool(measured.calls)
    if code == "hang" and did_measure and expected == [2]:
        problems.append(f"[bad value accepted] still measuring after {case.get('timeout', 60)} s (stopped)")
    elif code == "hang":
        problems.append(f"[hang] still running after {case.get('timeout', 60)} s")
    elif code not in expected:
        cls = "bad value accepted" if code == 0 and expected == [2] else "wrong exit code"
        problems.append(f"[{cls}] exit {code}, expected {' or '.join(map(str, expected))}")
    if TRACEBACK in " ".join(setup_text.split()):
        problems.append("[traceback] a Python traceback reached the console (in a set-up command)")
    if shows(TRACEBACK):
        if case.get("traceback") != "user" or shows("perfsuite bug"):
            problems.append("[traceback] a Python traceback reached the console")
    raw = sorted(set(RAW.findall(setup_text + text)))
    if raw:
        problems.append(f"[security: raw escapes] {', '.join(map(repr, raw))} reached the console raw")
    moved = {k for k in set(before_outside) | set(after_outside) if before_outside.get(k) != after_outside.get(k)}
    if moved:
        problems.append(f"[security: written outside] changed outside the case's folder: {sorted(moved)[:5]}")
    if os.path.lexists(ABS):
        problems.append(f"[security: written outside] {ABS} was created")
        shutil.rmtree(ABS, ignore_errors=True)
    for rel in case.get("absent", []):
        p = case_dir / fill(rel, case_dir, outside)
        if os.path.lexists(p):
            problems.append(f"[security: written outside] {rel} was created (through a link or a data-derived name)")
    for rel, data in unchanged.items():
        p = case_dir / fill(rel, case_dir, outside)
        if not p.exists() or p.read_bytes() != data:
            problems.append(f"[security: written outside] {rel} was changed through a link")

    # What was measured: refused first, or kept where the case or the message says.
    keep_globs = [case["keeps"]] if isinstance(case.get("keeps"), str) else case.get("keeps") or []
    finished = bool(measured.completed)  # a measurement finished in this process: a record must be kept
    kept = [
        p
        for g in keep_globs
        for p in case_dir.glob(fill(g, case_dir, outside))
        if p.is_file() and p.stat().st_size > 0 and (_holds_result(p) or not finished)
    ]
    named = [p for p in _named_files(text, written) if _holds_result(p) or not finished]
    what = (measured.calls or ["the user's step"])[0]
    if did_measure and code in (2, 4) and not case.get("measures"):  # to be refused before measuring
        where = f"kept in {(kept + named)[0]}" if kept or named else "nothing kept that the message names"
        cls = "measured before refusing" if kept or named else "measurement lost"
        problems.append(f"[{cls}] it measured ({what}), then ended with exit {code}; {where}")
    elif finished and code in (2, 4) and case.get("measures") is True and not kept and not named:
        problems.append(
            f"[measurement lost] a measurement finished ({what}), then the command ended with exit "
            f"{code}; nothing kept that the message names"
        )
    elif did_measure and code not in (1, 5, "hang") and keep_globs and not kept:
        problems.append(
            f"[measurement lost] it measured ({what}), ended with exit {code}, and "
            f"{' or '.join(keep_globs)} does not hold the result"
        )
    elif finished and code not in (0, 1, 3, 5, 130, "hang") and not kept and not named:
        problems.append(
            f"[measurement lost] a measurement finished ({what}), the command ended with exit {code}, "
            "and no file written during the case is named"
        )
    for bad in case.get("err_lacks", []):
        if shows(fill(bad, case_dir, outside)):
            problems.append(f"[security: secret shown] the console shows {bad!r}")
    for want in case.get("err_has", []):
        if not shows(fill(want, case_dir, outside)):
            problems.append(f"[message] the console does not say {want!r}")
    if os.environ.get("HOSTILE_LOG"):  # a record of every case's outcome, to read why each passed
        with open(os.environ["HOSTILE_LOG"], "a") as log:
            log.write(
                json.dumps(
                    {
                        "id": case["id"],
                        "exit": code,
                        "problems": problems,
                        "console": text[:600],
                        "seconds": round(time.monotonic() - started, 2),
                    }
                )
                + "\n"
            )
    shown = setup_text[-1000:] + text if len(text) < 3000 else text[:1500] + "\n...\n" + text[-1500:]
    assert not problems, (
        f"{case['id']}: perfsuite {' '.join(a[:80] for a in argv)}\n"
        + "\n".join(problems)
        + f"\n--- console ---\n{shown}"
    )
