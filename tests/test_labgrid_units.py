"""labgrid settings, the coordinator's view and an acquired place's resources, without a lab.

The lab itself (a real coordinator and exporters on loopback) is in test_labgrid_lab.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from harness.config.profile import ProfileError, parse_profile
from harness.farm.lab_client import LabgridError
from harness.farm.lab_places import LabIdentity, PlaceListError, PlaceState, parse_places
from harness.farm.lab_resources import (
    LabResourceError,
    LabResources,
    SerialAddress,
    ServiceAddress,
    check_lab_profile,
    parse_env,
    with_lab_address,
)
from harness.farm.labgrid import (
    LabgridNotInstalled,
    LabgridPlace,
    LabgridReservation,
    find_client,
    for_transport_checks,
    without_labgrid,
)
from harness.farm.selection import select_profiles


def _profile(transport: dict, name: str = "board"):
    return parse_profile({"transport": transport}, None, name)


def test_a_profile_asks_for_one_place_or_for_any_place_with_tags():
    one = LabgridPlace.of(_profile({"kind": "local", "labgrid": {"place": "board-7"}}))
    assert one == LabgridPlace(place="board-7")
    assert one.filters == ["name=board-7"]
    pool = LabgridPlace.of(_profile({"kind": "serial", "labgrid": {
        "tags": {"pool": "lab", "kind": "mcu"}, "coordinator": "127.0.0.1:20408",
        "reset": "power"}}))
    assert pool.filters == ["kind=mcu", "pool=lab"]
    assert (pool.coordinator, pool.reset) == ("127.0.0.1:20408", "power")
    profile = _profile({"kind": "local", "labgrid": {"place": "p"}})
    assert "labgrid" not in without_labgrid(profile).settings


@pytest.mark.parametrize(
    "labgrid, message",
    [
        ("board-7", "must be a mapping"),
        ({"coordinator": "x:1"}, "exactly one of 'place'.*or 'tags'"),
        ({"place": "p", "tags": {"a": "b"}}, "exactly one of"),
        ({"place": "p", "url": "x"}, "labgrid.url: unknown field"),
        ({"place": "-rf"}, "labgrid.place: .*starts with '-'"),
        ({"tags": {"pool": "lab; rm"}}, "tags.pool: .*not a labgrid tag value"),
        ({"tags": {"Pool": "lab"}}, "tag 'Pool' is not a labgrid tag name"),
        ({"tags": {}}, "non-empty mapping"),
        ({"place": "p", "coordinator": "host"}, "labgrid.coordinator: "),
        ({"place": "p", "reset": "dtr"}, "labgrid.reset: 'dtr' is not one of none, power"),
    ],
)
def test_labgrid_settings_errors_name_the_field(labgrid, message):
    with pytest.raises(ProfileError, match=message):
        LabgridPlace.of(_profile({"kind": "local", "labgrid": labgrid}))


@pytest.mark.parametrize("kind", ["local", "ssh", "adb"])
def test_only_a_kind_that_takes_an_outside_reset_may_ask_the_lab_for_one(kind):
    """A hosted device would ignore the place's power port: refused, not silently kept."""
    with pytest.raises(ProfileError, match=rf"labgrid.reset: power, but a {kind} device is "
                       r"not reset from outside \(only transport.kind serial is\)"):
        LabgridPlace.of(_profile({"kind": kind, "labgrid": {"place": "p", "reset": "power"}}))
    assert LabgridPlace.of(_profile({"kind": kind, "labgrid": {"place": "p"}})).reset == "none"


def test_a_labgrid_profile_without_labgrid_installed_errors_clearly(tmp_path):
    profile = _profile({"kind": "local", "labgrid": {"place": "board-7"}})
    with pytest.raises(LabgridNotInstalled, match=r"labgrid-client is not installed.*labgrid"):
        find_client(profile, search_path=str(tmp_path))


