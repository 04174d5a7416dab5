"""Instruments: clocks, memory peaks, NVML sampling and NVTX ranges around the timed region."""
