"""What an agent announced in its HELLO report: its backends, load paths and limits.

:class:`Announced` reads the facts of a HELLO report (docs/wire-format.md, HELLO) with
the defaults an older agent that does not announce them gets.
"""

from __future__ import annotations

from harness.data.messages import LoadPath, Report
from harness.data.options import MAX_LOAD_BACKENDS, MAX_OPTIONS_PER_BACKEND

__all__ = ["DEFAULT_REGISTRY_CAPACITY", "Announced"]

DEFAULT_REGISTRY_CAPACITY = 16  # kMaxRegisteredBackends


class Announced:
    """The facts of :attr:`hello`, the agent's HELLO report (a subclass provides it)."""

    @property
    def hello(self) -> Report:
        """The agent's HELLO report: facts and the backends registered at start."""
        raise NotImplementedError

    @property
    def real_backends(self) -> tuple[str, ...]:
        """The device's own backends: HELLO's entries without the PROBE flag (probes a
        board kept from an earlier session are probes all the same)."""
        return tuple(entry.name for entry in self.hello.entries if not entry.is_probe)

    @property
    def load_paths(self) -> tuple[LoadPath, ...]:
        """The load paths the agent serves (HELLO ``load_paths``; ``program`` if absent)."""
        announced = self.hello.fact("load_paths")
        if not isinstance(announced, str):
            return (LoadPath.PROGRAM,)
        known = {p.label: p for p in LoadPath}
        return tuple(known[name] for name in announced.split(",") if name in known)

    @property
    def load_flags(self) -> tuple[str, ...]:
        """The LOAD flags the agent honours (HELLO ``load_flags``, e.g. ``keep``)."""
        announced = self.hello.fact("load_flags")
        return tuple(announced.split(",")) if isinstance(announced, str) and announced else ()

    @property
    def recorded(self) -> tuple[str, ...]:
        """The real backends whose calls the agent records (HELLO ``recorded``): their
        entries are checked exactly, like a probe's (docs/agent.md)."""
        announced = self.hello.fact("recorded")
        return tuple(announced.split(",")) if isinstance(announced, str) and announced else ()

    @property
    def max_models(self) -> int:
        """How many models one LOAD may carry (HELLO ``max_models``; 1 if absent)."""
        value = self.hello.fact("max_models")
        return value if isinstance(value, int) and value >= 1 else 1

    @property
    def concurrent(self) -> bool:
        """Whether the device loads the models of a CONCURRENT LOAD on threads of their own
        (HELLO ``concurrent``; absent: whenever it holds several models)."""
        value = self.hello.fact("concurrent")
        return value if isinstance(value, bool) else self.max_models > 1

    @property
    def capacity(self) -> int:
        value = self.hello.fact("registry_capacity")
        return value if isinstance(value, int) else DEFAULT_REGISTRY_CAPACITY

    @property
    def options_per_backend(self) -> int:
        """Options one backend may carry in a request on this device (HELLO
        ``options_per_backend``, announced by devices short of RAM; else the wire's 64)."""
        return self._announced("options_per_backend", MAX_OPTIONS_PER_BACKEND)

    @property
    def backends_per_map(self) -> int:
        """Backends a load-time map may name on this device (HELLO ``backends_per_map``)."""
        return self._announced("backends_per_map", MAX_LOAD_BACKENDS)

    @property
    def options_per_request(self) -> int:
        """Options all backends of one request may carry together (HELLO
        ``options_per_request``; without it, as many as the per-backend limits allow)."""
        unbounded = self.backends_per_map * self.options_per_backend
        return self._announced("options_per_request", unbounded)

    def _announced(self, fact: str, limit: int) -> int:
        value = self.hello.fact(fact)
        return min(value, limit) if isinstance(value, int) and value > 0 else limit
