"""A labgrid lab end to end: a real coordinator and two exporters on loopback.

The lab (:mod:`harness.emulators.labgrid_lab`) exports two emulated MCU boards as
places ``lab-a`` (exporter on 127.0.0.2) and ``lab-b`` (127.0.0.3), tagged
``kind=mcu pool=lab et_health=ok``, each with its UART behind ser2net and a power
port, ssh-emu's sshd on 127.0.0.2 and 127.0.0.3 as places ``ssh-a`` and ``ssh-b`` (a
``NetworkService`` each, tagged ``kind=linux pool=lab et_health=ok``), and adb-emu on
127.0.0.2 behind a real adb server as place ``android-a`` (tagged ``kind=android
pool=lab et_health=ok`` and with its ``adb_serial`` and ``adb_server``). The runs are
real pytest runs of the device suites through devices/lab-mcu.yaml, lab-linux.yaml and
lab-android.yaml (with this lab's coordinator address and SSH files); what a place did is
read from the coordinator (through labgrid's client session, as the harness reads it)
and from each run's results.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from lab_runs import in_flight, lab_session, parse_places, place_of, set_place
from prerequisites import require
from run_environment import run_environment

from harness.emulators.labgrid_lab import LabgridLab, running_lab
from harness.lab.client_session import LabSession
from harness.lab.identity import LabIdentity
from harness.lab.reservation import LabgridReservation
from harness.lifecycle.cache import cache_root
from harness.lifecycle.reap import descendants
from harness.profiles.lab_setting import LabgridPlace

ROOT = Path(__file__).resolve().parents[2]
# Two suite tests: enough to open a session, load a program, reset between tests.
SELECTION = [
    "suites/test_dispatch.py",
    "-k",
    "load_time_map_each_backend and program and (1-backends or 2-backends)",
]
# Six: two for each of three workers.
SIX = [
    "suites/test_dispatch.py",
    "-k",
    "load_time_map_each_backend and program and not 7-backends and not 8-backends",
]
pytestmark = pytest.mark.slow
SOMEONE_ELSE = {"LG_HOSTNAME": "runner1", "LG_USERNAME": "ci"}  # a lab user, not a run


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabgridLab]:
    require(
        "ser2net", "qemu-system-arm", "qemu-aarch64", "/usr/sbin/sshd", root=True
    )  # the SSH board is ssh-emu's sshd, which needs root
    require(str(Path(sys.executable).parent / "labgrid-client"))
    require("adb", "qemu-aarch64")
    with running_lab(
        2, ssh_boards=2, files=tmp_path_factory.mktemp("lab-files"), android_phones=1
    ) as running:
        yield running


@pytest.fixture
def devices(tmp_path: Path, lab: LabgridLab) -> Path:
    """devices/lab-mcu.yaml and lab-linux.yaml as shipped, pointed at this lab's
    coordinator and SSH files; a second pool profile and one that names place lab-a."""
    shipped = (ROOT / "devices" / "lab-mcu.yaml").read_text()
    assert '"127.0.0.1:20408"' in shipped
    text = shipped.replace('"127.0.0.1:20408"', f'"{lab.coordinator}"')
    directory = tmp_path / "devices"
    directory.mkdir()
    (directory / "lab-mcu.yaml").write_text(text)
    (directory / "second-mcu.yaml").write_text(text)  # no name continues another (lab-mcu-2
    # would: test ids lab-mcu-2-backends and lab-mcu-2-1-backends read alike)
    (directory / "lab-a.yaml").write_text(
        text.replace("tags: {kind: mcu, pool: lab}", "place: lab-a").replace("lab]", "one]")
    )
    linux = (ROOT / "devices" / "lab-linux.yaml").read_text()
    assert linux.count("~/.cache/et-harness/labgrid-lab/") == 2
    (directory / "lab-linux.yaml").write_text(
        linux.replace('"127.0.0.1:20408"', f'"{lab.coordinator}"').replace(
            "~/.cache/et-harness/labgrid-lab/", f"{lab.known_hosts.parent}/"
        )
    )
    android = (ROOT / "devices" / "lab-android.yaml").read_text()
    assert '"127.0.0.1:20408"' in android
    (directory / "lab-android.yaml").write_text(
        android.replace('"127.0.0.1:20408"', f'"{lab.coordinator}"')
    )
    return directory


def _pytest(
    devices: Path,
    results: Path,
    *args: str,
    selection: list[str] = SELECTION,
    cache: Path | None = None,
) -> subprocess.Popen[str]:
    env = {k: v for k, v in run_environment().items() if k not in ("LG_USERNAME", "LG_HOSTNAME")}
    if cache is not None:
        env["ET_HARNESS_CACHE"] = str(cache)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            *selection,
            "-p",
            "no:cacheprovider",
            "--devices-dir",
            str(devices),
            "--results-dir",
            str(results),
            "--lock-dir",
            str(results.parent / "locks"),
            *args,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _finish(process: subprocess.Popen[str], timeout: float = 240) -> str:
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"the run did not end within {timeout} s:\n{output[-3000:]}")
    return output


def _results(results: Path) -> list[dict]:
    return [json.loads(line) for line in (results / "results.jsonl").read_text().splitlines()]


def _reservation_owners(lab: LabgridLab) -> list[str]:
    session = lab_session(lab)
    request = session.messages().GetReservationsRequest()
    return [r.owner for r in session.call("reservations", "GetReservations", request).reservations]


class CoordinatorWatch:
    """Which run holds each place, as the coordinator says, polled while runs go on (a
    holder that is no harness run, such as a test's runner1/ci, shows as None); with
    ``reservations``, also whose reservations it lists, listed first in each poll."""

    def __init__(self, lab: LabgridLab, reservations: bool = False) -> None:
        self.lab = lab
        self.seen: list[tuple[float, dict[str, str | None]]] = []
        self.reserving: list[set[int]] = []  # per poll: the PIDs of the reservations' owners
        self._reservations = reservations
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            if self._reservations:
                owners = _reservation_owners(self.lab)
                self.reserving.append({i.pid for o in owners if (i := LabIdentity.parse(o))})
            states = parse_places(self.lab)
            self.seen.append(
                (
                    time.monotonic(),
                    {
                        s.name: s.acquired if LabIdentity.parse(s.acquired or "") else None
                        for s in states
                    },
                )
            )
            self._stop.wait(0.05)  # 20 polls a second: each moment a test looks for lasts seconds

    def __enter__(self) -> CoordinatorWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def holders_of(self, place: str) -> list[str]:
        """The successive holders of ``place`` (runs' identities), in order."""
        order: list[str] = []
        for _, holders in self.seen:
            holder = holders.get(place)
            if holder is not None and (not order or order[-1] != holder):
                order.append(holder)
        return order


def _pid_of(holder: str) -> int:
    identity = LabIdentity.parse(holder)
    assert identity is not None, f"{holder} is not a harness run's identity"
    return identity.pid


def _all_free(lab: LabgridLab) -> None:
    states = parse_places(lab)
    assert [(s.name, s.acquired, s.reservation) for s in states] == [
        ("android-a", None, None),
        ("lab-a", None, None),
        ("lab-b", None, None),
        ("ssh-a", None, None),
        ("ssh-b", None, None),
    ]


def test_children_started_while_this_processs_labgrid_session_is_busy_all_run(lab):
    """With labgrid's gRPC threads busy, a forked child that ran Python before exec
    (``preexec_fn``: CPython's at-fork hooks) crashed about one time in three (SIGSEGV in
    threading._after_fork): an exporter or a phone the lab started again never came up.
    Children now run no Python between fork and exec (docs/lifecycle.md)."""
    from harness.lifecycle.process import run

    session = lab_session(lab)
    stop = threading.Event()

    def ask() -> None:
        while not stop.is_set():
            session.call("sync", "GetPlaces", session.messages().GetPlacesRequest())

    askers = [threading.Thread(target=ask, daemon=True) for _ in range(2)]
    for asker in askers:
        asker.start()
    try:
        codes = [run(["true"], timeout=30).returncode for _ in range(100)]
    finally:
        stop.set()
        for asker in askers:
            asker.join(timeout=30)
    assert codes == [0] * 100, f"{100 - codes.count(0)} of 100 children did not run"


def test_three_runners_share_a_pool_of_two_the_third_takes_the_first_freed(lab, devices, tmp_path):
    """Three runs wait for the pool of two while someone else holds it (so that none can
    finish before the third has reserved); once it is let go, two runs hold one place
    each, and the third takes the first place freed."""
    _hold_all_as_someone_else(lab)
    with CoordinatorWatch(lab, reservations=True) as watch:
        try:
            started = [
                _pytest(
                    devices, tmp_path / f"r{number}", "--device", "lab-mcu", "--lock-timeout", "200"
                )
                for number in range(3)
            ]
            _wait_until_reserving(lab, started)
        finally:
            _release_as_someone_else(lab)
        outputs = [_finish(run) for run in started]
    for run, output in zip(started, outputs, strict=True):
        assert run.returncode == 0, output[-3000:]
    # Which run came third: the last to hold a place, in the coordinator's view.
    first_held = {
        run.pid: next(
            t
            for t, holders in watch.seen
            if any(h and _pid_of(h) == run.pid for h in holders.values())
        )
        for run in started
    }
    order = sorted(range(3), key=lambda n: first_held[started[n].pid])
    runs = [started[n] for n in order]
    # It reserved while both places were held by the other two (else "the first freed"
    # says nothing: a reservation made with both places free takes either).
    assert any(
        runs[2].pid in reserving
        and {_pid_of(h) for h in (holders.get(p) for p in ("lab-a", "lab-b")) if h}
        == {runs[0].pid, runs[1].pid}
        for reserving, (_, holders) in zip(watch.reserving, watch.seen, strict=False)
    ), "the third run reserved only after a place was freed"
    records = [_results(tmp_path / f"r{n}") for n in order]
    for run_records in records:
        assert [r["outcome"] for r in run_records] == ["passed", "passed"]
        assert len({r["facts"]["place"] for r in run_records}) == 1  # one place per run
    place_of = [r[0]["facts"]["place"] for r in records]
    assert sorted(place_of[:2]) == ["lab-a", "lab-b"]  # the first two: one place each
    for record in records[0] + records[1] + records[2]:
        assert (
            record["facts"]["exporter"]
            == {"lab-a": "exp-a", "lab-b": "exp-b"}[record["facts"]["place"]]
        )
    # The coordinator's view: each place held by one run at a time, then by the next.
    pids = [run.pid for run in runs]
    first_holders = {place: _first_holder(watch, place) for place in ("lab-a", "lab-b")}
    freed_first = next(  # the places seen given up in the first poll that saw one given up
        {
            place
            for place, first in first_holders.items()
            if t > _first_held(watch, place) and holders.get(place) != first
        }
        for t, holders in watch.seen
        if any(
            t > _first_held(watch, place) and holders.get(place) != first
            for place, first in first_holders.items()
        )
    )
    assert place_of[2] in freed_first, (place_of, freed_first)
    first_freed = place_of[2]
    holders = {place: [_pid_of(h) for h in watch.holders_of(place)] for place in ("lab-a", "lab-b")}
    assert sorted(holders[first_freed]) == sorted([pids[place_of.index(first_freed)], pids[2]]), (
        holders
    )
    assert holders[first_freed][-1] == pids[2]  # the third after the first
    other = "lab-b" if first_freed == "lab-a" else "lab-a"
    assert holders[other] == [pids[place_of.index(other)]]
    _all_free(lab)


def _wait_until_reserving(lab: LabgridLab, runs: list[subprocess.Popen[str]]) -> None:
    """Until the coordinator lists a reservation of each run (120 s at most)."""
    deadline = time.monotonic() + 120
    while not {run.pid for run in runs} <= {
        identity.pid for owner in _reservation_owners(lab) if (identity := LabIdentity.parse(owner))
    }:
        ended = [run.pid for run in runs if run.poll() is not None]
        assert time.monotonic() < deadline and not ended, f"not all reserved; ended: {ended}"
        time.sleep(0.1)  # polled: the coordinator tells no client of a new reservation


def _first_holder(watch: CoordinatorWatch, place: str) -> str:
    return watch.holders_of(place)[0]


def _first_held(watch: CoordinatorWatch, place: str) -> float:
    return next(t for t, holders in watch.seen if holders.get(place))


def _first_holder_left(watch: CoordinatorWatch, place: str) -> float:
    """When the coordinator first showed ``place`` without its first holder."""
    first = _first_holder(watch, place)
    return next(
        (
            t
            for t, holders in watch.seen
            if t > _first_held(watch, place) and holders.get(place) != first
        ),
        float("inf"),
    )


def test_an_ssh_pool_profile_logs_in_where_the_places_network_service_says(lab, devices, tmp_path):
    run = _pytest(devices, tmp_path / "r", "--device", "lab-linux", "--lock-timeout", "60")
    output = _finish(run)
    assert run.returncode == 0, output[-3000:]
    records = _results(tmp_path / "r")
    assert [r["outcome"] for r in records] == ["passed", "passed"]
    (place,) = {record["facts"]["place"] for record in records}
    board = next(p.board for p in lab.ssh_places if p.name == place)
    exporter, host = {"ssh-a": ("exp-a", "127.0.0.2"), "ssh-b": ("exp-b", "127.0.0.3")}[place]
    assert (board.host, board.user) == (host, "etdevice")  # the exporter's address
    for record in records:
        assert record["facts"]["exporter"] == exporter
        assert record["facts"]["abi"] == "aarch64"
    assert board.log_count(f"Accepted publickey for {board.user} from 127.0.0.1") >= 1
    _all_free(lab)


def test_an_ssh_place_whose_host_key_the_lab_did_not_publish_is_refused(lab, devices, tmp_path):
    unknown = tmp_path / "known_hosts"
    unknown.write_text("")  # the lab's known_hosts without this board's key
    profile = devices / "lab-linux.yaml"
    profile.write_text(profile.read_text().replace(str(lab.known_hosts), str(unknown)))
    run = _pytest(devices, tmp_path / "r", "--device", "lab-linux", "--lock-timeout", "60")
    _finish(run)
    assert run.returncode != 0
    records = _results(tmp_path / "r")
    assert [r["outcome"] for r in records] == ["infra", "infra"]
    assert "HostKeyUnknown" in records[0]["infra"]["message"], records[0]["infra"]
    assert unknown.read_text() == ""  # never learnt
    # this runner's missing key says nothing about the board: not quarantined lab-wide
    for ssh in (s for s in parse_places(lab) if s.name.startswith("ssh-")):
        assert dict(ssh.tags)["et_health"] == "ok" and ssh.comment == "", ssh
    _all_free(lab)


def test_an_android_pool_profile_runs_on_the_phone_its_places_tags_name(lab, devices, tmp_path):
    place = lab.android_places[0]
    tags = dict(_place(lab, "android-a").tags)
    assert (tags["adb_serial"], tags["adb_server"]) == (
        place.phone.serial,
        f"127.0.0.1:{place.phone.server.port}",
    )
    assert place.phone.serial.startswith("127.0.0.2:")  # adb-emu on the exporter's address
    run = _pytest(devices, tmp_path / "r", "--device", "lab-android", "--lock-timeout", "60")
    output = _finish(run)
    assert run.returncode == 0, output[-3000:]
    records = _results(tmp_path / "r")
    assert [r["outcome"] for r in records] == ["passed", "passed"]
    for record in records:
        assert (record["facts"]["place"], record["facts"]["exporter"]) == ("android-a", "exp-a")
        assert record["facts"]["deployment"] == "glibc-bundle"  # adb-emu: a phone, no glibc
    # the agent was deployed onto this phone, reached through the place's adb server
    listed = place.phone.server.adb(
        "-s", place.phone.serial, "shell", "ls", "/data/local/tmp/et-harness", check=True
    ).stdout
    assert listed.split(), listed
    # the phone's power port (what ties the place to its exporter) cycles it: adb-emu
    # ends and comes back attached, its files kept
    _acquire(lab, "android-a")
    try:
        lab.client("-p", "android-a", "power", "cycle", "--delay", "0.1")
    finally:
        lab.client("-p", "android-a", "release")
    assert f"{place.phone.serial}\tdevice" in place.phone.server.adb("devices").stdout
    assert (
        place.phone.server.adb(
            "-s", place.phone.serial, "shell", "ls", "/data/local/tmp/et-harness", check=True
        ).stdout
        == listed
    )
    _all_free(lab)


def test_an_android_place_with_a_malformed_serial_tag_is_refused_naming_place_and_tag(
    lab, devices, tmp_path
):
    serial = lab.android_places[0].phone.serial
    lab.client("-p", "android-a", "set-tags", "adb_serial=x;reboot")
    try:
        run = _pytest(devices, tmp_path / "r", "--device", "lab-android", "--lock-timeout", "60")
        _finish(run)
    finally:
        lab.client("-p", "android-a", "set-tags", f"adb_serial={serial}")
    assert run.returncode != 0
    records = _results(tmp_path / "r")
    assert [r["outcome"] for r in records] == ["infra", "infra"]
    infra = records[0]["infra"]
    assert infra["type"] == "NoUsablePlace", infra
    assert re.fullmatch(  # one line: the place, the tag, the limit, the fix
        r"a labgrid place with tags kind=android pool=lab at 127.0.0.1:\d+: labgrid place "
        r"'android-a': tags.adb_serial: 'x;reboot' holds ';', which is not allowed; [^\n]*; "
        r"correct it: 'labgrid-client -x 127.0.0.1:\d+ -p android-a set-tags KEY=VALUE'",
        infra["message"],
    ), infra
    # the run handed the place back, and did not take it out of service lab-wide
    state = _place(lab, "android-a")
    assert dict(state.tags)["et_health"] == "ok" and state.comment == "", state
    _all_free(lab)


def test_one_pool_profile_on_three_workers_each_worker_its_own_place(lab, devices, tmp_path):
    """``--device lab-mcu -n 3`` on a pool of two: two workers hold one place each, the
    third takes the first place freed; the coordinator never shows a worker on two places
    or a place with a holder whose tests ran elsewhere."""
    with CoordinatorWatch(lab) as watch:
        run = _pytest(
            devices,
            tmp_path / "r",
            "--device",
            "lab-mcu",
            "-n",
            "3",
            "--lock-timeout",
            "200",
            selection=SIX,
        )
        output = _finish(run, timeout=400)
    assert run.returncode == 0, output[-3000:]
    records = _results(tmp_path / "r")
    assert len(records) == 6 and all(r["outcome"] == "passed" for r in records), output[-3000:]
    by_holder: dict[str, set[str]] = {}
    for record in records:
        facts = record["facts"]
        assert facts["exporter"] == {"lab-a": "exp-a", "lab-b": "exp-b"}[facts["place"]]
        by_holder.setdefault(facts["holder"], set()).add(facts["place"])
    assert len(by_holder) == 3, by_holder  # three workers, three labgrid owners
    assert all(len(places) == 1 for places in by_holder.values()), by_holder
    assert len({_pid_of(h) for h in by_holder}) == 3  # one process each
    # The coordinator's view: each holder only ever on the place its results name.
    for _, holders in watch.seen:
        for place, holder in holders.items():
            if holder is not None and not place.startswith("ssh-"):
                assert by_holder.get(holder) == {place}, (place, holder, by_holder)
    sequences = {place: watch.holders_of(place) for place in ("lab-a", "lab-b")}
    assert sorted(len(seq) for seq in sequences.values()) == [1, 2], sequences
    shared = next(place for place, seq in sequences.items() if len(seq) == 2)
    other = "lab-b" if shared == "lab-a" else "lab-a"
    # the third worker took the place freed first (or freed in the same poll of the
    # coordinator as the other: then its view cannot tell which was first)
    assert _first_holder_left(watch, shared) <= _first_holder_left(watch, other), sequences
    _all_free(lab)


def _start_holding_lab_a(
    lab: LabgridLab, devices: Path, results: Path, cache: Path | None = None
) -> tuple[subprocess.Popen[str], str]:
    """A run on place lab-a, once the coordinator says it holds lab-a; its identity."""
    run = _pytest(devices, results, "--device", "lab-a", "--lock-timeout", "60", cache=cache)
    deadline = time.monotonic() + 120
    while True:
        assert time.monotonic() < deadline and run.poll() is None, "the run never held lab-a"
        holder = {s.name: s.acquired for s in parse_places(lab)}["lab-a"]
        if holder is not None:
            assert _pid_of(holder) == run.pid
            return run, holder
        time.sleep(0.05)  # polled, as CoordinatorWatch does: asking without a pause kept the
        # coordinator busy while the run started


def _janitor_of(pid: int) -> int:
    """The run's janitor. It is started just before the run's first reservation; the
    place can be held before its process has exec'd (until then its command line is
    the run's own), so it is looked for until it shows, for at most 30 s."""
    deadline = time.monotonic() + 30
    while True:
        found = [
            child
            for child in descendants({pid})
            if b"harness.lifecycle.janitor" in Path(f"/proc/{child}/cmdline").read_bytes()
        ]
        if found or time.monotonic() > deadline:
            break
    assert len(found) == 1, f"one janitor under {pid}: {found}"
    return found[0]


def test_a_killed_runs_janitor_hands_its_place_back(lab, devices, tmp_path):
    run, holder = _start_holding_lab_a(lab, devices, tmp_path / "killed")
    janitor = os.pidfd_open(_janitor_of(run.pid))
    os.killpg(run.pid, signal.SIGKILL)  # the janitor is in a session of its own: it lives on
    run.communicate()
    # the janitor's exit ends the hand-over, not the coordinator's "not acquired" (a run
    # killed before it knew its place's name releases first, then cancels)
    try:
        assert select.select([janitor], [], [], 60)[0], f"{holder}'s janitor ran for 60 s"
    finally:
        os.close(janitor)
    _all_free(lab)


def _cache_with_own_owner_records(tmp_path: Path) -> Path:
    """The harness cache with an ownership-record directory of its own, the rest shared.

    Every harness process on the machine sweeps the records of dead owners and hands
    back what they held (their labgrid places, too): with the shared directory, another
    test's run could release the killed run's place before the next run looks at it.
    """
    cache = tmp_path / "cache"
    cache.mkdir()
    shared = cache_root()
    shared.mkdir(parents=True, exist_ok=True)
    for entry in ("agent", "bundle", "mcu-firmware", "programs", "sdk"):
        (shared / entry).mkdir(exist_ok=True)
        (cache / entry).symlink_to(shared / entry)
    return cache


def test_a_place_of_a_run_killed_with_its_janitor_is_released_by_the_next_run(
    lab, devices, tmp_path
):
    cache = _cache_with_own_owner_records(tmp_path)
    first, holder = _start_holding_lab_a(lab, devices, tmp_path / "killed", cache)
    os.kill(_janitor_of(first.pid), signal.SIGKILL)
    os.killpg(first.pid, signal.SIGKILL)  # as a reboot of the runner or an OOM kill of both
    first.communicate()
    assert {s.name: s.acquired for s in parse_places(lab)}[
        "lab-a"
    ] == holder  # the coordinator never expires an acquired place
    started = time.monotonic()
    second = _pytest(
        devices, tmp_path / "next", "--device", "lab-a", "--lock-timeout", "30", cache=cache
    )
    output = _finish(second)
    assert second.returncode == 0, output[-3000:]
    assert f"released labgrid place lab-a, held by {holder} (a run that is gone)" in output
    assert time.monotonic() - started < 60  # not the coordinator's 60 s expiry of a reservation
    assert [r["facts"]["place"] for r in _results(tmp_path / "next")] == ["lab-a", "lab-a"]
    _all_free(lab)


def _acquire(lab: LabgridLab, place: str, env: dict[str, str] | None = None) -> None:
    """``labgrid-client -p PLACE acquire`` as another holder would. An exporter frees a
    released place's resources a moment after the coordinator says so (ser2net takes
    about a second to stop): an acquisition refused for that reason is tried again, for
    at most 30 s, as the harness itself does (harness/profiles/lab_setting.py)."""
    deadline = time.monotonic() + 30
    while True:
        done = subprocess.run(
            lab.client_argv("-p", place, "acquire"),
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode == 0:
            return
        busy = "Failed to acquire resources" in done.stderr
        assert busy and time.monotonic() < deadline, (done.stderr, lab.client("-v", "places"))
        time.sleep(0.2)  # the exporter gives no notice when it has let them go


def test_a_place_held_by_someone_else_is_an_infra_error_naming_the_holder(lab, devices, tmp_path):
    holder_env = {**os.environ, **SOMEONE_ELSE}
    _acquire(lab, "lab-a", holder_env)
    try:
        run = _pytest(devices, tmp_path / "busy", "--device", "lab-a", "--lock-timeout", "3")
        _finish(run)
    finally:
        subprocess.run(
            lab.client_argv("-p", "lab-a", "release"),
            env=holder_env,
            check=True,
            capture_output=True,
        )
    assert run.returncode != 0
    records = _results(tmp_path / "busy")
    assert [r["outcome"] for r in records] == ["infra", "infra"]
    message = json.dumps(records[0]["infra"])
    assert "lab-a (acquired by runner1/ci" in message, message
    assert "was not allocated within 3.0 s" in message
    _all_free(lab)


def _users_env() -> dict[str, str]:
    """The developer's environment: labgrid's identity is the machine's name and the user."""
    return {k: v for k, v in run_environment().items() if k not in ("LG_USERNAME", "LG_HOSTNAME")}


def _cli(env: dict[str, str], *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_a_place_the_user_holds_is_theirs_to_run_send_and_doctor_on(lab, devices, tmp_path):
    from harness.lab.own_place import users_owner

    env = _users_env()
    holder_env = {**os.environ, **SOMEONE_ELSE}
    _acquire(lab, "lab-a", env)  # the developer's own board: labgrid-client as themselves
    _acquire(lab, "lab-b", holder_env)  # the pool's other board: someone else's
    me = users_owner()
    probes = tmp_path / "probes.yaml"  # what an MCU serves: the harness's probes
    probes.write_text("backends:\n  ProbeA:\n    - {key: threads, value: 2}\n  ProbeB: []\n")
    try:
        run = _pytest(devices, tmp_path / "mine", "--device", "lab-a", "--lock-timeout", "5")
        output = _finish(run)
        assert run.returncode == 0, output[-3000:]
        assert [r["facts"]["place"] for r in _results(tmp_path / "mine")] == ["lab-a", "lab-a"]
        # the pool profile: send and doctor take the user's own place, and leave it theirs
        sent = _cli(env, "send", str(probes), "--device", str(devices / "lab-mcu.yaml"))
        assert sent.returncode == 0, sent.stdout + sent.stderr
        checked = _cli(env, "doctor", "--device", str(devices / "lab-mcu.yaml"))
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert re.search(r"^lab-mcu +ok ", checked.stdout, re.M), checked.stdout
        assert _place(lab, "lab-a").acquired == me
    finally:
        subprocess.run(lab.client_argv("-p", "lab-a", "release"), env=env, check=False)
        subprocess.run(lab.client_argv("-p", "lab-b", "release"), env=holder_env, check=False)
    # Held by nobody: send reserves a place of the pool for its length and hands it back.
    sent = _cli(env, "send", str(probes), "--device", str(devices / "lab-mcu.yaml"))
    assert sent.returncode == 0, sent.stdout + sent.stderr
    _all_free(lab)


def _place(lab: LabgridLab, name: str):
    return next(s for s in parse_places(lab) if s.name == name)


def test_a_place_failing_its_health_check_is_quarantined_lab_wide_until_a_person_clears_it(
    lab, devices, tmp_path
):
    shipped = (devices / "lab-mcu.yaml").read_text()
    opted_in = shipped.replace("reset: power", "reset: power\n    quarantine: lab")
    assert opted_in != shipped
    (devices / "pool-q.yaml").write_text(opted_in.replace("lab]", "q]"))
    (devices / "sick.yaml").write_text(  # lab-b, not power-cycled (that would wake it)
        opted_in.replace("tags: {kind: mcu, pool: lab}", "place: lab-b")
        .replace("reset: power", "reset: none")
        .replace("case: 30", "case: 3")
        .replace("lab]", "sick]")
    )
    board = lab.places[1].board
    holder_env = {**os.environ, **SOMEONE_ELSE}
    own = "USB hub flaky, reseat before use"
    set_place(lab, "lab-b", comment=own)  # the operator's own note on the place
    board.power(False)  # lab-b's board stops answering
    try:
        sick = _pytest(devices, tmp_path / "sick", "--device", "sick", "--lock-timeout", "60")
        _finish(sick)
        assert sick.returncode != 0
        records = _results(tmp_path / "sick")
        assert [r["outcome"] for r in records] == ["infra", "infra"]
        # the board is named on every row it cost, its first health check's included
        assert [r["facts"].get("place") for r in records] == ["lab-b", "lab-b"], records
        assert "labgrid place lab-b quarantined lab-wide" in records[0]["infra"]["message"]
        state = _place(lab, "lab-b")
        assert dict(state.tags)["et_health"] == "quarantined"
        assert (state.acquired, state.reservation) == (None, None)  # handed back
        assert re.fullmatch(  # who, when, why
            r"quarantined by [^/ ]+/[^ ]+-pid[0-9]+-[0-9]+ at 20[0-9]{2}-[0-9]{2}-[0-9]{2}T"
            r"[0-9:]{8}Z: device 'sick': the health check before its first test failed: "
            r"\w+: sick: no HELLO .* \(clear: et-harness lab quarantine -x "
            + re.escape(lab.coordinator)
            + r" clear lab-b\) \[place comment: "
            + re.escape(own)
            + r"\]",
            state.comment,
        ), state.comment
        # Other runners pass it by: with lab-a held, a pool run waits rather than take lab-b.
        _acquire(lab, "lab-a", holder_env)
        pool = _pytest(devices, tmp_path / "pool", "--device", "pool-q", "--lock-timeout", "3")
        _finish(pool)
        message = json.dumps(_results(tmp_path / "pool")[0]["infra"])
        assert "was not allocated within 3.0 s" in message, message
        assert "lab-a (acquired by runner1/ci" in message, message
        assert "lab-b (not acquired, comment: quarantined by" in message, message
        # A run that names the place is refused at once, with the reason.
        started = time.monotonic()
        again = _pytest(devices, tmp_path / "again", "--device", "sick", "--lock-timeout", "60")
        _finish(again)
        message = json.dumps(_results(tmp_path / "again")[0]["infra"])
        assert (
            "PlaceQuarantined" in message
            and "no place in service: lab-b: quarantined by" in message
        ), message
        assert time.monotonic() - started < 45  # not the 60 s lock timeout
        # The operator lists what is out of service, looks at the board and clears the
        # place: its own comment is back, and the pool uses it again.
        lab_command = [sys.executable, "-m", "harness.cli", "lab", "quarantine"]
        listed = subprocess.run(
            [*lab_command, "list", "-x", lab.coordinator],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        entry = listed.split("lab-b  et_health=quarantined\n", 1)[1].splitlines()[0]
        assert entry.startswith("  quarantined by ") and entry.endswith(f"[place comment: {own}]")
        assert re.search(r"^[0-9]+ place\(s\) out of service at ", listed, re.M), listed
        board.power(True)
        cleared_line = subprocess.run(
            [*lab_command, "clear", "lab-b", "-x", lab.coordinator],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        assert cleared_line == f"lab-b: et_health=ok, comment back to: {own}\n"
        state = _place(lab, "lab-b")
        assert (dict(state.tags)["et_health"], state.comment) == ("ok", own)
        cleared = _pytest(
            devices, tmp_path / "cleared", "--device", "pool-q", "--lock-timeout", "60"
        )
        output = _finish(cleared)
        assert cleared.returncode == 0, output[-3000:]
        assert {r["facts"]["place"] for r in _results(tmp_path / "cleared")} == {"lab-b"}
    finally:
        if not board.powered:
            board.power(True)
        subprocess.run(
            lab.client_argv("-p", "lab-a", "release"),
            env=holder_env,
            capture_output=True,
            check=False,
        )
        subprocess.run(
            lab.client_argv("-p", "lab-b", "set-tags", "et_health=ok"),
            capture_output=True,
            check=False,
        )
        set_place(lab, "lab-b", comment="")
    _all_free(lab)


def test_a_pool_never_reserves_a_quarantined_place_nor_waits_for_it(lab):
    """With ssh-a quarantined and ssh-b free, four runners of the lab-wide quarantine pool
    each take ssh-b at once, two of them runners that start on the first open place (a
    reservation for ssh-a asks for et_health=ok: labgrid would never grant it)."""
    wanted = LabgridPlace(
        tags=(("kind", "linux"), ("pool", "lab")), coordinator=lab.coordinator, quarantine="lab"
    )
    me = LabIdentity.this_process()
    runners = [LabIdentity(me.host, f"runner{n}", me.pid, me.start) for n in range(16)]
    by_start = [[r for r in runners if zlib.crc32(r.owner.encode()) % 2 == i] for i in (0, 1)]
    set_place(lab, "ssh-a", tags={"et_health": "quarantined"}, comment="quarantined by a test")
    try:
        for runner in by_start[0][:2] + by_start[1][:2]:
            reservation = LabgridReservation(wanted, runner)
            started = time.monotonic()
            try:
                held = reservation.acquire(timeout=15)
            finally:
                reservation.release()
            assert held.name == "ssh-b" and time.monotonic() - started < 10, runner
    finally:
        set_place(lab, "ssh-a", tags={"et_health": "ok"}, comment="")
    _all_free(lab)


def _serial_port(lab: LabgridLab, exporter: str) -> object:
    """The network port of ``exporter``'s serial port (its ser2net's), as exported now."""
    parse_places(lab)  # a sync with the coordinator
    (port,) = [
        dict(r.args).get("port")
        for r in lab_session(lab).snapshot()[1]
        if r.exporter == exporter and r.cls == "NetworkSerialPort"
    ]
    return port


def test_an_exporter_restarting_mid_run_is_waited_out_on_the_same_board(lab, devices, tmp_path):
    """The exporter of the MCU place a pool run holds is restarted (by the lab's service
    manager) while a test runs there: its ser2net comes back on a new port. The run reads
    the place's resources again and goes on on the same board; it quarantines nothing,
    and at most the test in flight is infra (retried)."""
    with in_flight(tmp_path, after=2) as (selection, held):
        run = _pytest(devices, tmp_path / "r", "--device", "lab-mcu", selection=selection)
        place = place_of(lab, held())
        exporter = next(p.exporter for p in lab.places if p.name == place)
        before = _serial_port(lab, exporter)
        lab.restart_exporter(exporter)
        after = _serial_port(lab, exporter)
    output = _finish(run)
    records = _results(tmp_path / "r")
    outcomes = [r["outcome"] for r in records]
    assert len(records) == 3 and "failed" not in outcomes, output[-3000:]
    assert outcomes.count("infra") <= 1, output[-3000:]
    assert {r["facts"]["place"] for r in records} == {place}, records
    assert dict(_place(lab, place).tags)["et_health"] == "ok", output[-3000:]
    assert before != after, (before, after)  # what the run had to read again
    _all_free(lab)


def test_a_pool_board_that_dies_mid_run_is_left_and_its_tests_go_on_on_the_other(
    lab, devices, tmp_path
):
    """``-n 2`` on the two SSH boards; one board's sshd is killed while a test runs there:
    that worker quarantines the board lab-wide, hands it back and goes on on the other
    one once it is free. No test fails, at most the one in flight is infra."""
    with in_flight(tmp_path, after=8) as (selection, held):
        run = _pytest(
            devices,
            tmp_path / "r",
            "--device",
            "lab-linux",
            "-n",
            "2",
            "--lock-timeout",
            "200",
            selection=selection,
        )
        place = place_of(lab, held())
        lab.kill_ssh_board(place)
    other = {"ssh-a": "ssh-b", "ssh-b": "ssh-a"}[place]
    try:
        output = _finish(run, timeout=400)
    finally:
        lab.revive_ssh_board(place)
        state = _place(lab, place)
        set_place(lab, place, tags={"et_health": "ok"}, comment="")
    records = _results(tmp_path / "r")
    outcomes = [r["outcome"] for r in records]
    assert len(records) == 9 and "failed" not in outcomes, output[-3000:]
    assert outcomes.count("infra") <= 1 and outcomes.count("passed") >= 8, output[-3000:]
    (retried,) = [r for r in records if "in_flight_while" in r["nodeid"]]
    assert retried["facts"]["place"] == other, retried  # retried on the other board
    assert retried["failed_tries"], retried  # ... as an infrastructure error
    assert dict(state.tags)["et_health"] == "quarantined", state
    assert "device 'lab-linux': the health check before a retry failed" in state.comment
    _all_free(lab)


@pytest.mark.parametrize(
    "hostile",
    [
        {"comment": "hi\n  tags: kind=mcu, pool=lab\nPlace 'lab-c':"},
        {"tags": {"note": "x\n  acquired: runner1/ci"}},
        {"tags": {"note": "A" * 5000}},
    ],
)
def test_a_hostile_place_is_skipped_and_the_good_one_beside_it_is_used(
    lab, devices, tmp_path, hostile
):
    """One place with a line break in its comment or a tag, or a huge tag, made every run
    against the coordinator fail (labgrid-client's text could not be read): now that
    place alone is left out (a tag that fails the value rules) or shown inert (a comment),
    and the pool's runs go on, on the good place."""
    set_place(lab, "lab-b", **hostile)
    try:
        run = _pytest(devices, tmp_path / "r", "--device", "lab-mcu", "--lock-timeout", "120")
        output = _finish(run)
    finally:
        set_place(lab, "lab-b", tags={"note": ""}, comment="")
    assert run.returncode == 0, output[-3000:]
    records = _results(tmp_path / "r")
    assert [r["outcome"] for r in records] == ["passed", "passed"]
    places = {r["facts"]["place"] for r in records}
    if "tags" in hostile:  # never chosen, one line naming the place and the field
        assert places == {"lab-a"}, places
        assert re.search(r"skipping labgrid place 'lab-b': tags.note: [^\n]*", output), output
    else:
        assert places <= {"lab-a", "lab-b"}
    for record in records:  # the run's own records say what it held and when
        facts = record["facts"]
        assert facts["reservation"] and float(facts["acquired_at"]) > 0
        assert facts["coordinator"] == lab.coordinator
    (holding,) = json.loads((tmp_path / "r" / "run.json").read_text())["lab_holdings"]
    assert (holding["place"], holding["reservation"]) == (
        records[0]["facts"]["place"],
        records[0]["facts"]["reservation"],
    )
    assert holding["acquired_at"] == pytest.approx(float(records[0]["facts"]["acquired_at"]))
    assert holding["released_at"] > holding["acquired_at"]
    _all_free(lab)


def _wait_for_exporter(session: LabSession, exporter, name: str) -> None:
    """Until the coordinator lists the exporter's resources (60 s at most)."""
    deadline = time.monotonic() + 60
    while not any(r.exporter == name for r in session.snapshot()[1]):
        assert time.monotonic() < deadline and exporter.poll() is None, exporter.stderr_tail()
        session.wait_update(timeout=1.0)


def _reload_cleared(lab: LabgridLab) -> None:
    """A killed coordinator comes back with its places file as it last saved it (it saves
    a moment after a change): what an earlier test set on lab-b and cleared again may be
    back. Cleared once more, as a lab's admin would."""
    set_place(lab, "lab-b", tags={"note": ""}, comment="")


def _hold_all_as_someone_else(lab: LabgridLab) -> None:
    for place in ("lab-a", "lab-b"):
        _acquire(lab, place, {**os.environ, **SOMEONE_ELSE})


def _release_as_someone_else(lab: LabgridLab) -> None:
    """Both places freed within milliseconds, from this process (two labgrid-client runs,
    a second or more apart on a busy machine, once let a run take the first place freed
    and finish before the second was freed)."""
    session = lab_session(lab)
    holder = f"{SOMEONE_ELSE['LG_HOSTNAME']}/{SOMEONE_ELSE['LG_USERNAME']}"
    for place in ("lab-a", "lab-b"):  # fromuser: a place someone else holds now stays theirs
        request = session.messages().ReleasePlaceRequest(placename=place, fromuser=holder)
        session.call(f"release {place}", "ReleasePlace", request)


def test_a_coordinator_restart_keeps_a_tag_set_just_before_it(lab):
    """labgrid's coordinator saves its places up to 15 s after a change: a restart waits for
    the present state's save (a test that put a tag back must not find the old one)."""
    lab.restart_coordinator()  # so that the places file has every place, saved before
    lab.client("-p", "lab-a", "set-tags", "et_probe=1")
    try:
        lab.restart_coordinator()
        assert dict(_place(lab, "lab-a").tags).get("et_probe") == "1"
    finally:
        lab.client("-p", "lab-a", "set-tags", "et_probe=")


def test_a_coordinator_restart_while_a_run_waits(lab, devices, tmp_path):
    """labgrid keeps reservations and acquisitions in memory only. A run waiting for a
    pool when the coordinator is killed and started again reconnects (bounded), reserves
    again and runs (a run that holds its place: the test after this one)."""
    _hold_all_as_someone_else(lab)  # both MCU places taken: the run waits
    waiting = _pytest(devices, tmp_path / "waits", "--device", "lab-mcu", "--lock-timeout", "200")
    _wait_until_reserving(lab, [waiting])
    lab.restart_coordinator()  # forgets runner1/ci's places and the run's reservations
    _reload_cleared(lab)
    output = _finish(waiting)
    assert waiting.returncode == 0, output[-3000:]
    assert [r["outcome"] for r in _results(tmp_path / "waits")] == ["passed", "passed"]
    _all_free(lab)


def test_a_coordinator_restart_mid_run_is_waited_out_and_the_run_goes_on(lab, devices, tmp_path):
    """The coordinator is killed and started again (exporters with it) while a pool run
    holds a board and runs a test: the run reconnects, holds a board again and finishes,
    with at most the test in flight infra."""
    lab.save_places()  # the restart comes at once, not after the coordinator's next save
    with in_flight(tmp_path, after=4) as (selection, held):
        run = _pytest(devices, tmp_path / "r", "--device", "lab-linux", selection=selection)
        held()
        lab.restart_coordinator(saved=True)
    output = _finish(run, timeout=400)
    records = _results(tmp_path / "r")
    outcomes = [r["outcome"] for r in records]
    assert len(records) == 5 and "failed" not in outcomes, output[-3000:]
    assert outcomes.count("infra") <= 1 and outcomes.count("passed") >= 4, output[-3000:]
    holdings = json.loads((tmp_path / "r" / "run.json").read_text())["lab_holdings"]
    assert len(holdings) >= 2, holdings  # held again after the restart
    assert records[-1]["facts"]["reservation"] == holdings[-1]["reservation"]
    _all_free(lab)


def test_an_exporter_that_goes_away_leaves_its_place_and_the_pool_goes_on(lab, devices, tmp_path):
    """exp-b ends: lab-b's resources are gone, so lab-b cannot be acquired; the pool's
    run takes lab-a."""
    lab.stop_exporter("exp-b")
    try:
        run = _pytest(devices, tmp_path / "r", "--device", "lab-mcu", "--lock-timeout", "120")
        output = _finish(run)
    finally:
        lab.start_exporter("exp-b")
    assert run.returncode == 0, output[-3000:]
    assert {r["facts"]["place"] for r in _results(tmp_path / "r")} == {"lab-a"}
    _all_free(lab)


def test_a_lab_users_path_from_an_emulated_board_to_a_pool_run(lab, devices, tmp_path):
    """docs/device-farm.md, "From an emulated board to a pool run", step by step: the
    board on an exporter's address, the printed stanza in an exporter config, a place,
    the printed known_hosts line, one key per place from an ssh_config, a pool run."""
    from harness.emulators.labgrid_lab import labgrid_program
    from harness.lifecycle.process import ManagedProcess

    emu = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "emu", "ssh-emu", "--lab-address", "127.0.0.7"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    exporter = None
    session = lab_session(lab)
    messages = session.messages()
    try:
        printed = []
        assert emu.stdout is not None
        for line in emu.stdout:
            printed.append(line.rstrip("\n"))
            if line.startswith("Ctrl-C"):
                break
        text = "\n".join(printed)
        stanza = text.split("no line may start with '#'):\n", 1)[1].split("\nknown_hosts", 1)[0]
        assert re.fullmatch(
            r"ssh_emu:\n  NetworkService:\n    address: 127\.0\.0\.7\n"
            r"    port: \d+\n    username: etdevice",
            stanza,
        ), text
        known = re.search(r"^\[127\.0\.0\.7\]:\d+ ssh-ed25519 \S+$", text, re.MULTILINE)
        key = re.search(r"^client key .*: (\S+)$", text, re.MULTILINE)
        assert known and key, text
        config = tmp_path / "exp-x.yaml"
        config.write_text(stanza + "\n")
        exporter = ManagedProcess(
            [
                labgrid_program("labgrid-exporter"),
                "-c",
                lab.coordinator,
                "-n",
                "exp-x",
                "--hostname",
                "127.0.0.7",
                str(config),
            ],
            name="labgrid-exporter-x",
        )
        _wait_for_exporter(session, exporter, "exp-x")
        session.call("add", "AddPlace", messages.AddPlaceRequest(name="ssh-x"))
        session.call(
            "match",
            "AddPlaceMatch",
            messages.AddPlaceMatchRequest(placename="ssh-x", pattern="exp-x/ssh_emu/*"),
        )
        set_place(lab, "ssh-x", tags={"kind": "linux", "pool": "labx", "et_health": "ok"})
        (tmp_path / "known_hosts").write_text(known.group(0) + "\n")
        (tmp_path / "lab_ssh_config").write_text(f"Host 127.0.0.7\n  IdentityFile {key.group(1)}\n")
        profile = (devices / "lab-linux.yaml").read_text()
        lines = [line for line in profile.splitlines() if "identity_file:" not in line]
        text = "\n".join(lines).replace(
            "tags: {kind: linux, pool: lab}", "tags: {kind: linux, pool: labx}"
        )
        text = re.sub(
            r"known_hosts: \S+",
            f"known_hosts: {tmp_path}/known_hosts\n  ssh_config: {tmp_path}/lab_ssh_config",
            text,
            count=1,
        )
        (devices / "lab-x.yaml").write_text(text.replace("lab]", "labx]"))
        run = _pytest(devices, tmp_path / "r", "--device", "lab-x", "--lock-timeout", "120")
        output = _finish(run)
        assert run.returncode == 0, output[-3000:]
        records = _results(tmp_path / "r")
        assert [r["outcome"] for r in records] == ["passed", "passed"]
        assert {(r["facts"]["place"], r["facts"]["exporter"]) for r in records} == {
            ("ssh-x", "exp-x")
        }
    finally:
        os.killpg(emu.pid, signal.SIGTERM)
        emu.communicate(timeout=60)
        if exporter is not None:
            exporter.stop()
        with contextlib.suppress(Exception):
            session.call("delete", "DeletePlace", messages.DeletePlaceRequest(name="ssh-x"))
    _all_free(lab)


def test_a_place_whose_resources_have_the_wrong_shape_is_never_chosen(lab, devices, tmp_path):
    """An exporter announces a NetworkService whose address is an ssh option, for a place
    tagged like the pool's: while the pool's good places are taken, that free place is
    still not chosen; the run waits for a good one and says why the other was skipped."""
    from harness.emulators.labgrid_lab import labgrid_program
    from harness.lifecycle.process import ManagedProcess

    config = tmp_path / "exp-z.yaml"
    config.write_text(
        "bad:\n  NetworkService:\n    address: '-oProxyCommand=x'\n"
        "    port: 22\n    username: etdevice\n"
    )
    exporter = ManagedProcess(
        [
            labgrid_program("labgrid-exporter"),
            "-c",
            lab.coordinator,
            "-n",
            "exp-z",
            "--hostname",
            "127.0.0.9",
            str(config),
        ],
        name="labgrid-exporter-z",
    )
    _wait_for_exporter(lab_session(lab), exporter, "exp-z")
    session = lab_session(lab)
    messages = session.messages()
    try:
        session.call("add", "AddPlace", messages.AddPlaceRequest(name="lab-z"))
        session.call(
            "match",
            "AddPlaceMatch",
            messages.AddPlaceMatchRequest(placename="lab-z", pattern="exp-z/bad/*"),
        )
        set_place(lab, "lab-z", tags={"kind": "mcu", "pool": "lab", "et_health": "ok"})
        _hold_all_as_someone_else(lab)
        run = _pytest(devices, tmp_path / "r", "--device", "lab-mcu", "--lock-timeout", "5")
        output = _finish(run)
        assert run.returncode != 0
        assert re.search(
            r"skipping labgrid place 'lab-z': resources.exp-z/bad/NetworkService"
            r"\.address: '-oProxyCommand=x' starts with '-'",
            output,
        ), output
        message = json.dumps(_results(tmp_path / "r")[0]["infra"])
        assert "was not allocated within 5.0 s" in message, message
        assert "lab-z" not in {s.name: s.acquired for s in parse_places(lab) if s.acquired}
    finally:
        _release_as_someone_else(lab)
        with contextlib.suppress(Exception):
            session.call("delete", "DeletePlace", messages.DeletePlaceRequest(name="lab-z"))
        exporter.stop()
    _all_free(lab)


_EMU = [sys.executable, "-m", "harness.cli", "emu"]


def _emu_on_lab_address(address: str, protocol: str) -> tuple[subprocess.Popen[str], str]:
    """``et-harness emu mcu-emu --lab-address ADDRESS``, and what it printed up to Ctrl-C."""
    emu = subprocess.Popen(
        [*_EMU, "mcu-emu", "--lab-address", address, "--protocol", protocol],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    printed = []
    assert emu.stdout is not None
    for line in emu.stdout:
        printed.append(line)
        if line.startswith("Ctrl-C"):
            break
    return emu, "".join(printed)


@pytest.mark.parametrize("protocol", ["raw", "rfc2217"])
def test_an_emulated_board_serves_at_the_lab_port_asked_twice_and_says_when_it_dies(protocol):
    """The exporter's NetworkSerialPort names the port once: each start serves there, in the
    protocol asked; a board whose QEMU dies ends the command with one line (exit 1)."""
    require("ser2net", "qemu-system-arm")
    from harness.channel.serial.connect import connect
    from harness.lab.client_session import Resource
    from harness.lab.resources import read_resources
    from harness.lifecycle.process import free_port
    from harness.transport.serial import SerialSettings

    host = "127.0.0.6"
    port = free_port(host)
    for start in ("first", "again"):
        emu, printed = _emu_on_lab_address(f"{host}:{port}", protocol)
        try:
            assert f"mcu-emu is up on {host}:{port}\n" in printed, printed
            stanza = printed.split("no line may start with '#'):\n", 1)[1].split("Ctrl-C")[0]
            exported = yaml.safe_load(stanza)["mcu_emu"]["NetworkSerialPort"]
            assert exported == {"host": host, "port": port, "speed": 115200, "protocol": protocol}
            # as the harness reads the place's resource, and talks to the board through it
            resource = Resource(
                "exp", "mcu_emu", "p", "NetworkSerialPort", tuple(exported.items()), "x"
            )
            serial = read_resources("p", [resource], acquired=True).serial
            assert serial is not None
            link = connect(SerialSettings(url=serial.url))
            link.close()
            if start == "first":
                emu.send_signal(signal.SIGTERM)
                output = _finish(emu, 30)
                assert emu.returncode == 0 and "mcu-emu is down" in output, output
                continue
            (qemu,) = [
                pid
                for pid in descendants({emu.pid})
                if Path(f"/proc/{pid}/comm").read_text().startswith("qemu")
            ]
            os.kill(qemu, signal.SIGKILL)
            output = _finish(emu, 30)
            assert emu.returncode == 1, output
            assert (
                f"et-harness emu: mcu-emu on {host}:{port} no longer serves: its QEMU ended "
                "(exit status -9)" in output
            ), output
        finally:
            if emu.poll() is None:
                os.killpg(emu.pid, signal.SIGKILL)
                emu.wait()


def _steps(job: dict) -> list[str]:
    """A workflow job's shell steps, each as written (none may expand ``${{ }}`` into it)."""
    runs = [str(step["run"]) for step in job["steps"] if "run" in step]
    assert not any("${{" in run for run in runs), runs
    return runs


def _run_steps(runs: list[str], cwd: Path, env: dict[str, str]) -> None:
    """Each workflow step's ``run`` by bash, as a runner runs it; each must succeed."""
    for run in runs:
        done = subprocess.run(
            ["bash", "-e", "-c", run], cwd=cwd, env=env, capture_output=True, text=True,
            timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (run, done.stdout[-3000:], done.stderr[-3000:])


def test_the_nightlys_steps_as_a_script_on_the_emulated_lab_with_postgresql(lab, devices, tmp_path):
    """lab-nightly.yml's steps run by bash as a runner would (setup aside: this checkout's
    .venv is set up; artifacts moved by hand): two pool jobs, then the report job with
    PostgreSQL as the history: the merged report with a per-board table, and one short
    summary of the night naming both jobs."""
    from postgres_server import postgres_server

    from harness.codec.strict_yaml import read_yaml

    path = ROOT / ".github" / "workflows" / "lab-nightly.yml"
    workflow = read_yaml(path.read_text("utf-8"), str(path))
    assert isinstance(workflow, dict)
    lab_steps, report_steps = (_steps(workflow["jobs"][job]) for job in ("lab", "report"))
    setup = [run for run in lab_steps + report_steps if "setup-lab-runner" in run or "pip" in run]
    assert len(setup) == 2  # one a job, run by neither here
    ws, home = tmp_path / "ws", tmp_path / "home"
    (ws / "project").mkdir(parents=True)
    home.mkdir()
    (ws / "harness").symlink_to(ROOT)
    (ws / "project" / "devices").symlink_to(devices)
    selection = "-k 'load_time_map_each_backend and program and (1-backends or 2-backends)'"
    with postgres_server() as url:
        base = run_environment(
            HOME=str(home),
            ET_HARNESS_CACHE=str(cache_root()),
            ET_HARNESS_HISTORY=url,
            PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            GITHUB_STEP_SUMMARY=str(tmp_path / "step-summary.md"),
        )
        base["PYTEST_ADDOPTS"] = f"{base.get('PYTEST_ADDOPTS', '')} {selection}"
        for pool in ("lab-mcu", "lab-linux"):
            env = {
                **base,
                "POOL": pool,
                "WORKERS": "2" if pool == "lab-mcu" else "1",
                "LG_COORDINATOR": lab.coordinator,
                "DEVICES_DIR": "project/devices",
                "KEY": "not a key",
                "KNOWN_HOSTS": "",
            }
            _run_steps([run for run in lab_steps if run not in setup], ws, env)
            (ws / "all-results").mkdir(exist_ok=True)  # the upload and download steps
            (ws / "results" / pool).rename(ws / "all-results" / f"results-{pool}")
        assert (home / ".ssh" / "et-lab" / "id").read_text() == "not a key\n"
        _run_steps([run for run in report_steps if run not in setup], ws, base)
    merged = ws / "merged"
    summary = (merged / "summary.txt").read_text()
    assert "per board (lab place):" in summary, summary
    boards = summary.split("per board (lab place):\n", 1)[1].splitlines()
    assert boards[0].split() == ["board", "passed", "failed", "infra", "devices"]
    assert {line.split()[0] for line in boards[1:] if line.split()[-1] == "lab-mcu"} <= {
        "lab-a",
        "lab-b",
    }
    # the lab has two SSH boards: the one-worker linux job ran both its tests on either
    (linux_board,) = [line.split()[0] for line in boards[1:] if line.split()[-1] == "lab-linux"]
    assert linux_board in {"ssh-a", "ssh-b"}, summary
    assert any(line.split()[:2] == [linux_board, "2"] for line in boards), summary
    page = (merged / "report.html").read_text()
    assert '<h2 id="boards">' in page and f'<th class="passed">{linux_board}</th>' in page
    night = (merged / "night.txt").read_text().splitlines()
    night = night[night.index(next(line for line in night if line.startswith("night:"))) :]
    assert night[0] == "night: 2 run(s): 4 passed, 0 failed", night
    assert sorted(night[1:3]) == [  # each job, as caught up
        "  lab-linux (lab-linux): 2 passed, 0 failed",
        "  lab-mcu (lab-mcu): 2 passed, 0 failed",
    ], night
    assert night[3:] == ["new failures (0)", "new infra (0)", "history page: merged/history.html"]
    step_summary = (tmp_path / "step-summary.md").read_text()
    assert "per board (lab place):" in step_summary and "night: 2 run(s)" in step_summary
    _all_free(lab)
