"""Options maps the suites send: each backend's options distinct from every other's,
so that a delivery to the wrong backend cannot look right."""

from __future__ import annotations

from harness.options import BackendOptions, Option, OptionsMap

PROBE_NAMES = tuple(f"Probe{letter}" for letter in "ABCDEFGH")


def distinct_options(index: int, name: str) -> tuple[Option, ...]:
    """Options for backend number ``index``: shared keys with distinct values, and one of
    its own."""
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


def every_type(backend: str, count: int) -> OptionsMap:
    """``count`` options for ``backend``, ints, bools and strings of growing length in turn."""
    kinds = (lambda i: i * 1000 - 31000, lambda i: i % 3 == 0, lambda i: f"value-{i}-" + "v" * i)
    return OptionsMap(
        (
            BackendOptions(
                backend, tuple(Option(f"key{i:02d}", kinds[i % 3](i)) for i in range(count))
            ),
        )
    )


def single(backend: str, *options: Option) -> OptionsMap:
    """A map with one backend."""
    return OptionsMap((BackendOptions(backend, tuple(options)),))
