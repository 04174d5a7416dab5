"""The hostile corpus (issue 41 item 5): every case in tests/hostile/*.yaml replayed, each in its own
folder, through `perfsuite.cli.main(argv)` in this process (a subprocess where a case needs one:
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
escapes], [traceback], [wrong exit code], [bad value accepted], [measurement lost], [measured
before refusing], [hang], [message]. The corpus's format is described in tests/hostile/README.md.
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
    """The first time a step runs in a process, note it (the test sees measuring in any process)."""
    global _marked
    if not _marked:
        _marked = True
        path = _os.environ.get("HOSTILE_MARK")
        if path:
            fd = _os.open(path, _os.O_WRONLY | _os.O_CREAT | _os.O_APPEND, 0o644)
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
    known = {"id", "why", "surface", "argv", "exit", "mode", "stdout", "workload", "pyproject", "files", "results",
             "symlinks", "dirs", "fifos", "readonly", "git", "env", "disk_full", "err_has", "measures", "keeps",
             "absent", "traceback", "cwd", "timeout", "unchanged", "chmod", "err_lacks", "setup_argv"}
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


def fill(text: str, case_dir: Path, outside: Path) -> str:
    text = (text.replace("{case}", str(case_dir)).replace("{outside}", str(outside)).replace("{data}", str(DATA))
            .replace("{abs}", ABS).replace("{repo}", str(REPO)))
    text = _LONG.sub(lambda m: (m.group(2) or "x") * int(m.group(1)), text)
    text = _NEST.sub(lambda m: "[" * int(m.group(1)) + "]" * int(m.group(1)), text)
    return _NEST_OBJ.sub(lambda m: '{"a": ' * int(m.group(1)) + "1" + "}" * int(m.group(1)), text)


def _content(spec, case_dir: Path, outside: Path) -> bytes:
    """A file's bytes: a string (UTF-8), or a mapping:
    {parts: [text or {repeat, times}, ...]} for a large one, {copy: PATH, replace: [[old, new]]}
    for an edited copy of a file, {latin1: text} for bytes that are not UTF-8, and any of these
    with `gzip: true` compressed."""
    if isinstance(spec, str):
        return fill(spec, case_dir, outside).encode("utf-8", "surrogatepass")
    if "parts" in spec:
        text = "".join(fill(p, case_dir, outside) if isinstance(p, str) else p["repeat"] * int(p["times"])
                       for p in spec["parts"])
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
    subprocess.run(["git", "-c", "user.name=hostile", "-c", "user.email=hostile@example.invalid",
                    "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main", *argv],
                   cwd=case_dir, check=True, capture_output=True)


def _chattr(flag: str, path: Path) -> bool:
    res = subprocess.run(["chattr", flag, str(path)], capture_output=True)
    return res.returncode == 0


def build_case(case: dict, case_dir: Path, outside: Path) -> list[Path]:
    """Write the case's files; returns what was made read-only (to be made writable again)."""
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
        p.write_text(fill(_results_doc(spec), case_dir, outside) if "raw" in spec else _results_doc(spec))
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
    frozen = []
    for rel in case.get("readonly", []):
        p = case_dir / fill(rel, case_dir, outside)
        if not p.exists():
            p.mkdir(parents=True)
        if not _chattr("+i", p):
            for q in frozen:
                _chattr("-i", q)
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
            out[str(p.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns,
                                              os.readlink(p) if os.path.islink(p) else None)
        dirs[:] = [d for d in dirs if here / d != skip]
    return out


# ---- what measures ------------------------------------------------------------------------------

class Measured:
    """perfsuite's timing entry points in this process, each call counted."""

    TARGETS = [("perfsuite.measuring.runner", "measure"), ("perfsuite.measuring.interleave", "interleaved_blocks"),
               ("perfsuite.compare.amp", "interleaved_times"), ("perfsuite.suite.peak", "measure_peak"),
               ("perfsuite.profiling.trace", "trace_window")]

    def __init__(self, monkeypatch) -> None:
        import importlib

        self.calls: list[str] = []
        for modname, attr in self.TARGETS:
            mod = importlib.import_module(modname)
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
        calls = self.calls

        def counted(*a, **kw):
            calls.append(name)
            return fn(*a, **kw)

        return counted


class _Hang(BaseException):
    """Raised by the alarm when an in-process case runs past its limit."""


def _alarm(signum, frame):
    raise _Hang()


# ---- running a case -----------------------------------------------------------------------------

def run_in_process(argv: list[str], capsys, limit: float) -> tuple[int | str, str, str]:
    from perfsuite import cli

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


@pytest.fixture
def forget_workloads():
    """A case's workloads leave with it: the registry, the loaded files, sys.path and the modules."""
    from perfsuite.core import discover, registry

    registry.names()  # the built-ins are loaded once, kept
    before = (dict(registry._REGISTRY), dict(discover._loaded), list(sys.path), set(sys.modules))
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(before[0])
    discover._loaded.clear()
    discover._loaded.update(before[1])
    sys.path[:] = before[2]
    for name in set(sys.modules) - before[3]:
        if name.startswith("_perfsuite_workloads"):
            del sys.modules[name]


_PATH_TOKEN = re.compile(r"(/[^\s'\"(),;:]+)")


def _named_files(text: str, created: set[Path]) -> list[Path]:
    """Files written during the case that the console names (where a measurement was kept)."""
    out = []
    for tok in _PATH_TOKEN.findall(text.replace("\n", " ")):
        p = Path(tok.rstrip("."))
        if p in created and p.is_file() and p.stat().st_size > 0:
            out.append(p)
    return out


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_hostile_case(case, tmp_path, capsys, monkeypatch, forget_workloads):
    case_dir, outside = tmp_path / "case", tmp_path / "outside"
    for d in (case_dir / ".hostile" / "home", case_dir / ".hostile" / "tmp", outside / "dir"):
        d.mkdir(parents=True)
    (outside / "victim.txt").write_text("keep me\n")
    frozen = build_case(case, case_dir, outside)
    mark = case_dir / ".hostile" / "measured"
    hostile = case_dir / ".hostile"
    env = {"HOME": str(hostile / "home"), "TMPDIR": str(hostile / "tmp"), "HOSTILE_MARK": str(mark),
           "PERFSUITE_STORE": str(hostile / "store" / "results.db"), "PERFSUITE_MACHINE": "test-machine",
           "PERFSUITE_MACHINE_LOG": str(hostile / "machine-speed.jsonl")}
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
    cwd = case_dir / fill(case.get("cwd", "."), case_dir, outside)
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(tempfile, "tempdir", str(hostile / "tmp"))
    if case.get("disk_full"):
        import collections

        from perfsuite.storage import write

        usage = collections.namedtuple("usage", "total used free")
        monkeypatch.setattr(write.shutil, "disk_usage", lambda p: usage(1 << 30, (1 << 30) - 4096, 4096))
    argv = [fill(str(a), case_dir, outside) for a in case["argv"]]
    shutil.rmtree(ABS, ignore_errors=True)
    unchanged = {str(p): (case_dir / fill(p, case_dir, outside)).read_bytes() for p in case.get("unchanged", [])}

    setup_text = ""
    for setup in case.get("setup_argv", []):  # commands the case builds on (an import before a query)
        code, out, err = run_in_process([fill(str(a), case_dir, outside) for a in setup], capsys, IN_PROCESS_LIMIT_S)
        assert code == 0, f"set-up command {setup} failed with {code}: {out}{err}"
        setup_text += out + err
    if mark.exists():
        mark.unlink()

    before_outside = snapshot(tmp_path, case_dir)
    before_files = _files(case_dir)
    measured = Measured(monkeypatch)
    try:
        if case.get("mode") == "subprocess":
            full_env = {**os.environ, **env, "PYTHONPATH": str(REPO)}
            code, out, err = run_subprocess(argv, case, cwd, full_env)
        else:
            code, out, err = run_in_process(argv, capsys, case.get("timeout", IN_PROCESS_LIMIT_S))
    finally:
        for p in frozen:
            _chattr("-i", p)
    after_outside = snapshot(tmp_path, case_dir)
    written = _files(case_dir) - before_files
    text = out + err
    flat = text.replace("\n", "")

    problems: list[str] = []
    expected = case.get("exit", 2)
    expected = expected if isinstance(expected, list) else [expected]
    if code == "hang":
        problems.append(f"[hang] still running after {case.get('timeout', 60)} s")
    elif code not in expected:
        cls = "bad value accepted" if code == 0 and expected == [2] else "wrong exit code"
        problems.append(f"[{cls}] exit {code}, expected {' or '.join(map(str, expected))}")
    if TRACEBACK in text:
        if case.get("traceback") != "user" or "perfsuite bug" in text:
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
    did_measure = (mark.exists() and mark.stat().st_size > 0) or bool(measured.calls)
    keep_globs = [case["keeps"]] if isinstance(case.get("keeps"), str) else case.get("keeps") or []
    kept = [p for g in keep_globs for p in case_dir.glob(fill(g, case_dir, outside))
            if p.is_file() and p.stat().st_size > 0]
    named = _named_files(text, written)
    what = (measured.calls or ["the user's step"])[0]
    if did_measure and code in (2, 4) and case.get("measures") != "kept":
        where = f"kept in {(kept + named)[0]}" if kept or named else "nothing kept that the message names"
        cls = "measured before refusing" if kept or named else "measurement lost"
        problems.append(f"[{cls}] it measured ({what}), then ended with exit {code}; {where}")
    elif did_measure and code not in (1, 5, "hang") and keep_globs and not kept:
        problems.append(f"[measurement lost] it measured ({what}), ended with exit {code}, and "
                        f"{' or '.join(keep_globs)} does not hold the result")
    elif did_measure and code not in (0, 1, 3, 5, 130, "hang") and not kept and not named:
        problems.append(f"[measurement lost] it measured ({what}), ended with exit {code}, and no file written "
                        "during the case is named")
    for bad in case.get("err_lacks", []):
        if fill(bad, case_dir, outside) in text:
            problems.append(f"[security: secret shown] the console shows {bad!r}")
    for want in case.get("err_has", []):
        if fill(want, case_dir, outside).replace("\n", "") not in flat:
            problems.append(f"[message] the console does not say {want!r}")
    shown = text if len(text) < 3000 else text[:1500] + "\n...\n" + text[-1500:]
    assert not problems, f"{case['id']}: perfsuite {' '.join(a[:80] for a in argv)}\n" + "\n".join(problems) + \
        f"\n--- console ---\n{shown}"
