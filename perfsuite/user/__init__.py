"""The API users declare their own workloads with (re-exported by perfsuite/__init__.py)."""
