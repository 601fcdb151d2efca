"""The schema's versions, each a list of statements, applied in order under one lock.

A small explicit migration table (``et_history_migrations``) rather than Alembic: the
store has three tables, the steps are plain DDL that SQLite and PostgreSQL both
accept, and every runner applies them itself on opening the store, inside the same
transaction that holds the store's lock (SQLite ``BEGIN IMMEDIATE``, a PostgreSQL
advisory lock), so two runners that open a new or older store at once never both
migrate it. Nothing else (no migration scripts directory, no ``alembic`` command)
has to be on a runner. A new version appends one entry to :data:`MIGRATIONS` and
updates :mod:`harness.history.schema`; a step is never edited once released.
"""

from __future__ import annotations

import time

from sqlalchemy import Connection, inspect, text

from harness.errors import UsageError
from harness.history.schema import KNOWN_TABLES, SCHEMA_VERSION, migrations_table

# Any number: the PostgreSQL advisory lock every runner takes to open the store.
_PG_LOCK = 0x45544849  # "ETHI"

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE et_history_runs (
            id VARCHAR(300) PRIMARY KEY, name VARCHAR(200) NOT NULL,
            host VARCHAR(200) NOT NULL, command TEXT NOT NULL, devices TEXT NOT NULL,
            results_dir TEXT NOT NULL, harness_version VARCHAR(100) NOT NULL,
            harness_commit VARCHAR(64) NOT NULL, sdk_source TEXT NOT NULL,
            sdk_commit VARCHAR(64) NOT NULL, started DOUBLE PRECISION NOT NULL,
            finished DOUBLE PRECISION, exit_status INTEGER, state VARCHAR(20) NOT NULL,
            writer VARCHAR(200) NOT NULL, source VARCHAR(20) NOT NULL)""",
        """CREATE TABLE et_history_cases (
            run_id VARCHAR(300) NOT NULL REFERENCES et_history_runs (id),
            nodeid VARCHAR(1000) NOT NULL, seq INTEGER NOT NULL,
            suite VARCHAR(500) NOT NULL, device VARCHAR(200) NOT NULL,
            outcome VARCHAR(20) NOT NULL, duration DOUBLE PRECISION NOT NULL,
            started DOUBLE PRECISION NOT NULL, runtime VARCHAR(200) NOT NULL,
            agent_version VARCHAR(100) NOT NULL, load_paths TEXT NOT NULL,
            backends TEXT NOT NULL, differences TEXT NOT NULL,
            infra_type VARCHAR(200) NOT NULL, infra_cause TEXT NOT NULL,
            tries INTEGER NOT NULL, PRIMARY KEY (run_id, nodeid))""",
        "CREATE INDEX et_history_cases_nodeid ON et_history_cases (nodeid, device)",
    ),
    2: (
        # Lab places (labgrid) per test, and runs found by time.
        "ALTER TABLE et_history_cases ADD COLUMN place VARCHAR(200) NOT NULL DEFAULT ''",
        "ALTER TABLE et_history_cases ADD COLUMN exporter VARCHAR(200) NOT NULL DEFAULT ''",
        "CREATE INDEX et_history_runs_started ON et_history_runs (started)",
    ),
    3: (
        # Runs across runtimes (--runtime): a check is a test on a device with a runtime.
        "ALTER TABLE et_history_runs ADD COLUMN runtimes TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE et_history_cases ADD COLUMN runtime_label VARCHAR(200) NOT NULL DEFAULT ''",
        "CREATE INDEX et_history_cases_check ON et_history_cases (nodeid, device, runtime_label)",
    ),
}
assert max(MIGRATIONS) == SCHEMA_VERSION


class SchemaError(UsageError):
    """The database is not a history store this harness can use; the message says why."""


def lock_store(connection: Connection) -> None:
    """Hold the store's lock until the transaction ends (SQLite: BEGIN IMMEDIATE did)."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK})


def current_version(connection: Connection) -> int | None:
    """The store's schema version; None for an empty database.

    Raises :class:`SchemaError` for a database that holds other tables (not a store)
    or a newer schema than this harness knows.
    """
    tables = set(inspect(connection).get_table_names())
    if migrations_table.name not in tables:
        if tables:
            shown = ", ".join(sorted(tables)[:5])
            raise SchemaError(
                f"holds other tables ({shown}) and no {migrations_table.name}: "
                "not an et-harness history store"
            )
        return None
    version = connection.execute(text(f"SELECT MAX(version) FROM {migrations_table.name}"))
    found = version.scalar_one_or_none()
    if found is None or not isinstance(found, int):
        raise SchemaError(f"{migrations_table.name} names no schema version")
    if found > SCHEMA_VERSION:
        raise SchemaError(
            f"schema version {found} is newer than this harness's {SCHEMA_VERSION}: "
            "update the harness on this runner"
        )
    unknown = tables - KNOWN_TABLES
    if unknown:
        raise SchemaError(f"holds tables a history store has not: {', '.join(sorted(unknown))}")
    return found


def migrate(connection: Connection) -> tuple[int | None, int]:
    """Bring the store to :data:`SCHEMA_VERSION` inside the caller's locked transaction;
    return (version found, version now)."""
    lock_store(connection)
    found = current_version(connection)
    if found is None:
        migrations_table.create(connection)
    for version in range((found or 0) + 1, SCHEMA_VERSION + 1):
        for statement in MIGRATIONS[version]:
            connection.execute(text(statement))
        connection.execute(migrations_table.insert().values(version=version, applied=time.time()))
    return found, SCHEMA_VERSION
