"""Alembic migrations of the results store (perfsuite.store.database runs them)."""
