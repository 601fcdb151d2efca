"""A lab larger than this machine, by simulation: ``python -m harness.cli.lab_scale``.

A real ``labgrid-coordinator``, 8 real ``labgrid-exporter`` processes and 64 places in
4 pools of unequal size (so that some pools are contended), each place backed by the
cheapest device there is: a ``NetworkService`` that an exporter announces and nothing
answers (the runner only holds the place, as a ``local`` lab profile does). 16
runners, each with a labgrid identity and client session of its own (threads of this
process), take turns: pick a pool at random, acquire a place of it through
:class:`~harness.lab.reservation.LabgridReservation` (the harness's own path),
hold it a moment, hand it back. It prints:

- served: hand-overs per runner (min..max), and the longest wait, against the median;
- no idle place while a runner waits: the time, summed over the run, during which a
  pool had a place free (not acquired, not allocated) while one of its runners had its
  reservations made and none allocated yet (sampled at each update from the coordinator);
- free -> taken: from one runner's release to the next holder's acquisition, when
  someone was waiting for that pool;
- CPU per hand-over: the coordinator's, and the runners' (this process's).

A benchmark: figures, no pass/fail. docs/device-farm.md keeps them and the limits.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import random
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.emulators.labgrid_lab import labgrid_program, wait_listening
from harness.lab.client_session import LabSession
from harness.lab.identity import LabIdentity
from harness.lab.reservation import LabgridReservation
from harness.lifecycle.cache import cache_root
from harness.lifecycle.owner import owned_directory
from harness.lifecycle.process import ManagedProcess, free_port
from harness.profiles.lab_setting import LabgridPlace

EXPORTERS = 8
POOLS = {"big": 40, "mid": 16, "small": 4, "tiny": 4}  # 64 places
RUNNERS = 16


@dataclass
class Tally:
    """What the runners did, under one lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    asking: dict[int, tuple[str, LabgridReservation]] = field(default_factory=dict)
    waits: list[float] = field(default_factory=list)
    served: dict[int, int] = field(default_factory=dict)
    holdings: list[tuple[str, float, float, float]] = field(default_factory=list)
    # (place, asked_at, acquired_at, released_at), monotonic


def _ticks(pid: int) -> float:
    """CPU seconds of process ``pid`` (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def simulated_lab() -> Iterator[tuple[str, ManagedProcess, dict[str, str]]]:
    """Coordinator, exporters and places; (address, coordinator process, place -> pool)."""
    with contextlib.ExitStack() as stack:
        directory = stack.enter_context(owned_directory("lab-scale-", cache_root() / "emulators"))
        address = f"127.0.0.1:{free_port('127.0.0.1')}"
        coordinator = ManagedProcess(
            [
                "env",
                "-C",
                str(directory),
                labgrid_program("labgrid-coordinator"),
                "--listen",
                address,
            ],
            name="labgrid-coordinator",
        )
        stack.callback(coordinator.stop)
        wait_listening("127.0.0.1", int(address.rsplit(":", 1)[1]), coordinator)
        pools = [pool for pool, size in POOLS.items() for _ in range(size)]
        per_exporter = len(pools) // EXPORTERS
        for number in range(EXPORTERS):
            stack.callback(_start_exporter(directory, address, number, per_exporter).stop)
        admin = LabSession.of(address, LabIdentity.this_process())
        deadline = time.monotonic() + 60
        while len(admin.snapshot()[1]) < len(pools):
            if time.monotonic() > deadline:
                raise RuntimeError("the exporters did not register within 60 s")
            admin.wait_update(timeout=1.0)
        place_pool = _add_places(admin, pools, per_exporter)
        yield address, coordinator, place_pool


def _start_exporter(directory: Path, address: str, number: int, slots: int) -> ManagedProcess:
    """Exporter ``number``, exporting ``slots`` simulated places' resources."""
    config = directory / f"exp-{number}.yaml"
    config.write_text(
        "".join(
            f"p{slot}:\n  NetworkService:\n    address: 127.0.0.1\n    port: 22\n"
            "    username: sim\n"
            for slot in range(slots)
        )
    )
    return ManagedProcess(
        [
            labgrid_program("labgrid-exporter"),
            "-c",
            address,
            "-n",
            f"exp-{number}",
            str(config),
        ],
        name=f"labgrid-exporter-{number}",
        log=directory / f"exp-{number}.log",
    )


def _add_places(admin: LabSession, pools: list[str], per_exporter: int) -> dict[str, str]:
    """A place per entry of ``pools``, matching its exporter's slot, tagged with its pool;
    place -> pool."""
    messages = admin.messages()
    place_pool = {}
    for index, pool in enumerate(pools):
        name = f"{pool}-{index}"
        exporter, slot = divmod(index, per_exporter)
        admin.call("add", "AddPlace", messages.AddPlaceRequest(name=name))
        admin.call(
            "match",
            "AddPlaceMatch",
            messages.AddPlaceMatchRequest(placename=name, pattern=f"exp-{exporter}/p{slot}/*"),
        )
        admin.call(
            "tags",
            "SetPlaceTags",
            messages.SetPlaceTagsRequest(placename=name, tags={"pool": pool, "kind": "sim"}),
        )
        place_pool[name] = pool
    return place_pool