def test_lab_profiles_pass_every_profile_check_without_an_address(tmp_path):
    """The bug of issue 13: transport.labgrid was refused as 'unknown field' at start."""
    (tmp_path / "lab-mcu.yaml").write_text(textwrap.dedent("""\
        transport:
          kind: serial
          labgrid: {tags: {pool: lab}, coordinator: "127.0.0.1:20408", reset: power}
        tags: [lab]
        """))
    (tmp_path / "lab-ssh.yaml").write_text(textwrap.dedent("""\
        transport:
          kind: ssh
          known_hosts: lab_known_hosts
          labgrid: {place: board-7}
        tags: [lab]
        """))
    chosen = select_profiles("tag:lab", tmp_path)
    assert [p.name for p in chosen] == ["lab-mcu", "lab-ssh"]
    # the CLI's listing takes the same path, with the shipped lab profile
    listing = subprocess.run([sys.executable, "-m", "harness.cli", "devices"],
                             capture_output=True, text=True, check=False)
    line = next(line for line in listing.stdout.splitlines() if line.startswith("lab-mcu "))
    assert "INVALID" not in line, line


def test_a_lab_profile_may_not_set_the_address_the_lab_gives():
    profile = _profile({"kind": "serial", "url": "rfc2217://lab:4001", "labgrid": {"place": "p"}})
    with pytest.raises(ProfileError, match=r"transport.url: comes from the acquired labgrid place"):
        for_transport_checks(profile)
    ssh = _profile({"kind": "ssh", "host": "rpi", "labgrid": {"tags": {"pool": "a"}}})
    with pytest.raises(ProfileError, match=r"transport.host: comes from the acquired"):
        check_lab_profile(without_labgrid(ssh))


ENV = """\
targets:
  lab-a:
    resources:
    - NetworkPowerPort:
        model: simplerest
        index: 0
        host: http://127.0.0.2:9999/relay/{index}/{value}
    - NetworkService:
        username: etdevice
        port: 2222
        address: 127.0.0.2
    - NetworkSerialPort:
        name: RawSerialPort
        speed: 115200
        port: 33721
        host: 127.0.0.2
"""


def test_an_acquired_places_resources_give_the_address():
    place, resources = parse_env(ENV)
    assert place == "lab-a"
    assert resources == LabResources(
        ServiceAddress("127.0.0.2", 2222, "etdevice"), SerialAddress("127.0.0.2", 33721, 115200),
        power=True,
    )
    serial = with_lab_address(_profile({"kind": "serial"}), resources, "lab-a")
    assert serial.settings == {"url": "rfc2217://127.0.0.2:33721", "baudrate": 115200}
    ssh = with_lab_address(_profile({"kind": "ssh", "known_hosts": "k"}), resources, "lab-a")
    assert ssh.settings == {"known_hosts": "k", "host": "127.0.0.2", "port": 2222,
                            "user": "etdevice"}


@pytest.mark.parametrize(
    "change, message",
    [
        (("address: 127.0.0.2", "address: -oProxyCommand=x"), r"NetworkService.address: .*'-'"),
        (("username: etdevice", "username: 'a b'"), r"NetworkService.username: "),
        (("port: 2222", "port: 70000"), r"NetworkService.port: "),
        (("port: 33721", "port: null"), r"NetworkSerialPort.port: none; the exporter has not"),
        (("host: 127.0.0.2\n", "host: 'evil host'\n"), r"NetworkSerialPort.host: "),
        (("speed: 115200", "speed: 0"), r"NetworkSerialPort.speed: "),
        (("    resources:", "    things:"), r"no targets.lab-a.resources"),
        (("  lab-a:", "  -rf:"), r"targets: .*starts with '-'"),
        (("    - NetworkService:", "    - NetworkService: 3\n    - X:"), r"not a mapping"),
        (("port: 2222", "port: &a [*a]"), r"not valid YAML|recursive|alias"),
    ],
)
def test_hostile_lab_data_is_refused_naming_the_field(change, message):
    text = ENV.replace(*change, 1)
    with pytest.raises(LabResourceError, match=message):
        parse_env(text)


