"""Rooflines: Nsight Compute CSV exports read into per-launch figures, and this machine's own."""
