"""The history store: an SQLite file (default) or a lab's PostgreSQL, over SQLAlchemy 2.

:func:`~harness.history.target.store_target` says where (``--history``,
``$ET_HARNESS_HISTORY``, or ``<data folder>/history.sqlite``); :meth:`HistoryStore.open`
connects, takes the store's lock and migrates it (:mod:`harness.history.migrations`).
Every write is its own short transaction and inserts only rows that are not there
yet, so two runners at once never lose or corrupt rows (SQLite: ``BEGIN IMMEDIATE``
with a busy timeout; PostgreSQL: row-level ``ON CONFLICT DO NOTHING``), and catching a
run up from its ``results.jsonl`` after the live writer wrote part of it adds only
what is missing. Whatever goes wrong reaching or reading the store is a
:class:`StoreError` whose message is one line naming the store and what to do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, Table, create_engine, event, func, select, update
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, OperationalError, SQLAlchemyError

from harness.errors import UsageError
from harness.extras import POSTGRES
from harness.history.migrations import SchemaError, migrate
from harness.history.schema import cases, runs
from harness.history.stored_runs import (
    COMPLETE,
    INCOMPLETE,
    RUNNING,
    CaseRecord,
    DamagedRecord,
    RunRecord,
)
from harness.history.target import TargetError, driver_of
from harness.untrusted.value_rules import expand_home

CONNECT_TIMEOUT_S = 5  # an unreachable lab database costs a run this long, once
BUSY_TIMEOUT_S = 60  # SQLite: how long a writer waits for another's transaction
# PostgreSQL: connecting, each statement (lock waits included) and a peer gone silent
# (TCP keepalives: about 25 s) are bounded, so a hung database never hangs a run.
_POSTGRES_BOUNDS = {
    "connect_timeout": CONNECT_TIMEOUT_S,
    "options": f"-c statement_timeout={BUSY_TIMEOUT_S * 1000}",
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}


class StoreError(UsageError):
    """The store cannot be opened, read or written; the message says what to do."""


class StoreUnreachable(StoreError):
    """The store's server (or file system) did not answer: a run keeps going without it."""


def store_url(target: str) -> URL:
    """``target`` as a database URL: a URL as given (``postgresql://`` taken by psycopg 3),
    anything else a path to an SQLite file."""
    try:
        driver = driver_of(target)
    except TargetError as exc:
        raise StoreError(f"history: {exc}") from None
    if "://" not in target:
        path = expand_home(target).absolute()  # its ~user checked by driver_of
        return URL.create("sqlite", database=str(path))
    try:
        return make_url(target).set(drivername=driver)
    except ArgumentError:
        raise StoreError(
            "history: not a database URL; give an SQLite file path or a "
            "postgresql://USER@HOST/DB URL"
        ) from None


def shown(url: URL) -> str:
    """The store as messages name it: a file's path, a URL without its password."""
    if url.drivername == "sqlite":
        return str(url.database)
    return url.render_as_string(hide_password=True)


def _engine(url: URL, create: bool) -> Engine:
    if url.drivername == "sqlite":
        path = Path(url.database or "")
        if path.is_dir():
            raise StoreError(f"history {path}: is a directory; give a file path")
        if not create and not path.exists():
            raise StoreError(
                f"history {path}: no such store; a run with the history on makes it, and "
                "--catch-up DIR makes it from runs' results directories"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})

        @event.listens_for(engine, "connect")
        def _no_implicit_transactions(dbapi_connection: Any, _: Any) -> None:
            dbapi_connection.isolation_level = None  # transactions begin below, explicitly

        @event.listens_for(engine, "begin")
        def _take_the_write_lock(connection: Any) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    missing = POSTGRES.missing("PostgreSQL")
    if missing is not None:
        raise StoreError(f"history {shown(url)}: {missing}")
    return create_engine(url, connect_args=_POSTGRES_BOUNDS)