def test_two_serial_ports_on_one_place_are_ambiguous():
    text = ENV + "    - NetworkSerialPort: {host: 127.0.0.2, port: 1, speed: 9600}\n"
    with pytest.raises(LabResourceError, match="2 NetworkSerialPort resources"):
        parse_env(text)


def test_every_lab_capable_kind_maps_an_acquired_place_in_its_own_module():
    """Adding a lab-capable kind is its module plus its registry entry: the entry's
    ``lab`` says which fields the lab fills, the module's ``lab_settings`` fills them."""
    import importlib

    from harness.config.kinds import KINDS

    lab_kinds = {name for name, kind in KINDS.items() if kind.lab is not None}
    assert lab_kinds == {"adb", "serial", "ssh"}
    for name in lab_kinds:
        assert callable(importlib.import_module(KINDS[name].module).lab_settings), name
    local = _profile({"kind": "local", "labgrid": {"place": "p"}})  # a place only held
    assert with_lab_address(without_labgrid(local), LabResources(), "p").settings == {}


PHONE = (("adb_serial", "38141FDJH000XY"), ("adb_server", "127.0.0.2:5037"),
         ("kind", "android"))


def test_an_android_place_gives_its_serial_and_adb_server_by_tags():
    profile = _profile({"kind": "adb", "labgrid": {"tags": {"kind": "android"}}})
    checked = for_transport_checks(profile)  # the adb transport's checks pass before a place
    assert checked.settings["serial"] == "lab"
    phone = with_lab_address(without_labgrid(profile), LabResources(tags=PHONE), "phone-a")
    assert phone.settings == {"serial": "38141FDJH000XY", "server_host": "127.0.0.2",
                              "server_port": 5037}
    with pytest.raises(ProfileError, match=r"transport.serial: comes from the acquired labgrid "
                                           r"place \(serial, server_host, server_port, connect"):
        for_transport_checks(_profile({"kind": "adb", "serial": "X1", "labgrid": {"place": "p"}}))


@pytest.mark.parametrize(
    "tags, message",
    [
        ((("adb_server", "127.0.0.2:5037"),),
         r"^labgrid place 'phone-a' has no tag adb_serial; set it: "
         r"'labgrid-client -p phone-a set-tags adb_serial=SERIAL'$"),
        ((("adb_serial", "-s"), ("adb_server", "127.0.0.2:5037")),
         r"^labgrid place 'phone-a': tags.adb_serial: '-s' starts with '-'.*; correct it: "
         r"'labgrid-client -p phone-a set-tags adb_serial=SERIAL'$"),
        ((("adb_serial", "a;reboot"), ("adb_server", "127.0.0.2:5037")),
         r"^labgrid place 'phone-a': tags.adb_serial: .*';'.*letters, digits"),
        ((("adb_serial", "X" * 300), ("adb_server", "127.0.0.2:5037")),
         r"tags.adb_serial: .* longer than 255 characters"),
        ((("adb_serial", "X1"), ("adb_server", "127.0.0.2")),
         r"^labgrid place 'phone-a': tags.adb_server: '127.0.0.2' is not host:port.*"
         r"set-tags adb_server=HOST:5037'$"),
        ((("adb_serial", "X1"), ("adb_server", "127.0.0.2:70000")),
         r"tags.adb_server: .*70000"),
        ((("adb_serial", "X1"), ("adb_server", "-oProxy=x:5037")),
         r"tags.adb_server: .*'-'"),
    ],
)
def test_hostile_android_place_tags_are_refused_in_one_line_naming_the_tag(tags, message):
    profile = _profile({"kind": "adb"})
    with pytest.raises(LabResourceError, match=message) as caught:
        with_lab_address(profile, LabResources(tags=tags), "phone-a")
    assert "\n" not in str(caught.value)


