"""What a labgrid lab costs: ``python -m harness.cli.lab_benchmark [--suite]``.

On the emulated lab (:mod:`harness.emulators.labgrid_lab`: a real coordinator,
real exporters and ser2net on loopback, QEMU boards), it prints

- a HELLO round trip (``Request(HELLO)`` to its report) over a place's RFC 2217 port
  (ser2net), against the same firmware on QEMU's raw TCP socket (mcu-emu);
- hand-over, over ``--handovers`` (at least 10) hand-overs of one place between two
  runners: from one runner's release returning to the waiting runner's first request
  on the board (HELLO sent over the place's ser2net port), min/median/max; beside it,
  labgrid's own client in the same lab: from ``labgrid-client release`` returning to
  a waiting ``labgrid-client reserve --wait`` and ``acquire`` having the place;
- one acquisition and one release through the harness's session;
- with ``--suite``: wall time of ``suites/test_dispatch.py`` on mcu-emu, on one lab
  place, and on the pool profile devices/lab-mcu.yaml with ``-n 2``: with one place
  free (the other held by someone else, so the second worker waits for the first's
  hand-over) and with both.

docs/performance.md keeps the figures and how to read them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from harness import shipped
from harness.channel.serial.connect import connect
from harness.data.messages import Action, Request
from harness.emulators.labgrid_lab import LabgridLab, running_lab
from harness.emulators.mcu import McuEmulator, build_firmware
from harness.lab.identity import LabIdentity
from harness.lab.reservation import LabgridReservation
from harness.profiles.lab_setting import LabgridPlace
from harness.session.agent_session import AgentSession
from harness.transport.serial import SerialSettings

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
    return LabgridReservation(wanted, LabIdentity(me.host, user, me.pid, me.start))


def hello_figures(lab: LabgridLab) -> dict[str, list[float]]:
    with McuEmulator(build_firmware()) as qemu:
        link = qemu.connect()
        raw = _round_trips(AgentSession(link))
        link.close()
    reservation = _reservation(lab, "bench", lab.places[0].name)
    held = reservation.acquire(60)
    try:
        reservation.power_cycle()
        assert held.resources.serial is not None
        link = connect(SerialSettings(url=held.resources.serial.url), name="lab")
        network = _round_trips(AgentSession(link))
        link.close()
    finally:
        reservation.release()
    return {"raw socket (QEMU tcp, mcu-emu)": raw, "RFC 2217 (labgrid ser2net)": network}


def _stats(samples: list[float]) -> str:
    return (
        f"min {min(samples):.2f} s, median {statistics.median(samples):.2f} s, "
        f"max {max(samples):.2f} s (n={len(samples)})"
    )


def handover(lab: LabgridLab) -> tuple[float, float]:
    """Seconds from runner A's release returning to runner B, which waited for the
    place, (1) holding it (the coordinator's and the exporter's part) and (2) having
    its first request on the board answered (the HELLO of the link's handshake). A
    used the board first, as a run does."""
    place = lab.places[0].name
    first, second = _reservation(lab, "bench-a", place), _reservation(lab, "bench-b", place)
    held = first.acquire(60)
    assert held.resources.serial is not None
    connect(SerialSettings(url=held.resources.serial.url), name="lab").close()
    marks: list[float] = []

    def next_runner() -> None:
        taken = second.acquire(120)
        marks.append(time.monotonic())
        assert taken.resources.serial is not None
        link = connect(SerialSettings(url=taken.resources.serial.url), name="lab")
        marks.append(time.monotonic())
        link.close()

    waiting = threading.Thread(target=next_runner)
    waiting.start()
    second.lab.wait_for(lambda: second.waiting or None, time.monotonic() + 60)
    first.release()
    released = time.monotonic()
    waiting.join(180)
    second.release()
    return marks[0] - released, marks[1] - released


def labgrid_handover(lab: LabgridLab) -> float:
    """The same with labgrid's own client: from ``release`` returning to a waiting
    ``reserve --wait`` and the ``acquire`` after it having the place."""
    place = lab.places[0].name
    env = {**os.environ, "LG_HOSTNAME": "bench", "LG_USERNAME": "labgrid-a"}
    other = {**env, "LG_USERNAME": "labgrid-b"}

    def client(environment: dict[str, str], *args: str) -> str:
        return subprocess.run(
            lab.client_argv(*args), env=environment, capture_output=True, text=True, check=True
        ).stdout

    token = client(env, "reserve", "--wait", "--shell", f"name={place}").split("=")[1].strip()
    client(env, "-p", f"+{token}", "acquire")
    acquired: list[float] = []

    def next_runner() -> None:
        printed = client(other, "reserve", "--wait", "--shell", f"name={place}")
        client(other, "-p", "+" + printed.split("=")[1].strip(), "acquire")
        acquired.append(time.monotonic())
        client(other, "-p", place, "release")
        client(other, "cancel-reservation", printed.split("=")[1].strip())

    waiting = threading.Thread(target=next_runner)
    waiting.start()
    while "state: waiting" not in lab.client("reservations"):
        pass  # each call takes a few hundred ms
    client(env, "cancel-reservation", token)
    client(env, "-p", place, "release")
    released = time.monotonic()
    waiting.join(180)
    return acquired[0] - released


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
            str(shipped.suites_dir() / "test_dispatch.py"),
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
        cwd=devices,
        capture_output=True,
        text=True,
        check=False,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    return time.monotonic() - started, summary


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.cli.lab_benchmark")
    parser.add_argument("--suite", action="store_true", help="also time suites/test_dispatch.py")
    parser.add_argument("--handovers", type=int, default=10)
    args = parser.parse_args(argv)
    with running_lab(2) as lab:
        for name, samples in hello_figures(lab).items():
            print(f"HELLO round trip, {name}: {_ms(samples)}", flush=True)
        ours = [handover(lab) for _ in range(max(args.handovers, 10))]
        theirs = [labgrid_handover(lab) for _ in range(max(args.handovers, 10))]
        print(f"hand-over, release -> next runner holds the place: {_stats([a for a, _ in ours])}")
        print(
            "hand-over, release -> next runner's first request answered on the board: "
            + _stats([b for _, b in ours])
        )
        print(f"hand-over, labgrid's own client, release -> acquire: {_stats(theirs)}", flush=True)
        timing = _reservation(lab, "bench-calls")
        started = time.monotonic()
        timing.acquire(60)
        acquired = time.monotonic() - started
        started = time.monotonic()
        timing.release()
        print(
            f"acquisition (session): {acquired:.2f} s; release: {time.monotonic() - started:.2f} s",
            flush=True,
        )
        if args.suite:
            with tempfile.TemporaryDirectory() as directory:
                devices = Path(directory)
                text = (
                    (shipped.devices_dir() / "lab-mcu.yaml")
                    .read_text()
                    .replace('"127.0.0.1:20408"', f'"{lab.coordinator}"')
                )
                (devices / "lab-mcu.yaml").write_text(text)
                mcu_emu = (shipped.devices_dir() / "mcu-emu.yaml").read_text()
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
