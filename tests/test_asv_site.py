"""The asv front-end end to end: a quick asv run of the noop benchmarks into a temporary results
folder (the `existing` environment: this interpreter, no install), `asv publish`, and the
published graph page opened in headless Chromium, which must show data points."""

import json
import re
import shutil
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ASV = Path(sys.executable).parent / "asv"

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (make test installs it as root)"),
    pytest.mark.skipif(not ASV.exists(), reason="asv is not installed in this environment"),
    pytest.mark.skipif(not (ROOT / ".git").exists(), reason="asv needs the git repository"),
]


def _config(tmp_path: Path) -> Path:
    text = (ROOT / "asv.conf.json").read_text()
    conf = json.loads("\n".join(line for line in text.splitlines() if not line.strip().startswith("//")))
    conf.update(
        repo=str(ROOT),
        benchmark_dir=str(ROOT / "benchmarks"),
        results_dir=str(tmp_path / "results"),
        html_dir=str(tmp_path / "html"),
        env_dir=str(tmp_path / "env"),
    )
    path = tmp_path / "asv.conf.json"
    path.write_text(json.dumps(conf))
    return path


def _asv(*args, cwd):
    return subprocess.run([str(ASV), *args], cwd=cwd, capture_output=True, text=True, timeout=600)


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _serve(directory: Path):
    handler = partial(QuietHandler, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _screenshot(url: str, out: Path, profile: Path) -> None:
    subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--window-size=1200,900",
            "--virtual-time-budget=15000",
            f"--screenshot={out}",
            url,
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


def _coloured_pixels(png: Path) -> int:
    """Pixels that are clearly coloured (not white, grey or black): series points and lines."""
    import numpy as np
    from PIL import Image

    with Image.open(png) as img:
        rgb = np.asarray(img.convert("RGB")).astype(int)
    return int(((rgb.max(axis=2) - rgb.min(axis=2)) > 60).sum())


@pytest.mark.slow
def test_published_graph_shows_data_points(tmp_path):
    conf = _config(tmp_path)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    machine = _asv("machine", "--yes", "--config", str(conf), cwd=tmp_path)
    assert machine.returncode == 0, machine.stderr
    # Two results at two commit hashes give the graph a line; --set-commit-hash is how the
    # `existing` environment saves results.
    parents = subprocess.run(
        ["git", "rev-list", "--max-count=2", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for sha in parents or [commit]:
        run = _asv(
            "run",
            "--config",
            str(conf),
            "--quick",
            "-E",
            f"existing:{sys.executable}",
            "--set-commit-hash",
            sha,
            "-b",
            "NoopTrack.track_median_s",
            cwd=tmp_path,
        )
        assert run.returncode == 0, run.stdout + run.stderr
    pub = _asv("publish", "--config", str(conf), cwd=tmp_path)
    assert pub.returncode == 0, pub.stdout + pub.stderr
    html = tmp_path / "html"
    assert (html / "index.html").exists()
    offline = subprocess.run(
        [sys.executable, "-m", "perfsuite", "asv-offline", str(html)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert offline.returncode == 0, offline.stderr
    # Every page loads its scripts from the site itself, each checked by its integrity hash.
    for page in html.glob("*.html"):
        tags = re.findall(r"<(?:script|link)\b[^>]*\b(?:src|href)=\"[^\"]*\"[^>]*>", page.read_text())
        assert not [t for t in tags if "https://" in t], page.name
        assert all('integrity="sha384-' in t for t in tags if "vendor/" in t), page.name
    graphs = list((html / "graphs").rglob("bench_noop.NoopTrack.track_median_s.json"))
    assert graphs, "asv publish wrote no graph data for the benchmark"
    assert any(json.loads(g.read_text()) for g in graphs)

    server = _serve(html)
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        with_data = tmp_path / "graph.png"
        _screenshot(base + "#bench_noop.NoopTrack.track_median_s", with_data, tmp_path / "profile1")
        empty = tmp_path / "empty.png"
        # A benchmark that has no results: the same page layout with an empty plot.
        _screenshot(base + "#bench_noop.NoopTrack.track_seconds_per_tflop", empty, tmp_path / "profile2")
    finally:
        server.shutdown()
        server.server_close()
    points, baseline = _coloured_pixels(with_data), _coloured_pixels(empty)
    assert points > baseline + 50, f"graph page shows no data points ({points} coloured pixels vs {baseline} empty)"
