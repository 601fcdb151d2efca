"""Options maps the suites send: each backend's options distinct from every other's,
so that a delivery to the wrong backend cannot look right."""

from __future__ import annotations

from harness.options import BackendOptions, Option, OptionsMap

PROBE_NAMES = tuple(f"Probe{letter}" for letter in "ABCDEFGH")


def distinct_options(index: int, name: str) -> tuple[Option, ...]:
    """Options for backend number ``index``: shared keys with distinct values, and one of its own."""
    return (
        Option("threads", index + 1),
        Option("mode", f"mode-for-{name}"),
        Option("fast", index % 2 == 0),
        Option(f"only_{name}", -(index + 1)),
    )


def distinct_map(names: tuple[str, ...]) -> OptionsMap:
    """A map giving each of ``names`` its own distinct options."""
    return OptionsMap(
        tuple(BackendOptions(name, distinct_options(i, name)) for i, name in enumerate(names))
    )


def single(backend: str, *options: Option) -> OptionsMap:
    """A map with one backend."""
    return OptionsMap((BackendOptions(backend, tuple(options)),))
