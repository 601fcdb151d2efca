"""A labgrid lab: its places held for a run's devices (the ``[lab]`` extra: labgrid).

- :mod:`~harness.profiles.lab_setting`: a profile's labgrid setting;
- :mod:`~harness.lab.reservation`: reserving, acquiring and handing over a place;
- :mod:`~harness.lab.own_place`: a place the user holds used as theirs, and a place held
  for the length of one command (``send``, ``doctor``);
- :mod:`~harness.lab.client_session`: labgrid's own client session, in process, one per
  coordinator and identity;
- :mod:`~harness.lab.handback`: a dead run's hand-over, for its janitor;
- :mod:`~harness.lab.places`: the coordinator's view, checked (names, tags, holders);
- :mod:`~harness.lab.identity`: one harness process as a labgrid owner;
- :mod:`~harness.lab.resources`: an acquired place's resources, checked, and the address
  its device kind takes from them;
- :mod:`~harness.lab.quarantine`: a place out of service lab-wide (opt-in), the
  operator's own comment kept and given back;
- :mod:`~harness.cli.lab_benchmark`: what a lab costs; :mod:`~harness.cli.lab_scale`: a larger
  lab, by simulation.

Only :mod:`~harness.lab.client_session` and what runs through it import labgrid itself, and
only when a profile names a lab. See docs/device-farm.md.
"""
