"""Alembic's environment: perfsuite.database.engine hands it an open connection; nothing else is read
(no alembic.ini, no logging set-up: the console belongs to the command line)."""

from alembic import context

from perfsuite.database.schema import metadata

connection = context.config.attributes["connection"]
# SQLite cannot ALTER most things in place: batch mode copies the table (Alembic's own way).
context.configure(connection=connection, target_metadata=metadata, render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
