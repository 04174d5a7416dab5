"""`perfsuite peak`: measure and store this device's peak."""

from __future__ import annotations

from perfsuite.cli import options
from perfsuite.core.units import fmt_rate
from perfsuite.measuring.fingerprint import fingerprint
from perfsuite.storage.peaks import load_peaks, save_peak
from perfsuite.storage.write import check_output
from perfsuite.suite.peak import measure_peak, roofs

NAME = "peak"
# It names workloads: the user's own are discovered before it runs (perfsuite.cli.app).
NAMES_WORKLOADS = True


def add_arguments(sub) -> None:
    peak = sub.add_parser(NAME, help="measure and store this device's matmul FLOP/s and bandwidth")
    options.measuring(peak)


def command(args, console, recorder) -> int:
    from perfsuite.core.config import resolve_device

    cfg = options.run_config(args)
    device = resolve_device(cfg.device)
    # The peak file is checked before measuring (a folder it cannot be written to, a corrupt
    # file it would have to merge with): a finished measurement is never thrown away.
    check_output(args.peak_file, "--peak-file", replace=True)
    load_peaks(args.peak_file)
    env = fingerprint(device=device)
    console.print(f"measuring the peak of {device} (matmul {'/'.join(roofs(device))}, large copy)...", highlight=False)
    peak = measure_peak(cfg, env, device)
    save_peak(args.peak_file, peak)
    for dtype, v in peak["flops_per_s"].items():
        console.print(f"  matmul {dtype}: {fmt_rate(v, 'FLOP/s')}", highlight=False)
    console.print(f"  copy bandwidth: {fmt_rate(peak['bytes_per_s'], 'B/s')}", highlight=False)
    console.print(f"stored in {args.peak_file}", highlight=False)
    return 0
