"""The history store's tables as they are at :data:`SCHEMA_VERSION` (what queries use).

The tables are made and changed only by :mod:`harness.history.migrations`; a test
keeps these definitions equal to what the migrations leave behind.

- ``et_history_migrations``: one row per migration applied (version, when);
- ``et_history_runs``: one row per run: identity, versions, devices, times, state;
- ``et_history_cases``: one row per test of a run, keyed by (run, nodeid).
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

SCHEMA_VERSION = 3

metadata = MetaData()

migrations_table = Table(
    "et_history_migrations",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("applied", Float, nullable=False),
)

runs = Table(
    "et_history_runs",
    metadata,
    Column("id", String(300), primary_key=True),  # HOST/NAME/START
    Column("name", String(200), nullable=False),  # the results directory's name
    Column("host", String(200), nullable=False),
    Column("command", Text, nullable=False),  # JSON list
    Column("devices", Text, nullable=False),  # comma-separated profile names
    Column("results_dir", Text, nullable=False),
    Column("harness_version", String(100), nullable=False),
    Column("harness_commit", String(64), nullable=False),
    Column("sdk_source", Text, nullable=False),
    Column("sdk_commit", String(64), nullable=False),
    Column("started", Float, nullable=False),
    Column("finished", Float),
    Column("exit_status", Integer),
    Column("state", String(20), nullable=False),
    Column("writer", String(200), nullable=False),  # boot id, pid, start of the writer
    Column("source", String(20), nullable=False),  # live or results.jsonl
    # version 3: the runtime labels of a run across runtimes (--runtime), comma-separated
    Column("runtimes", Text, nullable=False, server_default=""),
)

cases = Table(
    "et_history_cases",
    metadata,
    Column("run_id", String(300), ForeignKey("et_history_runs.id"), primary_key=True),
    Column("nodeid", String(1000), primary_key=True),
    Column("seq", Integer, nullable=False),  # its place in results.jsonl
    Column("suite", String(500), nullable=False),
    Column("device", String(200), nullable=False),  # "" for tests without a device
    Column("outcome", String(20), nullable=False),
    Column("duration", Float, nullable=False),
    Column("started", Float, nullable=False),
    Column("runtime", String(200), nullable=False),
    Column("agent_version", String(100), nullable=False),
    Column("load_paths", Text, nullable=False),  # comma-separated routes
    Column("backends", Text, nullable=False),  # comma-separated
    Column("differences", Text, nullable=False),  # short: the first few, one line each
    Column("infra_type", String(200), nullable=False),
    Column("infra_cause", Text, nullable=False),
    Column("tries", Integer, nullable=False),
    # version 2
    Column("place", String(200), nullable=False, server_default=""),
    Column("exporter", String(200), nullable=False, server_default=""),
    # version 3: the runtime the test ran (--runtime), "" for the device's own
    Column("runtime_label", String(200), nullable=False, server_default=""),
)

KNOWN_TABLES = frozenset(metadata.tables)
