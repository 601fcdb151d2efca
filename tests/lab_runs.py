"""What the labgrid lab tests share: the coordinator's view of the places, what a lab
user sets on a place, and a run whose first test holds its board while the lab changes."""

from __future__ import annotations

import contextlib
import os
import select
from collections.abc import Callable, Iterator
from pathlib import Path

from harness.emulators.labgrid_lab import LabgridLab
from harness.lab.client_session import LabSession
from harness.lab.identity import LabIdentity
from harness.lab.places import PlaceState, place_state


def lab_session(lab: LabgridLab) -> LabSession:
    me = LabIdentity.this_process()
    return LabSession.of(lab.coordinator, LabIdentity(me.host, "watch", me.pid, me.start))


def parse_places(lab: LabgridLab) -> list[PlaceState]:
    """Every place as the coordinator has it now (after a sync with it)."""
    session = lab_session(lab)
    session.call("sync", "GetPlaces", session.messages().GetPlacesRequest())
    return sorted((place_state(raw) for raw in session.snapshot()[0]), key=lambda s: s.name)


def set_place(
    lab: LabgridLab, place: str, tags: dict[str, str] | None = None, comment: str | None = None
) -> None:
    """Set what any lab user may set on a place, through labgrid's own requests."""
    session = lab_session(lab)
    messages = session.messages()
    if comment is not None:
        session.call(
            "comment",
            "SetPlaceComment",
            messages.SetPlaceCommentRequest(placename=place, comment=comment),
        )
    if tags is not None:
        session.call(
            "tags", "SetPlaceTags", messages.SetPlaceTagsRequest(placename=place, tags=tags)
        )


IN_FLIGHT = """
import os, pathlib, select

HERE = pathlib.Path(__file__).parent


def test_in_flight_while_the_lab_changes(et):
    et.reset()
    if not (HERE / "signalled").exists():  # a retry does not signal again
        (HERE / "signalled").touch()
        with open(HERE / "ready", "w") as ready:  # the lab test reads: it holds the board
            ready.write(str(os.getpid()))
        go = os.open(HERE / "go", os.O_RDONLY | os.O_NONBLOCK)
        select.select([go], [], [], 120)  # until the lab test has changed the lab
    et.reset()


def test_next(et, n):
    et.reset()


def pytest_generate_tests(metafunc):
    if "n" in metafunc.fixturenames:
        metafunc.parametrize("n", range(COUNT))
"""


@contextlib.contextmanager
def in_flight(tmp_path: Path, after: int) -> Iterator[tuple[list[str], Callable[[], int]]]:
    """A test module whose first test holds its board until the lab test has done what it
    tests (``go``), then ``after`` tests; the selection, and what waits for that first
    test (the PID of the worker it runs in)."""
    folder = tmp_path / "in_flight"
    folder.mkdir()
    module = folder / "test_in_flight.py"
    module.write_text(IN_FLIGHT.replace("COUNT", str(after)))
    os.mkfifo(folder / "ready")
    os.mkfifo(folder / "go")
    go = -1

    def held() -> int:
        nonlocal go
        ready = os.open(folder / "ready", os.O_RDONLY | os.O_NONBLOCK)
        try:
            assert select.select([ready], [], [], 180)[0], "the first test did not start"
            pid = int(os.read(ready, 64) or b"0")
        finally:
            os.close(ready)
        go = os.open(folder / "go", os.O_RDWR)  # the test's select returns at its close
        return pid

    try:
        yield [str(module)], held
    finally:
        if go >= 0:
            os.write(go, b"go")
            os.close(go)


def place_of(lab: LabgridLab, pid: int) -> str:
    """The place the run's process ``pid`` holds."""
    (place,) = [s.name for s in parse_places(lab) if s.acquired and f"-pid{pid}-" in s.acquired]
    return place
