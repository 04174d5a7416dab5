"""`perfsuite asv-offline [SITE]`: a published asv site served from files shipped with perfsuite,
for any project (after `asv publish`; no network). `--fetch`: maintainers refetch those files."""

from __future__ import annotations

from pathlib import Path

from perfsuite.core.errors import PerfsuiteError

NAME = "asv-offline"


def add_arguments(sub) -> None:
    p = sub.add_parser(
        NAME,
        help="make a published asv site work offline (jQuery, flot, bootstrap served from the site itself)",
    )
    p.add_argument(
        "site",
        type=Path,
        nargs="?",
        help="the site's folder (default: html_dir of ./asv.conf.json, where asv publish wrote it)",
    )
    p.add_argument("--fetch", action="store_true", help="maintainers: refetch the pinned files with npm (network)")


def published_site(conf: Path) -> Path:
    """The html_dir an asv.conf.json names (asv's default `html`), relative to the file's folder."""
    if not conf.is_file():
        raise PerfsuiteError(f"no {conf.name} in {conf.parent}: give the published site's folder")
    try:
        from asv.util import load_json  # asv's own reader: its conf files carry // comments
    except ImportError:
        raise PerfsuiteError("asv is not installed: give the published site's folder") from None
    try:
        html_dir = load_json(str(conf), js_comments=True).get("html_dir", "html")
    except Exception as exc:  # noqa: BLE001 - asv raises its own error types for a bad file
        raise PerfsuiteError(f"{conf}: cannot be read ({exc})") from None
    return (conf.parent / str(html_dir)).resolve()


def command(args, console, recorder) -> int:
    from perfsuite.frontends import asv_offline

    if args.fetch:
        if args.site is not None:
            raise PerfsuiteError("--fetch refetches perfsuite's own vendored files; it takes no site")
        asv_offline.fetch()
        console.print(f"vendored files and MANIFEST.json written to {asv_offline.VENDOR}", highlight=False)
        return 0
    site = args.site if args.site is not None else published_site(Path.cwd() / "asv.conf.json")
    if not site.is_dir():
        raise PerfsuiteError(f"{site}: no such folder; run `asv publish` first")
    n = asv_offline.vendor(site)
    console.print(f"{n} external reference(s) in {site} now served from its vendor/ folder", highlight=False)
    console.print(f"view it: asv preview (or python -m http.server -d {site})", highlight=False)
    return 0
