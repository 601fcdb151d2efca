"""Scheduling a device-farm run: many devices at once, held exclusively, retried, quarantined.

The pytest plugin (:mod:`harness.pytest_plugin`) is glue; the logic lives here,
one concept per module:

- :mod:`~harness.farm.command_line`: the plugin's options and what they become (the
  policy, where results go);
- :mod:`~harness.farm.selection`: which profiles ``--device`` names;
- :mod:`~harness.farm.distribution`: each device's tests on one xdist worker (a lab
  pool's on up to N);
- :mod:`~harness.farm.policy`: the run's rules (retries, quarantine, waits);
- :mod:`~harness.farm.lock`: one holder per device across processes on a host;
- :mod:`~harness.farm.deadline`: the whole-run timeout;
- :mod:`~harness.farm.device_health`: consecutive infrastructure errors and quarantine;
- :mod:`~harness.farm.slot`: one device as a run uses it (bring-up, restarts, retries);
- :mod:`~harness.farm.rootdir`: path options that must not move pytest's rootdir;
- :mod:`~harness.farm.xdist_workers`: a SIGTERM to the controller reaches its workers.

A run's results are :mod:`harness.results`; a labgrid lab's places are :mod:`harness.lab`.
See docs/device-farm.md.
"""
