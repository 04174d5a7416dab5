"""Datasets: read from a path the user gives, or generated locally. Nothing is downloaded."""
