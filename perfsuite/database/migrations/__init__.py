"""Alembic migrations of the results store (perfsuite.database.engine runs them)."""