class HistoryStore:
    """An opened, migrated store."""

    def __init__(self, engine: Engine, where: str) -> None:
        self.engine = engine
        self.where = where

    @classmethod
    def open(cls, target: str, *, create: bool = True) -> HistoryStore:
        """The store ``target`` names, migrated; an SQLite file that is not there is made
        (with its folders) only when ``create``: a reader does not make one."""
        url = store_url(target)
        where = shown(url)
        try:
            store = cls(_engine(url, create), where)
        except OSError as exc:
            raise StoreUnreachable(f"history {where}: cannot create it: {exc.strerror}") from None
        with store._failing_as_store_error("opening"):
            with store.engine.begin() as connection:
                migrate(connection)
        return store

    def close(self) -> None:
        self.engine.dispose()

    # ---- writing ----------------------------------------------------------------------

    def add_run(self, row: dict[str, Any]) -> None:
        """Insert the run unless it is there already."""
        with self._failing_as_store_error("writing"), self.engine.begin() as connection:
            connection.execute(self._insert_new(runs), [_fitted(runs, row)])

    def add_cases(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert the cases that are not there yet."""
        if not rows:
            return
        with self._failing_as_store_error("writing"), self.engine.begin() as connection:
            connection.execute(self._insert_new(cases), [_fitted(cases, row) for row in rows])

    def end_run(self, run_id: str, finished: float | None, exit_status: int | None) -> None:
        """Mark the run complete (it ended with an exit status) or incomplete."""
        state = COMPLETE if exit_status is not None else INCOMPLETE
        with self._failing_as_store_error("writing"), self.engine.begin() as connection:
            connection.execute(
                update(runs)
                .where(runs.c.id == run_id, runs.c.state != COMPLETE)
                .values(finished=finished, exit_status=exit_status, state=state)
            )

    def mark_abandoned(self, dead: Iterable[str]) -> None:
        """Runs still ``running`` whose writer is one of ``dead`` become incomplete
        (:func:`harness.history.writers.dead_writers`)."""
        with self._failing_as_store_error("writing"), self.engine.begin() as connection:
            connection.execute(
                update(runs)
                .where(runs.c.state == RUNNING, runs.c.writer.in_(list(dead)))
                .values(state=INCOMPLETE)
            )

    def writer_of(self, run_id: str) -> str:
        """The writer of a run ("" for a run caught up from its results directory)."""
        with self._failing_as_store_error("reading"), self.engine.begin() as connection:
            found = connection.execute(select(runs.c.writer).where(runs.c.id == run_id))
            return found.scalar_one_or_none() or ""

    def running_writers(self) -> list[str]:
        with self._failing_as_store_error("reading"), self.engine.begin() as connection:
            found = connection.execute(
                select(runs.c.writer).where(runs.c.state == RUNNING).distinct()
            )
            return [row[0] for row in found]

    # ---- reading ----------------------------------------------------------------------

    def recent_runs(self, count: int) -> list[RunRecord]:
        """The last ``count`` runs by start time, oldest first."""
        with self._failing_as_store_error("reading"), self.engine.begin() as connection:
            rows = (
                connection.execute(
                    select(runs).order_by(runs.c.started.desc(), runs.c.id.desc()).limit(count)
                )
                .mappings()
                .all()
            )
            ids = [row["id"] for row in rows]
            suites: dict[str, list[str]] = {}
            for run, suite in connection.execute(
                select(cases.c.run_id, cases.c.suite)
                .where(cases.c.run_id.in_(ids))
                .group_by(cases.c.run_id, cases.c.suite)
            ):
                suites.setdefault(run, []).append(suite)
            return [RunRecord.of_row(row, suites.get(row["id"], [])) for row in reversed(rows)]

    def cases_of(self, run_ids: Sequence[str]) -> list[CaseRecord]:
        """The cases of these runs, each run's in the order they were written."""
        with self._failing_as_store_error("reading"), self.engine.begin() as connection:
            rows = connection.execute(
                select(cases)
                .where(cases.c.run_id.in_(list(run_ids)))
                .order_by(cases.c.run_id, cases.c.seq)
            ).mappings()
            return [CaseRecord.of_row(row) for row in rows]

    def count_cases(self, run_id: str) -> int:
        with self._failing_as_store_error("reading"), self.engine.begin() as connection:
            return int(
                connection.execute(
                    select(func.count()).select_from(cases).where(cases.c.run_id == run_id)
                ).scalar_one()
            )

    # ---- plumbing ---------------------------------------------------------------------

    def _insert_new(self, table: Any) -> Any:
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(table).on_conflict_do_nothing()
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table).on_conflict_do_nothing()

    def _failing_as_store_error(self, doing: str) -> contextlib.AbstractContextManager[None]:
        return _store_errors(self.where, doing)


@contextlib.contextmanager
def _store_errors(where: str, doing: str) -> Iterator[None]:
    """Turns what the database library raises into one-line :class:`StoreError` s."""
    prefix = f"history {where}"
    try:
        yield
    except SchemaError as exc:
        raise StoreError(f"{prefix}: {exc}; give another --history store") from None
    except DamagedRecord as exc:
        raise StoreError(
            f"{prefix}: {exc}: changed outside the harness, or damaged; repair that row, "
            "or give another --history store"
        ) from None
    except DatabaseError as exc:
        reason = _first_line(str(exc.orig))
        if "not a database" in reason:
            raise StoreError(
                f"{prefix}: not an SQLite database (damaged or another kind of file); "
                "move it away or give another --history path"
            ) from None
        if isinstance(exc, OperationalError):
            raise StoreUnreachable(f"{prefix}: {doing} failed: {reason}") from None
        raise StoreError(
            f"{prefix}: {doing} failed: {reason}; is it an et-harness history store?"
        ) from None
    except SQLAlchemyError as exc:
        raise StoreError(f"{prefix}: {doing} failed: {_first_line(str(exc))}") from None
    except OSError as exc:
        raise StoreUnreachable(f"{prefix}: {doing} failed: {exc.strerror}") from None


def _fitted(table: Table, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with each text cut to its column's length: a run's names, facts and test ids
    come from profiles, agents and test parameters, and PostgreSQL refuses longer ones."""
    fitted = dict(row)
    for column in table.columns:
        length = getattr(column.type, "length", None)
        value = fitted.get(column.name)
        if length and isinstance(value, str) and len(value) > length:
            fitted[column.name] = value[:length]
    return fitted


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "unknown error")
