"""Profiling one step: torch.profiler traces."""
