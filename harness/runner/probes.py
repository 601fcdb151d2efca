"""Which names the harness registers as probes, and which backends of a load-time map a
load can check: the one rule ``et.load``/``et.set``/``et.get`` and ``et-harness send``
follow.

A probe is registered only under a name of the harness's own (beginning with
:data:`PROBE_PREFIX`: ``ProbeA``) or one the caller declared (``probes=``, ``--probe
NAME``). Any other name the device lacks is never registered: the runtime gives its own
answer (``set_option``/``get_option``: ``NotFound``; at load the name is no delegate of
the program, so its entry is ignored), which the verdict names as the device having no
such backend.

A load-time map is checked by loading a program the harness generates: its probes are
delegates, and of the device's real backends only ``XnnpackBackend`` (the harness's
XNNPACK program delegates to it, after the probes). Another real backend needs a program
that delegates to it: the user's own, ``et-harness send --program PTE --options MAP``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from harness.check.option_contracts import PROBE_PREFIX
from harness.check.wording import show_name
from harness.data.options import OptionsMap
from harness.errors import UsageError
from harness.programs.xnnpack import XNNPACK_BACKEND

PROGRAM_COMMAND = "et-harness send --program PTE --options MAP"
"""The command that checks a load-time map on a program of one's own."""


class ProbeRuleError(UsageError):
    """A map or a probe declaration the harness's programs cannot check; the message names
    the command that would."""


def is_harness_probe(name: str) -> bool:
    """True for a name of the harness's own probes (it begins with :data:`PROBE_PREFIX`)."""
    return name.startswith(PROBE_PREFIX)


def probes_to_register(
    names: Sequence[str], registered: Collection[str], declared: Collection[str]
) -> list[str]:
    """Of ``names``, those the harness registers as probes now: not in the registry, and
    the harness's own probe names or ``declared``."""
    return [
        n
        for n in dict.fromkeys(names)
        if n not in registered and (is_harness_probe(n) or n in declared)
    ]


def undeclared_probes(
    names: Sequence[str], registered_since: Collection[str], declared: Collection[str]
) -> list[str]:
    """Of ``names``, the probes an earlier call declared (``registered_since`` the agent
    started) that are neither the harness's own names nor ``declared`` now. The runtime
    cannot unregister them, so a call that does not declare them needs a fresh agent."""
    return [
        n
        for n in dict.fromkeys(names)
        if n in registered_since and not is_harness_probe(n) and n not in declared
    ]


def refuse_real_probes(declared: Collection[str], real: Collection[str]) -> None:
    """A declared probe may not be one of the device's real backends."""
    for name in declared:
        if name in real:
            raise ProbeRuleError(
                f"probe {show_name(name)}: the device has a real backend of that name; a "
                "probe cannot be registered under it: drop it from the probes"
            )


@dataclass(frozen=True)
class LoadPlan:
    """How a load checks a map: the program's ``delegates`` (probes in map order, then
    ``XnnpackBackend``), the real ones among them whose ``init`` the device does not record
    (``unobserved``), and the map's backends the device has no backend of (``absent``)."""

    delegates: tuple[str, ...]
    unobserved: tuple[str, ...]
    absent: tuple[str, ...]


def plan_load(
    options: OptionsMap,
    *,
    registered: Collection[str],
    real: Collection[str],
    recorded: Collection[str],
    declared: Collection[str] = (),
) -> LoadPlan:
    """The :class:`LoadPlan` of ``options`` on a device whose registry holds ``registered``,
    ``real`` of them its own backends and ``recorded`` those whose calls it records;
    ``declared`` names probes the caller declared. :class:`ProbeRuleError` when a real
    backend of the map has no program of the harness's, or no backend can be loaded."""
    refuse_real_probes(declared, real)
    probes, xnnpack, absent, no_program = [], [], [], []
    for name in options.backend_ids:
        if name == XNNPACK_BACKEND and name in real:
            xnnpack.append(name)
        elif name in real:
            no_program.append(name)
        elif name in registered or is_harness_probe(name) or name in declared:
            probes.append(name)
        else:
            absent.append(name)
    if no_program:
        listed = ", ".join(map(show_name, no_program))
        raise ProbeRuleError(
            f"the harness has no program that delegates to {listed}, so a load cannot check "
            f"its load-time options: load a program of yours that does: {PROGRAM_COMMAND} "
            "(et.check_program in a test); its global options: --action set or get"
        )
    delegates = (*probes, *xnnpack)
    if not delegates:
        missing = ", ".join(map(show_name, absent)) or "none"
        raise ProbeRuleError(
            f"nothing to load: the map's backends ({missing}) are neither backends of the "
            f"device ({', '.join(map(show_name, real)) or 'none'}) nor probes; a probe is "
            f"named {PROBE_PREFIX}... or declared (--probe NAME, probes=); a backend of the "
            f"device is checked at load with a program of yours: {PROGRAM_COMMAND}"
        )
    unobserved = tuple(name for name in xnnpack if name not in recorded)
    return LoadPlan(delegates, unobserved, tuple(absent))