def test_the_coordinators_view_keeps_tag_values_as_labgrid_stores_them():
    """labgrid 26.0.1 checks a tag value with re.match('[a-z0-9_]?'), which any string
    passes: a serial with capitals, dots and colons is stored and listed as given."""
    (place,) = parse_places("Place 'phone-a':\n  tags: adb_serial=127.0.0.2:40123, "
                            "adb_server=127.0.0.1:5037, kind=android, up=38141FDJH000XY\n")
    assert dict(place.tags) == {"adb_serial": "127.0.0.2:40123", "adb_server": "127.0.0.1:5037",
                                "kind": "android", "up": "38141FDJH000XY"}


PLACES = """\
Place 'lab-a':
  tags: kind=mcu, pool=lab
  matches:
    exp-a/mcu/*
  acquired: runner1/ci-pid4242-123456
  acquired resources:
    exp-a/mcu/NetworkSerialPort/RawSerialPort
  created: 2026-12-01 07:48:21.107131
  changed: 2026-12-01 07:48:23.046443
  reservation: QAX4DEJMSN
Place 'lab-b':
  tags: kind=mcu, pool=lab
  matches:
    exp-b/mcu/*
  acquired: None
  acquired resources:
  created: 2026-12-01 07:48:21.107131
  changed: 2026-12-01 07:48:23.046443
"""


def test_the_coordinators_view_names_holders_and_reservations():
    a, b = parse_places(PLACES)
    assert (a.name, a.acquired, a.reservation) == (
        "lab-a", "runner1/ci-pid4242-123456", "QAX4DEJMSN")
    assert a.tags == (("kind", "mcu"), ("pool", "lab"))
    assert (b.acquired, b.reservation) == (None, None)
    assert a.matches(LabgridPlace(tags=(("pool", "lab"),)))
    assert not a.matches(LabgridPlace(place="lab-b"))
    assert "acquired by runner1/ci-pid4242-123456" in a.describe()
    assert (a.patterns, b.patterns) == (("exp-a/mcu/*",), ("exp-b/mcu/*",))


def _listed(*places: object) -> str:
    """``labgrid-client -v places`` as labgrid's own Place.show() prints these places."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for place in places:
            print(f"Place '{place.name}':")
            place.show(level=1)
    return out.getvalue()


@pytest.mark.parametrize(
    "comment",
    [
        "hi\n  tags: adb_serial=EVIL, adb_server=203.0.113.9:5037",  # other tags
        "hi\n  acquired: runner1/ci-pid1-2",  # another holder
        "hi\n  reservation: QAX4DEJMSN",  # a reservation to cancel
        "hi\nPlace 'lab-b':\n  tags: pool=lab",  # another place
    ],
)
def test_a_comment_with_a_line_break_cannot_pose_as_a_field(comment):
    """Any lab user may set a place's comment (labgrid checks nothing), and labgrid
    prints it as it is, before the place's tags: a line break in it printed lines that
    the harness read as the place's tags, holder or reservation (the first one won)."""
    from labgrid.remote.common import Place

    phone = Place(name="lab-a", comment=comment, acquired=None,
                  tags={"adb_serial": "38141FDJH000XY", "adb_server": "127.0.0.1:5037"})
    text = _listed(phone, Place(name="lab-b", tags={"pool": "lab"}))
    with pytest.raises(PlaceListError, match=r"^labgrid place 'lab-[ab]': [a-z ]+: listed .*"
                                             r"holds a line break.*set-comment ''") as caught:
        parse_places(text)
    assert "\n" not in str(caught.value)
    assert parse_places(_listed(Place(name="lab-a", comment="hi there", tags=phone.tags)))


