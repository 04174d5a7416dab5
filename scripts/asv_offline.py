"""Make a published asv site work without internet access.

asv 0.6's pages load jQuery, flot, bootstrap and friends from public CDNs; on machines
without internet (ours) the site shows "Can not determine continental origin of swallow".
This fetches the same libraries from the npm registry (`npm pack`, cached under
~/.cache/perfsuite/npm), copies them into the site's `vendor/` folder and points the pages
at them. Nothing is committed: like any dependency, the libraries are installed on demand.

    python scripts/asv_offline.py .asv/html
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

CACHE = Path.home() / ".cache" / "perfsuite" / "npm"

# CDN address -> (npm package@version, file inside the package). cdnjs and code.jquery.com
# addresses are listed; jsDelivr's /npm/ addresses map by their own path.
KNOWN = {
    "https://code.jquery.com/jquery-3.3.1.min.js": ("jquery@3.3.1", "dist/jquery.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js": ("flot@0.8.3", "jquery.flot.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js": ("flot@0.8.3", "jquery.flot.time.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js":
        ("flot@0.8.3", "jquery.flot.selection.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js":
        ("flot@0.8.3", "jquery.flot.categories.js"),
    # 1.0.1 is not on npm; 1.1.3 keeps the same $.fn.stupidtable interface.
    "https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js":
        ("stupid-table-plugin@1.1.3", "stupidtable.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js": ("blueimp-md5@2.19.0", "js/md5.min.js"),
}
JSDELIVR = re.compile(r"https://cdn\.jsdelivr\.net/npm/((?:@[^/]+/)?[^/@]+@[^/]+)/(.+)")
TAG = re.compile(r"""<(script|link)\b[^>]*?\b(src|href)="(https://[^"]+)"[^>]*>""")


def locate(url: str) -> tuple[str, str] | None:
    if url in KNOWN:
        return KNOWN[url]
    m = JSDELIVR.fullmatch(url)
    return (m.group(1), m.group(2)) if m else None


def fetch(spec: str) -> Path:
    """The npm tarball of `spec`, from the cache or the registry."""
    CACHE.mkdir(parents=True, exist_ok=True)
    name, _, version = spec.rpartition("@")
    tgz = CACHE / f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"
    if not tgz.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("asv_offline: npm is needed to fetch the site's JavaScript libraries")
        subprocess.run([npm, "pack", spec, "--pack-destination", str(CACHE)], check=True,
                       capture_output=True, text=True)
    return tgz


def vendor(site: Path) -> int:
    pages = sorted(site.glob("*.html"))
    if not pages:
        raise SystemExit(f"asv_offline: no HTML pages in {site}; run `asv publish` first")
    dest = site / "vendor"
    dest.mkdir(exist_ok=True)
    replaced = 0
    for page in pages:
        text = page.read_text()

        def local(m: re.Match) -> str:
            nonlocal replaced
            where = locate(m.group(3))
            if where is None:
                return m.group(0)
            spec, inner = where
            target = dest / spec.replace("/", "_") / inner
            if not target.exists():
                with tarfile.open(fetch(spec)) as tar:
                    member = tar.extractfile(f"package/{inner}")
                    if member is None:
                        raise SystemExit(f"asv_offline: {spec} has no {inner}")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(member.read())
            replaced += 1
            tag = m.group(0).replace(m.group(3), target.relative_to(site).as_posix())
            # The integrity hashes are those of the CDN's builds, not of npm's files.
            return re.sub(r'\s(integrity|crossorigin|referrerpolicy)="[^"]*"', "", tag)

        page.write_text(TAG.sub(local, text))
    return replaced


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("site", type=Path)
    n = vendor(p.parse_args().site)
    print(f"asv_offline: {n} external reference(s) now served from vendor/", file=sys.stderr)


if __name__ == "__main__":
    main()
