"""The run history: every run's tests in one store, and what a farm owner asks of it.

One concept per module:

- :mod:`~harness.history.target`: where the store is (``--history``, checked without
  the database library); :mod:`~harness.history.schema`,
  :mod:`~harness.history.migrations`: the tables and their versions;
  :mod:`~harness.history.store`: SQLite or PostgreSQL over SQLAlchemy;
- :mod:`~harness.history.stored_runs`: a run and its tests as stored, made from the records
  ``results.jsonl`` gets; :mod:`~harness.history.writers`: whether a run's writer lives;
- :mod:`~harness.history.live`: written as a run goes (a listener of the results
  recorder); :mod:`~harness.history.catch_up`: added later from a results directory;
- :mod:`~harness.history.view`: the runs an analysis reads, filtered by device,
  backend and test; :mod:`~harness.history.since_last`, :mod:`~harness.history.flaky`,
  :mod:`~harness.history.health_trends`, :mod:`~harness.history.regression`: the analyses;
- :mod:`~harness.history.command`, :mod:`~harness.history.terminal`: ``et-harness
  history``; :mod:`~harness.history.report_section`, :mod:`~harness.history.charts`:
  the HTML report's history and trend charts.

See docs/device-farm.md, "Run history".
"""
