"""What a labgrid lab costs: ``python -m harness.farm.lab_benchmark [--suite]``.

On the emulated lab (:mod:`harness.emulators.labgrid_lab`: a real coordinator,
real exporters and ser2net on loopback, QEMU boards), it prints

- a HELLO round trip (``Request(HELLO)`` to its report) over a place's RFC 2217 port
  (ser2net), against the same firmware on QEMU's raw TCP socket (mcu-emu);
- hand-over latency: from one runner's release returning to the waiting runner's
  allocation, for the harness's order (cancel the reservation, then release) and
  the other one (release, then cancel);
- the labgrid-client calls of one acquisition and one release;
- with ``--suite``: wall time of ``suites/test_dispatch.py`` on mcu-emu, on one lab
  place, and on the pool profile devices/lab-mcu.yaml with ``-n 2``: with one place
  free (the other held by someone else, so the second worker waits for the first's
  hand-over) and with both.

docs/performance.md keeps the figures and how to read them.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from harness.agent.session import AgentSession
from harness.config.profile import parse_profile
from harness.emulators.labgrid_lab import LabgridLab, running_lab
from harness.emulators.qemu_mcu import QemuMcu, build_firmware
from harness.farm.lab_places import LabIdentity
from harness.farm.labgrid import LabgridPlace, LabgridReservation, find_client
from harness.link.serial.port import SerialPortConfig, connect
from harness.model.messages import Action, Request

ROOT = Path(__file__).resolve().parents[2]
_ROUND_TRIPS = 50


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    return (
        f"median {statistics.median(ordered) * 1000:.1f} ms, "
        f"p90 {ordered[int(0.9 * (len(ordered) - 1))] * 1000:.1f} ms (n={len(ordered)})"
    )


def _round_trips(link: AgentSession) -> list[float]:
    samples = []
    for _ in range(_ROUND_TRIPS):
        started = time.perf_counter()
        link.request(Request(Action.HELLO))
        samples.append(time.perf_counter() - started)
    return samples


def _reservation(lab: LabgridLab, user: str, place: str | None = None) -> LabgridReservation:
    me = LabIdentity.this_process()
    wanted = (
        LabgridPlace(place=place, coordinator=lab.coordinator)
        if place
        else LabgridPlace(tags=(("pool", "lab"),), coordinator=lab.coordinator)
    )
    profile = parse_profile({"transport": {"kind": "local", "labgrid": {"place": "x"}}}, None, "b")
    return LabgridReservation(
        wanted, find_client(profile), LabIdentity(me.host, user, me.pid, me.start)
    )


def hello_figures(lab: LabgridLab) -> dict[str, list[float]]:
    with QemuMcu(build_firmware()) as qemu:
        link = qemu.connect()
        raw = _round_trips(AgentSession(link))
        link.close()
    reservation = _reservation(lab, "bench", lab.places[0].name)
    held = reservation.acquire(60)
    try:
        reservation.power_cycle()
        assert held.resources.serial is not None
        link = connect(SerialPortConfig(url=held.resources.serial.url), name="lab")
        network = _round_trips(AgentSession(link))
        link.close()
    finally:
        reservation.release()
    return {"raw socket (QEMU tcp, mcu-emu)": raw, "RFC 2217 (labgrid ser2net)": network}


def handover(lab: LabgridLab, cancel_first: bool) -> float:
    """Seconds from runner A's hand-over returning to runner B's ``reserve --wait``
    returning with the place allocated (B polls once a second, as labgrid's client does)."""
    place = lab.places[0].name
    first, second = _reservation(lab, "bench-a", place), _reservation(lab, "bench-b", place)
    first.acquire(60)
    printed: list[str] = []
    allocated: list[float] = []

    def wait_for_place() -> None:
        printed.append(second.lab.run(["reserve", "--wait", "--shell", f"name={place}"], 120))
        allocated.append(time.monotonic())

    waiting = threading.Thread(target=wait_for_place)
    waiting.start()
    deadline = time.monotonic() + 60
    while "state: waiting" not in lab.client("reservations"):
        if time.monotonic() > deadline:
            raise RuntimeError("the second reservation never showed as waiting")
    assert first.token is not None and first.held is not None
    token, name = first.token, first.held.name
    if cancel_first:
        first.release()  # the harness's order
    else:
        first.token = first.held = None
        first.lab.run(["-p", name, "release"])
        first.lab.run(["cancel-reservation", token])
    released = time.monotonic()
    waiting.join(180)
    second.lab.run(["cancel-reservation", printed[0].split("LG_TOKEN=")[1].split()[0]])
    return allocated[0] - released


@contextlib.contextmanager
def _places_free(lab: LabgridLab, free: int) -> Iterator[None]:
    """All but ``free`` of the lab's places held by another owner meanwhile."""
    held = [_reservation(lab, "bench-holder", place.name) for place in lab.places[free:]]
    try:
        for reservation in held:
            reservation.acquire(60)
        yield
    finally:
        for reservation in held:
            reservation.release()


def suite_wall_time(devices: Path, device: str, *extra: str) -> tuple[float, str]:
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "suites/test_dispatch.py",
            "-q",
            "-p",
            "no:cacheprovider",
            "--devices-dir",
            str(devices),
            "--device",
            device,
            "--lock-timeout",
            "600",
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    return time.monotonic() - started, summary


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.farm.lab_benchmark")
    parser.add_argument("--suite", action="store_true", help="also time suites/test_dispatch.py")
    parser.add_argument("--handovers", type=int, default=3)
    args = parser.parse_args(argv)
    with running_lab(2) as lab:
        for name, samples in hello_figures(lab).items():
            print(f"HELLO round trip, {name}: {_ms(samples)}", flush=True)
        for cancel_first in (True, False):
            order = "cancel, then release" if cancel_first else "release, then cancel"
            figures = [handover(lab, cancel_first) for _ in range(args.handovers)]
            print(f"hand-over ({order}): " + ", ".join(f"{f:.2f} s" for f in figures), flush=True)
        timing = _reservation(lab, "bench-calls")
        started = time.monotonic()
        timing.acquire(60)
        acquired = time.monotonic() - started
        started = time.monotonic()
        timing.release()
        print(
            f"acquisition (4 labgrid-client calls): {acquired:.2f} s; release (2 calls): "
            f"{time.monotonic() - started:.2f} s",
            flush=True,
        )
        if args.suite:
            with tempfile.TemporaryDirectory() as directory:
                devices = Path(directory)
                text = (
                    (ROOT / "devices" / "lab-mcu.yaml")
                    .read_text()
                    .replace('"127.0.0.1:20408"', f'"{lab.coordinator}"')
                )
                (devices / "lab-mcu.yaml").write_text(text)
                mcu_emu = (ROOT / "devices" / "mcu-emu.yaml").read_text()
                (devices / "mcu-emu.yaml").write_text(mcu_emu)
                for label, device, extra, pool in (
                    ("mcu-emu (QEMU socket)", "mcu-emu", (), 2),
                    ("one lab place (RFC 2217), one worker", "lab-mcu", (), 2),
                    ("pool lab-mcu, -n 2, 1 place free", "lab-mcu", ("-n", "2"), 1),
                    ("pool lab-mcu, -n 2, 2 places free", "lab-mcu", ("-n", "2"), 2),
                ):
                    with _places_free(lab, pool):
                        seconds, summary = suite_wall_time(devices, device, *extra)
                    print(f"test_dispatch.py, {label}: {seconds:.1f} s ({summary})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
