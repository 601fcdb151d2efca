"""A run's results: one record per test, as files, tables, an HTML report and JUnit.

- :mod:`~harness.results.infra`: what counts as an infrastructure error;
- :mod:`~harness.results.records`, :mod:`~harness.results.directory`: one JSON line per test,
  ``run.json``;
- :mod:`~harness.results.artifacts`: core files pulled after the agent died;
- :mod:`~harness.results.reporting`: the controller's reporting hooks, over
  :mod:`~harness.results.summary`, :mod:`~harness.results.html_report`,
  :mod:`~harness.results.junit`: terminal tables, the HTML report, JUnit additions;
- :mod:`~harness.results.lab_holdings`: who held which labgrid place when, a run's own record;
- :mod:`~harness.results.merge`: many runs' results into one report.

See docs/device-farm.md.
"""
