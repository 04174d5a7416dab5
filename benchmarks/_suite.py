"""The asv classes' builders, taken from this working tree's perfsuite/frontends/asv.py.

asv imports these benchmarks against perfsuite as installed at *older* commits, which may not
have perfsuite.frontends.asv; so the file is loaded by its path here, and it looks up perfsuite's
modules where each commit keeps them.
"""

import importlib.util
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "_perfsuite_asv_frontend", Path(__file__).resolve().parents[1] / "perfsuite" / "frontends" / "asv.py")
_asv = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_asv)

device_timer = _asv.device_timer
measure_cases = _asv.measure_cases
make_track_suite = _asv.make_track_suite
make_time_suite = _asv.make_time_suite
measure_amp = _asv.measure_amp
make_amp_suite = _asv.make_amp_suite
AMP_PAIRS, AMP_STEPS = _asv.AMP_PAIRS, _asv.AMP_STEPS
_cached_case = _asv._cached_case
_key = _asv._key
_config = _asv._config