def runner(address: str, number: int, rounds: int, tally: Tally, seed: int) -> None:
    me = LabIdentity.this_process()
    identity = LabIdentity(me.host, f"sim{number}", me.pid, me.start)
    chance = random.Random(seed + number)
    for _ in range(rounds):
        pool = chance.choice(list(POOLS))
        reservation = LabgridReservation(
            LabgridPlace(tags=(("pool", pool),), coordinator=address), identity
        )
        with tally.lock:
            tally.asking[number] = (pool, reservation)
        asked = time.monotonic()
        try:
            held = reservation.acquire(300)
        finally:
            with tally.lock:
                del tally.asking[number]
        acquired = time.monotonic()
        time.sleep(chance.uniform(0.2, 0.6))  # the tests on the place
        reservation.release()
        with tally.lock:
            tally.waits.append(acquired - asked)
            tally.served[number] = tally.served.get(number, 0) + 1
            tally.holdings.append((held.name, asked, acquired, time.monotonic()))


def idle_while_waiting(
    admin: LabSession, place_pool: dict[str, str], tally: Tally, stop: threading.Event
) -> list[float]:
    """Seconds, per pool-check, that a pool had a free place while a runner waited."""
    idle = [0.0]
    last = time.monotonic()
    while not stop.is_set():
        admin.wait_update(timeout=0.5)
        raws, _ = admin.snapshot()
        now = time.monotonic()
        allocated = {raw.reservation for raw in raws if raw.reservation}
        with tally.lock:  # a runner waits once its reservations are made, until one is
            waiting = {  # allocated to it
                pool
                for pool, r in tally.asking.values()
                if r.tokens and not r.held and not r.tokens & allocated
            }
        free = {pool: 0 for pool in POOLS}
        for raw in raws:
            if raw.name in place_pool and not raw.acquired and not raw.reservation:
                free[place_pool[raw.name]] += 1
        if any(free[pool] and pool in waiting for pool in POOLS):
            idle[0] += now - last
        last = now
    return idle


def _free_to_taken(holdings: list[tuple[str, float, float, float]]) -> list[float]:
    """Seconds from a place's release to its next acquisition, where the next holder was
    already waiting when it was freed."""
    by_place: dict[str, list[tuple[str, float, float, float]]] = {}
    for holding in holdings:
        by_place.setdefault(holding[0], []).append(holding)
    free_to_taken = []
    for held in by_place.values():
        held.sort(key=lambda h: h[2])
        for before, after in itertools.pairwise(held):
            if after[1] < before[3]:  # the next holder was waiting when it was freed
                free_to_taken.append(after[2] - before[3])
    return free_to_taken


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.cli.lab_scale")
    parser.add_argument("--rounds", type=int, default=8, help="acquisitions per runner")
    parser.add_argument("--seed", type=int, default=25)
    args = parser.parse_args(argv)
    with simulated_lab() as (address, coordinator, place_pool):
        admin = LabSession.of(address, LabIdentity.this_process())
        tally, stop = Tally(), threading.Event()
        idle: list[float] = []
        watcher = threading.Thread(
            target=lambda: idle.extend(idle_while_waiting(admin, place_pool, tally, stop))
        )
        watcher.start()
        cpu_coordinator, cpu_runners = _ticks(coordinator.pid), time.process_time()
        started = time.monotonic()
        threads = [
            threading.Thread(target=runner, args=(address, n, args.rounds, tally, args.seed))
            for n in range(RUNNERS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.monotonic() - started
        cpu_coordinator = _ticks(coordinator.pid) - cpu_coordinator
        cpu_runners = time.process_time() - cpu_runners
        stop.set()
        watcher.join()
    handovers = len(tally.holdings)
    free_to_taken = _free_to_taken(tally.holdings)
    served = [tally.served.get(n, 0) for n in range(RUNNERS)]
    print(
        f"lab: 1 coordinator, {EXPORTERS} exporters, {len(place_pool)} places in pools "
        + ", ".join(f"{p}={n}" for p, n in POOLS.items())
        + f"; {RUNNERS} runners x {args.rounds} acquisitions, {wall:.1f} s"
    )
    print(
        f"served: {sum(served)} of {RUNNERS * args.rounds}; per runner {min(served)}..{max(served)}"
    )
    print(
        f"wait for a place: median {statistics.median(tally.waits):.2f} s, "
        f"max {max(tally.waits):.2f} s"
    )
    print(f"a pool with a free place while one of its runners waited: {idle[0]:.2f} s in all")
    if free_to_taken:
        print(
            f"free -> taken (a runner waiting): min {min(free_to_taken) * 1000:.0f} ms, "
            f"median {statistics.median(free_to_taken) * 1000:.0f} ms, "
            f"max {max(free_to_taken) * 1000:.0f} ms (n={len(free_to_taken)})"
        )
    print(
        f"CPU per hand-over: coordinator {cpu_coordinator / handovers * 1000:.1f} ms, "
        f"runners {cpu_runners / handovers * 1000:.1f} ms (n={handovers})",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
