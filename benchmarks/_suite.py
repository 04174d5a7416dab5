"""The asv classes' builders, taken from this working tree's perfsuite/frontends/asv.py.

asv imports these benchmarks against perfsuite as installed at *older* commits, which may not
have perfsuite.frontends.asv; so the file is loaded by its path here, and it looks up perfsuite's
modules where each commit keeps them. The workloads and their grids are this working tree's
(`workload_declarations`), whatever commit is installed: a benchmark's parameters must not depend
on the commit it measures.
"""

import functools
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("_perfsuite_asv_frontend", ROOT / "perfsuite" / "frontends" / "asv.py")
_asv = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_asv)

device_timer = _asv.device_timer
measure_cases = _asv.measure_cases
make_track_suite = _asv.make_track_suite
make_time_suite = _asv.make_time_suite
measure_amp = _asv.measure_amp
make_amp_suite = _asv.make_amp_suite
fill_module = _asv.fill_module
asv_size = _asv.asv_size
AMP_PAIRS, AMP_STEPS = _asv.AMP_PAIRS, _asv.AMP_STEPS
_cached_case = _asv._cached_case
_key = _asv._key
_config = _asv._config


@functools.cache
def workload_declarations(size: str | None = None) -> dict:
    """Every workload this working tree declares, as asv needs it (perfsuite.frontends.asv.declared)."""
    return _asv.declarations(ROOT, size or asv_size())


def amp_grid() -> dict:
    """The AMP benchmark's grid: the workloads that declare asv={"amp": True}, against bf16 and fp16."""
    return _asv.amp_grid(workload_declarations())
