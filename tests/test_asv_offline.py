"""`perfsuite asv-offline` on asv's own page template: offline, integrity kept, clear errors, for any
project's site (its folder given, or read from its asv.conf.json)."""

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from perfsuite.core.errors import PerfsuiteError
from perfsuite.frontends import asv_offline

ROOT = Path(__file__).resolve().parents[1]


def _module():
    return asv_offline


def _asv_page() -> str:
    asv = pytest.importorskip("asv")
    return (Path(asv.__file__).parent / "www" / "index.html").read_text()


def _site(tmp_path) -> Path:
    site = tmp_path / "html"
    site.mkdir()
    (site / "index.html").write_text(_asv_page())
    return site


def _b64(algo, data):
    return base64.b64encode(hashlib.new(algo, data).digest()).decode()


def test_every_cdn_reference_is_served_from_shipped_files_with_their_integrity(tmp_path, monkeypatch):
    mod = _module()
    # Publishing must not reach for npm or the network.
    original = _asv_page()
    site = _site(tmp_path)
    monkeypatch.setattr(mod, "subprocess", types.SimpleNamespace(run=lambda *a, **k: pytest.fail("ran a command")))
    monkeypatch.setattr(mod.shutil, "which", lambda *a, **k: pytest.fail("asv_offline looked for npm"))
    n = mod.vendor(site)
    page = (site / "index.html").read_text()
    assert n == len(re.findall(r'<(?:script|link)\b[^>]*(?:src|href)="https://', original)) >= 10
    assert 'href="https://github.com/airspeed-velocity/asv/"' in page  # a plain link stays a link
    assert "https://" not in " ".join(re.findall(r"<(?:script|link)[^>]*>", page))
    assert "crossorigin" not in page and "referrerpolicy" not in page
    tags = re.findall(r'<(?:script|link)\b[^>]*\b(?:src|href)="(vendor/[^"]+)"[^>]*>', page)
    assert len(tags) == n
    for tag in re.findall(r"<(?:script|link)\b[^>]*\bvendor/[^>]*>", page):
        path = re.search(r'(?:src|href)="(vendor/[^"]+)"', tag).group(1)
        integrity = re.search(r'integrity="([^"]+)"', tag).group(1)
        assert integrity == "sha384-" + _b64("sha384", (site / path).read_bytes()), path
        spec = path.split("/")[1]
        assert list((site / "vendor" / spec).glob("LICENSE*")) or (site / "vendor" / spec / "package.json").exists()
    # Where asv's page pins npm's own bytes (sha256), the shipped file is those bytes.
    for url, sha in re.findall(r'(?:src|href)="(https://[^"]+)" integrity="sha256-([^"]+)"', original):
        spec, inner = mod.locate(url)
        assert _b64("sha256", (mod.VENDOR / spec / inner).read_bytes()) == sha, url


def test_the_manifest_matches_the_shipped_files():
    mod = _module()
    manifest = mod.load_manifest()
    for spec, entry in manifest["packages"].items():
        assert (mod.VENDOR / spec / entry["licence"]).is_file(), spec
        assert entry["npm_integrity"].startswith("sha512-")
        for inner in entry["files"]:
            mod.shipped(spec, inner, manifest)  # raises on a missing or altered file
    for spec, inner in mod.KNOWN.values():
        assert inner in manifest["packages"][spec]["files"]


def test_a_missing_or_altered_file_is_named(tmp_path):
    mod = _module()
    vendor_dir = tmp_path / "vendor-copy"
    shutil.copytree(mod.VENDOR, vendor_dir)
    (vendor_dir / "jquery@3.3.1" / "dist" / "jquery.min.js").unlink()
    with pytest.raises(asv_offline.OfflineError, match=r"vendored file .*jquery@3.3.1/dist/jquery.min.js is missing"):
        mod.vendor(_site(tmp_path), vendor_dir)
    shutil.copy(mod.VENDOR / "jquery@3.3.1" / "dist" / "jquery.min.js", vendor_dir / "jquery@3.3.1" / "dist")
    with open(vendor_dir / "flot@0.8.3" / "jquery.flot.js", "a") as f:
        f.write("\n// changed")
    shutil.rmtree(tmp_path / "html")
    with pytest.raises(asv_offline.OfflineError, match=r"jquery.flot.js does not match its recorded hash"):
        mod.vendor(_site(tmp_path), vendor_dir)
    (vendor_dir / "MANIFEST.json").unlink()
    with pytest.raises(asv_offline.OfflineError, match="MANIFEST.json is missing"):
        mod.vendor(tmp_path / "html", vendor_dir)


