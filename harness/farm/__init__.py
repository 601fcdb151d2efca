"""Device-farm runs: many devices at once, held exclusively, retried, quarantined, reported.

The pytest plugin (:mod:`harness.pytest_plugin`) is glue; the logic lives here,
one concept per module:

- :mod:`~harness.farm.command_line`: the plugin's options and what they become (the
  policy, where results go);
- :mod:`~harness.farm.selection`: which profiles ``--device`` names;
- :mod:`~harness.farm.distribution`: each device's tests on one xdist worker (a lab
  pool's on up to N);
- :mod:`~harness.farm.policy`: the run's rules (retries, quarantine, waits);
- :mod:`~harness.farm.lock`: one holder per device across processes on a host;
- :mod:`~harness.farm.labgrid`: a profile's labgrid setting;
  :mod:`~harness.farm.lab_reservation`: reserving, acquiring and handing over a place;
  :mod:`~harness.farm.lab_session`: labgrid's own client session, in process, one per
  coordinator and identity; :mod:`~harness.farm.lab_handback`: a dead run's hand-over,
  for its janitor; :mod:`~harness.farm.lab_places`: the coordinator's view, checked
  (holders, identities); :mod:`~harness.farm.lab_resources`: an acquired place's
  resources, checked, and the address its device kind takes from them;
  :mod:`~harness.farm.lab_quarantine`: a place out of service lab-wide (opt-in);
  :mod:`~harness.farm.lab_holdings`: who held which place when, a run's own record;
  :mod:`~harness.farm.lab_benchmark`: what a lab costs; :mod:`~harness.farm.lab_scale`:
  a larger lab, by simulation;
- :mod:`~harness.farm.deadline`: the whole-run timeout;
- :mod:`~harness.farm.infra`: what counts as an infrastructure error;
- :mod:`~harness.farm.health`: consecutive infrastructure errors and quarantine;
- :mod:`~harness.farm.slot`: one device as a run uses it (bring-up, restarts, retries);
- :mod:`~harness.farm.artifacts`: core files pulled after the agent died;
- :mod:`~harness.farm.records`, :mod:`~harness.farm.results`: one JSON line per test;
- :mod:`~harness.farm.reporting`: the controller's reporting hooks, over
  :mod:`~harness.farm.summary`, :mod:`~harness.farm.html_report`,
  :mod:`~harness.farm.junit`: terminal tables, the HTML report, JUnit additions;
- :mod:`~harness.farm.xdist_workers`: a SIGTERM to the controller reaches its workers;
- :mod:`~harness.farm.merge`: many runs' results into one report.

See docs/device-farm.md.
"""
