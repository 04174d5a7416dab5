"""The peak file: each device's measured peak FLOP/s and bandwidth (`perfsuite peak` writes it,
every run reads it to say what fraction of the peak a step reached), keyed by device model and
thread count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfsuite.core.errors import RecordError
from perfsuite.storage.files import document, load_document
from perfsuite.storage.write import make_dir, write_or_rescue

# Where `perfsuite peak` keeps the peaks unless --peak-file says otherwise.
DEFAULT_PEAK_FILE = Path.home() / ".cache" / "perfsuite" / "peak.json"


def device_key(env: dict[str, Any], device: str) -> str:
    """Peaks are per device model and thread count: the same cores with fewer threads peak lower."""
    if device.startswith("cuda"):
        return f"cuda|{env.get('gpu_name')}"
    return f"cpu|{env.get('cpu_model')}|threads={env.get('torch_threads')}"


def load_peaks(path: Path) -> dict[str, Any]:
    """Stored peaks by device key ({} when there is no file yet)."""
    if not path.exists():
        return {}
    try:
        peaks: dict[str, Any] = load_document(path, "peaks")
        return peaks
    except RecordError as exc:
        raise RecordError(f"{exc}; delete it and run `perfsuite peak`") from None


def save_peak(path: Path, peak: dict[str, Any]) -> None:
    peaks = load_peaks(path)
    peaks[peak["device_key"]] = peak
    make_dir(path.parent, "--peak-file folder")
    write_or_rescue(path, document("peaks", peaks), "--peak-file")


def peak_for(path: Path, env: dict[str, Any], device: str) -> dict[str, Any] | None:
    return load_peaks(path).get(device_key(env, device))
