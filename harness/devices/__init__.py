"""Device kinds: how a profile becomes a device the harness can run an agent on.

- :mod:`harness.profiles.kinds` — the registry, below the profile layer: it finds each
  kind's module (one here per kind, or an ``et_harness.device_kinds`` entry point) and
  its ``KIND``, the :class:`~harness.profiles.kinds.DeviceKind` it declares;
- :mod:`harness.devices.bring_up` — :func:`open_device` and :func:`check_transport_settings`,
  which import a kind's module only when a device of that kind is used;
- :mod:`harness.devices.base` — the :class:`Device` interface; :mod:`.hosted` and
  :mod:`.firmware` its two implementations; one module per kind (:mod:`.local`,
  :mod:`.ssh`, :mod:`.adb`, :mod:`.serial`).
"""
