"""A published asv site that works without internet access, from files shipped with perfsuite.

asv 0.6's pages load jQuery, flot, bootstrap and friends from public CDNs; on machines without
internet the site shows "Can not determine continental origin of swallow". The same libraries,
pinned, ship in perfsuite/frontends/asv_vendor/ (one folder per npm package@version, with its
licence; MANIFEST.json records each file's sha384 and the npm tarball's integrity). `vendor`
copies them into the site's `vendor/` folder and points the pages at them, with each tag's
`integrity` attribute set to the shipped file's sha384 (the CDN's minified builds differ from
npm's files, so their hashes cannot be kept; the browser still checks every file). Nothing is
downloaded; a missing or altered vendored file stops it with the file's name. Any project's
site: `perfsuite asv-offline [SITE]` (perfsuite.cli.asv_offline).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from perfsuite.core.errors import PerfsuiteError
from perfsuite.storage.read import read_text
from perfsuite.storage.write import inside, make_dir, refuse_link, write_bytes, write_text

VENDOR = Path(__file__).resolve().parent / "asv_vendor"  # package data (pyproject.toml)
MANIFEST = VENDOR / "MANIFEST.json"

# CDN address -> (npm package@version, file inside the package). cdnjs and code.jquery.com
# addresses are listed; jsDelivr's /npm/ addresses map by their own path.
KNOWN = {
    "https://code.jquery.com/jquery-3.3.1.min.js": ("jquery@3.3.1", "dist/jquery.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js": ("flot@0.8.3", "jquery.flot.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js": ("flot@0.8.3", "jquery.flot.time.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js": (
        "flot@0.8.3",
        "jquery.flot.selection.js",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js": (
        "flot@0.8.3",
        "jquery.flot.categories.js",
    ),
    # 1.0.1 is not on npm; 1.1.3 keeps the same $.fn.stupidtable interface.
    "https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js": (
        "stupid-table-plugin@1.1.3",
        "stupidtable.min.js",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js": ("blueimp-md5@2.19.0", "js/md5.min.js"),
}
# What asv 0.6's pages load through jsDelivr (npm's own files): fetched too by --fetch.
JSDELIVR_FILES = {
    "bootstrap@3.1.1": ["dist/css/bootstrap.min.css", "dist/js/bootstrap.min.js"],
    "flot-orderbars@1.0.0": ["js/jquery.flot.orderBars.js"],
}
# The licence each package ships (flot-orderbars ships none: its package.json says MIT).
LICENCES = {
    "jquery@3.3.1": "LICENSE.txt",
    "flot@0.8.3": "LICENSE.txt",
    "stupid-table-plugin@1.1.3": "LICENSE",
    "blueimp-md5@2.19.0": "LICENSE.txt",
    "bootstrap@3.1.1": "LICENSE",
    "flot-orderbars@1.0.0": "package.json",
}
JSDELIVR = re.compile(r"https://cdn\.jsdelivr\.net/npm/((?:@[^/]+/)?[^/@]+@[^/]+)/(.+)")
TAG = re.compile(r"""<(script|link)\b[^>]*?\b(src|href)="(https://[^"]+)"[^>]*>""")


class OfflineError(PerfsuiteError):
    """The site cannot be made offline; the message names the page or the vendored file."""


def sha384(data: bytes) -> str:
    return "sha384-" + base64.b64encode(hashlib.sha384(data).digest()).decode()


def locate(url: str) -> tuple[str, str] | None:
    if url in KNOWN:
        return KNOWN[url]
    m = JSDELIVR.fullmatch(url)
    return (m.group(1), m.group(2)) if m else None


def load_manifest(vendor: Path = VENDOR) -> dict:
    path = vendor / "MANIFEST.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise OfflineError(
            f"{path} is missing: the vendored JavaScript cannot be checked "
            "(restore it from git, or run `perfsuite asv-offline --fetch`)"
        ) from None
    except json.JSONDecodeError as exc:
        raise OfflineError(f"{path} is not valid JSON ({exc})") from None


def shipped(spec: str, inner: str, manifest: dict, vendor: Path = VENDOR) -> tuple[Path, str]:
    """The vendored file for `inner` of `spec` and its recorded sha384, checked."""
    entry = manifest.get("packages", {}).get(spec)
    if entry is None or inner not in entry.get("files", {}):
        raise OfflineError(
            f"{spec}/{inner} is not in {vendor / 'MANIFEST.json'}: asv's pages need a file this "
            "repository does not ship (a newer asv?); add it with --fetch"
        )
    path = vendor / spec / inner
    if not path.is_file():
        raise OfflineError(
            f"vendored file {path} is missing (restore it from git, or run `perfsuite asv-offline --fetch`)"
        )
    want, got = entry["files"][inner], sha384(path.read_bytes())
    if got != want:
        raise OfflineError(f"vendored file {path} does not match its recorded hash ({got} != {want})")
    return path, want


