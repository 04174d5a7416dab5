"""The results store: where history lives (issue 38).

One schema, two engines, through SQLAlchemy Core with Alembic migrations:
  - an embedded SQLite file by default (`.perfsuite/results.db` in the project; nothing to start);
  - PostgreSQL when `--store postgresql://...`, `PERFSUITE_STORE` or `[tool.perfsuite] store` says so,
    for a team whose CI runners and GPU boxes report into one history.

Modules, one job each:
  location   which store a command uses, and how its URL is shown (credentials never printed)
  schema     the tables
  engine     opening an engine: migrate an older store forward, refuse a newer one, name a broken file
  machine    the stable id of this machine
  store      Store: write records, documents and runs; query them
  recorder   one command's run in the store, kept in a local spool when the server cannot be reached
  shards     which cases of a suite a shard (K/N) measures
  select     `store:` sources, read wherever a results file is read
JSON files stay the portable export/import format; `perfsuite store import`, which reads them into
the store, is perfsuite.storage.store_import (files sit above the store: the store imports no file
reader).
"""