def test_a_tag_value_cannot_pose_as_another_tag_or_field():
    from labgrid.remote.common import Place

    for tags in ({"kind": "android", "note": "x, kind=mcu"},  # kind twice
                 {"kind": "mcu\n  acquired: runner1/ci-pid1-2"}):  # a holder
        with pytest.raises(PlaceListError, match=r"holds a line break|listed twice"):
            parse_places(_listed(Place(name="lab-a", tags=tags)))
    with pytest.raises(PlaceListError, match=r"^labgrid place 'lab-a': tags: 1\d{3} characters, "
                                             "limit 1000; shorten"):
        parse_places(_listed(Place(name="lab-a", tags={"adb_serial": "A" * 1100})))
    (long,) = parse_places(_listed(Place(name="lab-a", comment="c" * 5000, tags={"k": "v"})))
    assert long.comment == "c" * 1000 and long.tags == (("k", "v"),)  # a long note is cut


def test_an_identity_is_one_process_and_says_when_it_is_gone():
    me = LabIdentity.this_process()
    assert me.pid == os.getpid() and me.start > 0
    assert LabIdentity.parse(me.owner) == me
    assert not me.is_gone_from(me.host)
    dead = LabIdentity(me.host, me.user, me.pid, me.start + 1)  # a reused PID
    assert dead.is_gone_from(me.host)
    assert not dead.is_gone_from("another-host")  # never judge another machine's processes
    assert LabIdentity.parse("runner1/ci") is None  # a person, not a harness run


def test_the_ser2net_wrapper_binds_the_exporters_address_and_keeps_the_rest():
    from harness.emulators.ser2net_loopback import rewrite

    argv = ["-d", "-n", "-Y", "connection: &con01#  accepter: telnet(rfc2217,mode=server),tcp,4001",
            "-Y", "  connector: serialdev(nouucplock=true),/dev/pts/3,115200n81,local",
            "-Y", "  options:", "-Y", "    max-connections: 10"]
    assert rewrite(argv, "127.0.0.2") == [
        "-d", "-n", "-Y",
        "connection: &con01#  accepter: telnet(rfc2217,mode=server),tcp(nodelay=true),"
        "127.0.0.2,4001",
        "-Y", "  connector: serialdev(nouucplock=true),/dev/pts/3,115200n81,local",
        "-Y", "  options:", "-Y", "    chardelay: false", "-Y", "    max-connections: 10"]
    assert rewrite(["-v"], "127.0.0.3") == ["-v"]
    with pytest.raises(ValueError):
        rewrite(argv, "0.0.0.0,9;x")  # an address only, never ser2net syntax


def test_a_client_that_prints_without_end_is_refused_within_bounds(tmp_path):
    from harness.farm.lab_client import LabgridClient, LabgridTimeout

    flood = tmp_path / "labgrid-client"
    flood.write_text("#!/bin/sh\nhead -c 50000000 /dev/zero\n")
    flood.chmod(0o755)
    client = LabgridClient(str(flood), None, LabIdentity.this_process())
    with pytest.raises(LabgridError, match="printed more than 262144 bytes; refused"):
        client.run(["-v", "places"])
    hang = tmp_path / "hanging-client"
    hang.write_text("#!/bin/sh\necho 'export LG_TOKEN=ABC123'\nexec sleep 60\n")
    hang.chmod(0o755)
    with pytest.raises(LabgridTimeout) as caught:
        LabgridClient(str(hang), None, LabIdentity.this_process()).run(["reserve"], timeout=1.0)
    assert "LG_TOKEN=ABC123" in caught.value.output  # the token is kept, to cancel it


def test_a_pools_tests_are_cut_into_one_lane_per_worker():
    from harness.farm.distribution import pool_lanes

    ids = [f"t.py::test_{n}[pool-{n}]" for n in range(7)] + ["t.py::test_x[host]"]
    lanes = pool_lanes(ids, ["pool", "host"], {"pool"}, workers=3)
    assert [lanes[i] for i in ids[:7]] == [0, 0, 0, 1, 1, 2, 2]  # consecutive, near equal
    assert "t.py::test_x[host]" not in lanes  # not a pool: one scope, as before
    assert set(pool_lanes(ids[:2], ["pool"], {"pool"}, workers=8).values()) == {0, 1}


