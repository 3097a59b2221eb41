"""Alembic environment for charter's tables; configured from code, no ``alembic.ini``.

``SqlStore.upgrade()`` and ``charter db upgrade`` pass an open SQLAlchemy ``Connection`` in
``config.attributes["connection"]``, inside a transaction they commit. To write a new
revision, copy the newest file in ``versions/`` and edit it by hand (or run
``alembic.command.revision(config, autogenerate=True)`` with such a config against a
database at head), then add a test that upgrades from the previous revision. Revisions take
their columns from ``_columns``, whose helpers never change once a revision uses them.
"""

from __future__ import annotations

from alembic import context

from charter.store._schema import VERSION_TABLE, metadata


def run_migrations() -> None:
    """Run the pending migrations on the connection the caller passed in."""
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError(
            "charter's migrations run on a connection passed by SqlStore.upgrade() or "
            "`charter db upgrade`; offline (--sql) mode is not supported"
        )
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        # SQLite alters tables by copying them; Alembic's batch mode does that for us.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
