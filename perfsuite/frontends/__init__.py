"""The front-ends that are not the command line: asv classes and the pytest-benchmark plugin."""