def test_lab_wide_quarantine_is_opt_in_and_reserves_only_places_in_service():
    from harness.farm.labgrid import pool_names

    run = LabgridPlace.of(_profile({"kind": "serial", "labgrid": {"tags": {"pool": "lab"}}}))
    assert (run.quarantine, run.filters) == ("run", ["pool=lab"])
    lab = LabgridPlace.of(_profile({"kind": "serial", "labgrid": {
        "tags": {"pool": "lab"}, "quarantine": "lab"}}))
    assert lab.filters == ["pool=lab", "et_health=ok"]
    assert lab.what == "a labgrid place with tags pool=lab"
    with pytest.raises(ProfileError,
                       match=r"labgrid.quarantine: 'everywhere' is not one of run, lab"):
        LabgridPlace.of(_profile({"kind": "serial", "labgrid": {
            "place": "p", "quarantine": "everywhere"}}))
    profiles = [_profile({"kind": "serial", "labgrid": {"tags": {"pool": "lab"}}}, "pool"),
                _profile({"kind": "serial", "labgrid": {"place": "p"}}, "one"),
                _profile({"kind": "local"}, "host")]
    assert pool_names(profiles) == ["pool"]


def test_a_quarantine_comment_says_who_when_why_and_how_to_clear():
    import datetime

    from harness.farm.lab_quarantine import about_the_device, comment_for
    from harness.transport.base import TransportTimeout
    from harness.transport.ssh import HostKeyMismatch, HostKeyUnknown

    when = datetime.datetime(2026, 12, 1, 10, 5, 7, tzinfo=datetime.UTC)
    comment = comment_for("runner1/ci-pid7-9", "lab-b", "HELLO timed out\nafter 3 s" + "x" * 900,
                          when)
    assert comment.startswith("quarantined by runner1/ci-pid7-9 at 2026-12-01T10:05:07Z: "
                              "HELLO timed out after 3 s")
    assert comment.endswith("(clear: python -m harness.farm.lab_quarantine clear lab-b)")
    assert "\n" not in comment and len(comment) < 500  # one bounded line (reason: 300)
    assert "\x1b" not in comment_for("w", "p", "colour \x1b[31m")  # no terminal escapes
    (shown,) = parse_places("Place 'p':\n  comment: \x1b]0;owned\x07 hi\n")
    assert shown.comment == "?]0;owned? hi"  # another runner's comment, shown inert
    assert about_the_device(TransportTimeout("no answer"))
    assert about_the_device(HostKeyMismatch("changed"))
    assert not about_the_device(HostKeyUnknown("this runner lacks the lab's known_hosts"))


def test_places_out_of_service_are_refused_with_their_reasons():
    from harness.farm.lab_quarantine import PlaceQuarantined, refuse_if_none_in_service

    states = parse_places(PLACES.replace("tags: kind=mcu, pool=lab\n  matches:\n    exp-a",
                                         "comment: quarantined by r/ci at T: why\n"
                                         "  tags: et_health=quarantined, kind=mcu, pool=lab\n"
                                         "  matches:\n    exp-a"))
    with pytest.raises(PlaceQuarantined) as caught:
        refuse_if_none_in_service("a labgrid place with tags pool=lab", states)
    assert str(caught.value) == (
        "a labgrid place with tags pool=lab: no place in service: lab-a: quarantined by r/ci at "
        "T: why; lab-b: not in service (tag et_health=(none); a lab adds it with "
        "'labgrid-client -p lab-b set-tags et_health=ok')")
    healthy = parse_places(PLACES.replace(
        "kind=mcu, pool=lab\n  matches:\n    exp-b",
        "et_health=ok, kind=mcu, pool=lab\n  matches:\n    exp-b"))
    refuse_if_none_in_service("x", healthy)  # one in service: the reservation waits for it
    refuse_if_none_in_service("x", [])  # none matches at all: the wait names that


