"""Suites: files of entries, their plans, the device's peak, and the correctness checks run first."""
