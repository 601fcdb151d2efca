"""A chaos run (``et-harness chaos``): the device suites on the emulated devices while a
seeded injector kills their daemons, drops their links and fills the results disk, then
the invariants checked (docs/chaos.md)."""