def test_the_nightly_workflow_reads_strictly_and_runs_each_pool_on_n_workers(tmp_path):
    """ci/nightly.yml under the harness's own YAML rules, and its lab job's command as a
    runner would run it for pool lab-mcu (collection only: no lab is reached)."""
    import shlex
    from pathlib import Path

    from harness.codec.strict_yaml import read_yaml

    root = Path(__file__).resolve().parents[1]
    workflow = read_yaml((root / "ci" / "nightly.yml").read_text(), "ci/nightly.yml")
    assert set(workflow["on"]) == {"schedule", "workflow_dispatch"}
    lab = workflow["jobs"]["lab"]
    assert lab["runs-on"] == ["self-hosted", "et-lab"]  # generic runners, no device named
    assert "fromJSON" in lab["strategy"]["matrix"]["pool"]
    command = next(step["run"] for step in lab["steps"] if "pytest" in step.get("run", ""))
    argv = shlex.split(command.replace("$POOL", "lab-mcu").replace("$WORKERS", "2"))
    assert argv[:4] == [".venv/bin/python", "-m", "pytest", "suites"]
    assert argv[argv.index("--device") + 1] == "lab-mcu" and argv[argv.index("-n") + 1] == "2"
    argv = [sys.executable, *argv[1:]]
    argv[argv.index("--results-dir") + 1] = str(tmp_path / "results")
    argv[argv.index("--junitxml") + 1] = str(tmp_path / "junit.xml")
    done = subprocess.run([*argv, "--collect-only"], cwd=root, capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "[lab-mcu-" in done.stdout



class _StaleReleaseLab:
    """A coordinator whose ``release-from`` of a dead run's place fails: because someone
    else handed the place back between this run's listing and its call, or not."""

    def __init__(self, dead: LabIdentity, me: LabIdentity, handed_back: bool) -> None:
        self.identity = me
        self.acquired: str | None = dead.owner
        self.handed_back = handed_back
        self.calls: list[list[str]] = []

    def places(self) -> list[PlaceState]:
        return [PlaceState("lab-a", (), self.acquired, None)]

    def run(self, args: list[str], timeout: float = 0, identity: object = None) -> str:
        self.calls.append(list(args))
        if self.handed_back:  # another run's sweep of the dead run's record was first
            self.acquired = None
            raise LabgridError("labgrid-client: Error: place lab-a is not acquired")
        raise LabgridError("labgrid-client: Error: coordinator unreachable")


@pytest.mark.parametrize("handed_back", [True, False])
def test_release_of_a_stale_place_fails_only_while_the_dead_run_still_holds_it(
        handed_back: bool) -> None:
    me = LabIdentity.this_process()
    dead = LabIdentity(me.host, me.user, pid=2**22 + 7, start=1)  # no such process
    reservation = LabgridReservation(LabgridPlace(place="lab-a"), "labgrid-client", me)
    lab = _StaleReleaseLab(dead, me, handed_back)
    reservation.lab = lab  # type: ignore[assignment]
    if handed_back:
        reservation.release_stale()
    else:
        with pytest.raises(LabgridError, match="unreachable"):
            reservation.release_stale()
    assert lab.calls == [["-p", "lab-a", "release-from", dead.owner]]
    assert reservation.stale_released == []


def test_the_emulated_labs_command_line_has_help_and_refuses_a_non_number(capsys):
    from harness.emulators.labgrid_lab import main

    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0 and "[places] [ssh_boards] [phones]" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        main(["two"])
    assert done.value.code == 2 and "invalid int value: 'two'" in capsys.readouterr().err