def _offline(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "perfsuite", "asv-offline", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_command_line_on_any_projects_site_given_or_read_from_its_asv_conf(tmp_path):
    site = _site(tmp_path)
    res = _offline(tmp_path, str(site))
    assert res.returncode == 0 and "now served from its vendor/ folder" in res.stdout, res.stdout + res.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    res = _offline(tmp_path, str(empty))
    assert res.returncode == 2 and "no HTML pages" in res.stderr and "Traceback" not in res.stderr
    # A user's project: the site is where its asv.conf.json (comments and all) says asv publishes.
    project = tmp_path / "project"
    (project / ".asv" / "html").mkdir(parents=True)
    (project / ".asv" / "html" / "index.html").write_text(_asv_page())
    (project / "asv.conf.json").write_text('{\n  // asv writes comments\n  "version": 1, "html_dir": ".asv/html"\n}\n')
    res = _offline(project)
    assert res.returncode == 0 and str(project / ".asv" / "html") in res.stdout, res.stdout + res.stderr
    assert "https://code.jquery.com" not in (project / ".asv" / "html" / "index.html").read_text()
    res = _offline(empty)  # no asv.conf.json here and no folder given
    assert res.returncode == 2 and "no asv.conf.json in" in res.stderr and "give the published site" in res.stderr
    res = _offline(tmp_path, str(tmp_path / "nowhere"))
    assert res.returncode == 2 and "run `asv publish` first" in res.stderr


# ---- a hostile site: links, FIFOs, folders, odd bytes (nothing written outside, nothing half done)

JQUERY_TAG = '<script src="https://code.jquery.com/jquery-3.3.1.min.js"></script>\n'


@pytest.fixture
def no_hang():
    """A FIFO opened for reading would block forever: fail the test instead of hanging the suite."""
    import signal

    def stop(signum, frame):
        raise AssertionError("asv-offline still blocked after 20 s (a FIFO opened for reading?)")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_page_that_is_a_link_is_refused_and_the_file_it_points_at_untouched(tmp_path):
    site = _site(tmp_path)
    victim = tmp_path / "outside.html"
    victim.write_text(JQUERY_TAG)
    (site / "zz.html").symlink_to(victim)
    before = _listing(site)
    with pytest.raises(PerfsuiteError, match=r"zz\.html: it is a symbolic link"):
        asv_offline.vendor(site)
    assert victim.read_text() == JQUERY_TAG
    assert _listing(site) == before and not (site / "vendor").exists()  # index.html not rewritten either


def test_a_vendor_folder_that_is_a_link_is_refused_and_nothing_is_copied_outside(tmp_path):
    site = _site(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (site / "vendor").symlink_to(outside)
    page = (site / "index.html").read_text()
    with pytest.raises(PerfsuiteError, match=r"vendor.* outside"):
        asv_offline.vendor(site)
    assert list(outside.iterdir()) == [] and (site / "index.html").read_text() == page


@pytest.mark.parametrize("odd", ["fifo", "folder", "latin-1"])
def test_an_odd_page_is_refused_by_name_before_any_page_is_rewritten(tmp_path, odd, no_hang):
    site = _site(tmp_path)
    page = site / "zz.html"
    if odd == "fifo":
        os.mkfifo(page)
    elif odd == "folder":
        page.mkdir()
    else:
        page.write_bytes(b"<html>caf\xe9</html>" + JQUERY_TAG.encode())
    before = _listing(site)
    why = "not a text file" if odd == "latin-1" else "not a regular file"
    with pytest.raises(PerfsuiteError, match=rf"zz\.html: .*{why}"):
        asv_offline.vendor(site)
    assert _listing(site) == before and not (site / "vendor").exists()


def test_an_unknown_cdn_on_a_later_page_leaves_the_whole_site_as_it_was(tmp_path):
    site = _site(tmp_path)
    (site / "zz.html").write_text('<script src="https://evil.example/x.js"></script>\n')
    before = _listing(site)
    with pytest.raises(asv_offline.OfflineError, match=r"zz\.html loads https://evil\.example/x\.js"):
        asv_offline.vendor(site)
    assert _listing(site) == before and not (site / "vendor").exists()  # index.html sorts first: kept too


@pytest.mark.parametrize("odd", ["link", "fifo", "folder", "latin-1"])
def test_the_command_line_exits_2_naming_the_page(tmp_path, odd):
    site = _site(tmp_path)
    page = site / "zz.html"
    if odd == "link":
        (tmp_path / "victim.html").write_text(JQUERY_TAG)
        page.symlink_to(tmp_path / "victim.html")
    elif odd == "fifo":
        os.mkfifo(page)
    elif odd == "folder":
        page.mkdir()
    else:
        page.write_bytes(b"\xff\xfe<html>")
    res = _offline(tmp_path, str(site))
    assert res.returncode == 2 and "zz.html" in res.stderr and "Traceback" not in res.stderr, res.stderr
