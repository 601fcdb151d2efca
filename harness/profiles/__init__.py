"""Reading untrusted settings: one validator driven by dataclass types (:mod:`.settings`),
and the registry of device kinds a profile may name (:mod:`.kinds`).

Device profiles (:mod:`harness.profiles.device_profile`) and each device kind's transport fields
(:mod:`harness.devices`) are checked by it, so every refusal has one wording and
names the file and the field.
"""