def _localised(page: Path, manifest: dict, vendor_dir: Path) -> tuple[str, dict[str, Path], int]:
    """The page's text with each CDN tag pointing at vendor/, the files it needs there (path under
    the site -> shipped file) and how many tags changed; nothing written. A link in place of the
    page, a FIFO, a folder or bytes that are not UTF-8 are refused with the page's name."""
    refuse_link(page)  # rewriting it would write wherever the link points
    text = read_text(page, OfflineError)  # non-blocking: a FIFO named x.html cannot hang it
    needed: dict[str, Path] = {}
    replaced = 0

    def local(m: re.Match) -> str:
        nonlocal replaced
        url = m.group(3)
        where = locate(url)
        if where is None:
            raise OfflineError(f"{page.name} loads {url}, which no vendored file stands for")
        spec, inner = where
        src, digest = shipped(spec, inner, manifest, vendor_dir)
        target = f"vendor/{spec}/{inner}"
        licence = manifest["packages"][spec]["licence"]
        needed[target] = src
        needed[f"vendor/{spec}/{Path(licence).name}"] = vendor_dir / spec / licence
        replaced += 1
        tag = m.group(0).replace(url, target)
        # Same origin now: no CORS attributes; the integrity is the shipped file's own.
        tag = re.sub(r'\s(crossorigin|referrerpolicy)="[^"]*"', "", tag)
        if re.search(r'\sintegrity="[^"]*"', tag):
            return re.sub(r'\sintegrity="[^"]*"', f' integrity="{digest}"', tag)
        return tag.replace(f' {m.group(2)}="', f' integrity="{digest}" {m.group(2)}="', 1)

    return TAG.sub(local, text), needed, replaced


def vendor(site: Path, vendor_dir: Path = VENDOR) -> int:
    pages = sorted(site.glob("*.html"))
    if not pages:
        raise OfflineError(f"no HTML pages in {site}; run `asv publish` first")
    manifest = load_manifest(vendor_dir)
    # Every page is read and converted in memory first, and every destination checked: a page
    # refused (a link, a FIFO, an unknown CDN) leaves the site as it was, never half converted.
    texts: dict[Path, str] = {}
    needed: dict[str, Path] = {}
    replaced = 0
    for page in pages:
        text, files, n = _localised(page, manifest, vendor_dir)
        if n:
            texts[page] = text
        needed.update(files)
        replaced += n
    # `inside` refuses a vendor/ (or a folder in it) that is a link out of the site; write_bytes
    # and write_text refuse a link in place of the file itself.
    targets = {inside(site, *rel.split("/")): src for rel, src in needed.items()}
    for target in targets:
        refuse_link(target)
    for target, src in targets.items():
        make_dir(target.parent, "vendor folder")
        write_bytes(target, src.read_bytes())
    for page, text in texts.items():
        write_text(page, text)
    return replaced


def fetch(vendor_dir: Path = VENDOR) -> None:
    """Maintainers only (network): the pinned packages from the npm registry with `npm pack`,
    their needed files and licences into `vendor_dir`, and MANIFEST.json rewritten."""
    npm = shutil.which("npm")
    if npm is None:
        raise OfflineError("--fetch needs npm")
    wanted: dict[str, set[str]] = {}
    for spec, inner in KNOWN.values():
        wanted.setdefault(spec, set()).add(inner)
    for spec, names in JSDELIVR_FILES.items():
        wanted.setdefault(spec, set()).update(names)
    manifest: dict = {
        "about": "JavaScript and CSS asv 0.6's pages load from CDNs, pinned from the npm registry "
        "for perfsuite asv-offline; hashes are sha384 of the files as shipped here",
        "urls": {url: [spec, inner] for url, (spec, inner) in KNOWN.items()},
        "packages": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for spec, needed in sorted(wanted.items()):
            res = subprocess.run(
                [npm, "pack", spec, "--json", "--pack-destination", tmp], capture_output=True, text=True
            )
            if res.returncode != 0:
                raise OfflineError(f"npm pack {spec} failed: {res.stderr.strip()[-500:]}")
            info = json.loads(res.stdout)[0]
            files = {}
            with tarfile.open(Path(tmp) / info["filename"]) as tar:
                for inner in sorted(needed | {LICENCES[spec]}):
                    member = tar.extractfile(f"package/{inner}")
                    if member is None:
                        raise OfflineError(f"{spec} has no {inner}")
                    data = member.read()
                    out = vendor_dir / spec / inner
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(data)
                    if inner in needed:
                        files[inner] = sha384(data)
            manifest["packages"][spec] = {"licence": LICENCES[spec], "npm_integrity": info["integrity"], "files": files}
    (vendor_dir / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
