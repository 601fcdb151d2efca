"""labgrid settings, the coordinator's view and an acquired place's resources, without a lab.

The lab itself (a real coordinator and exporters on loopback) is in test_labgrid_lab.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from harness.devices.acquired_place import PowerPort
from harness.extras import LAB
from harness.farm.selection import select_profiles
from harness.lab.client_session import RawPlace, Resource
from harness.lab.identity import LabIdentity
from harness.lab.places import BadPlace, PlaceState, place_state
from harness.lab.resources import (
    LabResourceError,
    LabResources,
    SerialAddress,
    ServiceAddress,
    matched_resources,
    read_resources,
    with_lab_address,
)
from harness.profiles.device_profile import DeviceProfile, ProfileError, parse_profile
from harness.profiles.lab_setting import (
    LabgridNotInstalled,
    LabgridPlace,
    check_lab_profile,
    for_transport_checks,
    require_labgrid,
    without_labgrid,
)


def _profile(transport: dict[str, object], name: str = "board") -> DeviceProfile:
    return parse_profile({"transport": transport}, None, name)


def test_a_profile_asks_for_one_place_or_for_any_place_with_tags():
    one = LabgridPlace.of(_profile({"kind": "local", "labgrid": {"place": "board-7"}}))
    assert one is not None
    assert one == LabgridPlace(place="board-7")
    assert one.filters == {}
    assert one.asks_for("board-7", {}) and not one.asks_for("board-8", {})
    pool = LabgridPlace.of(
        _profile(
            {
                "kind": "serial",
                "labgrid": {
                    "tags": {"pool": "lab", "kind": "mcu"},
                    "coordinator": "127.0.0.1:20408",
                    "reset": "power",
                },
            }
        )
    )
    assert pool is not None
    assert pool.filters == {"kind": "mcu", "pool": "lab"}
    assert pool.asks_for("x", {"kind": "mcu", "pool": "lab", "more": "y"})
    assert not pool.asks_for("x", {"kind": "mcu"})
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
        ({"place": "p", "recover": "reboot"}, "labgrid.recover: 'reboot' is not one of none"),
    ],
)
def test_labgrid_settings_errors_name_the_field(labgrid, message):
    with pytest.raises(ProfileError, match=message):
        LabgridPlace.of(_profile({"kind": "local", "labgrid": labgrid}))


@pytest.mark.parametrize(
    ("field", "kind", "able", "refusal"),
    [
        *(("reset", k, "serial", "a {} device is not reset from outside \\(only transport.kind "
           "serial is\\)") for k in ("local", "ssh", "adb")),
        *(("recover", k, "ssh", "the harness does not wait for a {} device to boot \\(only "
           "for transport.kind ssh\\)") for k in ("local", "adb", "serial")),
    ],
)  # fmt: skip
def test_only_a_kind_that_can_use_the_places_power_may_ask_for_it(field, kind, able, refusal):
    """reset: a hosted device would ignore the place's power port; recover: a device the
    harness cannot wait for would be power-cycled into a failure. Refused, not kept."""
    asked = {"place": "p", field: "power"}
    with pytest.raises(ProfileError, match=rf"labgrid.{field}: power, but {refusal.format(kind)}"):
        LabgridPlace.of(_profile({"kind": kind, "labgrid": asked}))
    place = LabgridPlace.of(_profile({"kind": kind, "labgrid": {"place": "p"}}))
    assert place is not None and (place.reset, place.recover) == ("none", "none")
    place = LabgridPlace.of(_profile({"kind": able, "labgrid": asked}))
    assert place is not None and getattr(place, field) == "power"


def test_a_labgrid_profile_without_labgrid_installed_errors_clearly(monkeypatch):
    import importlib.util

    profile = _profile({"kind": "local", "labgrid": {"place": "board-7"}})
    if LAB.missing("a labgrid place") is None:
        require_labgrid(profile)  # installed here (the unit tests also run without it)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(
        LabgridNotInstalled,
        match=(
            r"transport\.labgrid: a labgrid place needs the \[lab\] extra \(labgrid, grpc not "
            r"installed here\): pip install 'executorch-hil-harness\[lab\]'"
        ),
    ):
        require_labgrid(profile)


def test_lab_profiles_pass_every_profile_check_without_an_address(tmp_path):
    """The bug of issue 13: transport.labgrid was refused as 'unknown field' at start."""
    (tmp_path / "lab-mcu.yaml").write_text(
        textwrap.dedent("""\
        transport:
          kind: serial
          labgrid: {tags: {pool: lab}, coordinator: "127.0.0.1:20408", reset: power}
        tags: [lab]
        """)
    )
    (tmp_path / "lab-ssh.yaml").write_text(
        textwrap.dedent("""\
        transport:
          kind: ssh
          known_hosts: lab_known_hosts
          labgrid: {place: board-7}
        tags: [lab]
        """)
    )
    chosen = select_profiles("tag:lab", tmp_path)
    assert [p.name for p in chosen] == ["lab-mcu", "lab-ssh"]
    # the CLI's listing takes the same path, with the shipped lab profile
    listing = subprocess.run(
        [sys.executable, "-m", "harness.cli", "devices"],
        capture_output=True,
        text=True,
        check=False,
    )
    line = next(line for line in listing.stdout.splitlines() if line.startswith("lab-mcu "))
    assert "INVALID" not in line, line


def test_a_lab_profile_may_not_set_the_address_the_lab_gives():
    profile = _profile({"kind": "serial", "url": "rfc2217://lab:4001", "labgrid": {"place": "p"}})
    with pytest.raises(ProfileError, match=r"transport.url: comes from the acquired labgrid place"):
        for_transport_checks(profile)
    ssh = _profile({"kind": "ssh", "host": "rpi", "labgrid": {"tags": {"pool": "a"}}})
    with pytest.raises(ProfileError, match=r"transport.host: comes from the acquired"):
        check_lab_profile(without_labgrid(ssh))


def _resources(**changes: dict[str, object]) -> list[Resource]:
    """Place lab-a's resources as labgrid's session holds them, with ``changes`` to the
    arguments of a class."""
    args: dict[str, dict[str, object]] = {
        "NetworkService": {"address": "127.0.0.2", "port": 2222, "username": "etdevice"},
        "NetworkSerialPort": {"host": "127.0.0.2", "port": 33721, "speed": 115200},
        "NetworkPowerPort": {
            "model": "simplerest",
            "host": "http://127.0.0.2:9/{index}/{value}",
            "index": "0",
        },
    }
    for cls, change in changes.items():
        args[cls] = {**args[cls], **change}
    return [
        Resource("exp-a", "mcu", name, cls, tuple(fields.items()), None)
        for name, cls, fields in (
            ("RawSerialPort", "NetworkSerialPort", args["NetworkSerialPort"]),
            ("NetworkService", "NetworkService", args["NetworkService"]),
            ("NetworkPowerPort", "NetworkPowerPort", args["NetworkPowerPort"]),
        )
    ]


def test_an_acquired_places_resources_give_the_address():
    resources = read_resources("lab-a", _resources(), acquired=True)
    assert resources == LabResources(
        ServiceAddress("127.0.0.2", 2222, "etdevice"),
        SerialAddress("127.0.0.2", 33721, 115200),
        power_port=PowerPort("simplerest", "http://127.0.0.2:9/{index}/{value}", 0),
    )
    serial = with_lab_address(_profile({"kind": "serial"}), resources, "lab-a")
    assert serial.settings == {"url": "rfc2217://127.0.0.2:33721", "baudrate": 115200}
    ssh = with_lab_address(_profile({"kind": "ssh", "known_hosts": "k"}), resources, "lab-a")
    assert ssh.settings == {
        "known_hosts": "k",
        "host": "127.0.0.2",
        "port": 2222,
        "user": "etdevice",
    }
    # before acquisition the serial port has no network port yet: not an error
    free = read_resources("lab-a", _resources(NetworkSerialPort={"port": None}), acquired=False)
    assert free.serial is None and free.service is not None


def test_a_raw_network_serial_port_is_a_plain_tcp_url():
    """labgrid's ``NetworkSerialPort.protocol: raw`` is a TCP port without RFC 2217."""
    raw = read_resources("lab-a", _resources(NetworkSerialPort={"protocol": "raw"}), True)
    serial = with_lab_address(_profile({"kind": "serial"}), raw, "lab-a")
    assert serial.settings["url"] == "socket://127.0.0.2:33721"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"NetworkService": {"address": "-oProxyCommand=x"}}, r"NetworkService.address: .*'-'"),
        ({"NetworkService": {"username": "a b"}}, r"NetworkService.username: "),
        ({"NetworkService": {"port": 70000}}, r"NetworkService.port: "),
        ({"NetworkService": {"port": "22; x"}}, r"NetworkService.port: "),
        ({"NetworkSerialPort": {"port": None}}, r"NetworkSerialPort.port: none; the exporter"),
        ({"NetworkSerialPort": {"host": "evil host"}}, r"NetworkSerialPort.host: "),
        ({"NetworkSerialPort": {"speed": 0}}, r"NetworkSerialPort.speed: "),
        ({"NetworkSerialPort": {"protocol": "ssh"}}, r"NetworkSerialPort.protocol: 'ssh' is not"),
        ({"NetworkPowerPort": {"model": "../../os"}}, r"NetworkPowerPort.model: .*labgrid power"),
        ({"NetworkPowerPort": {"host": "x\ny"}}, r"NetworkPowerPort.host: "),
        # a digit int() cannot read: str.isdigit() says yes to it
        ({"NetworkPowerPort": {"index": "\u00b2"}}, r"NetworkPowerPort.index: "),
    ],
)
def test_hostile_lab_data_is_refused_naming_the_field(change, message):
    with pytest.raises(
        LabResourceError, match=r"^labgrid place 'lab-a': resources.exp-a/mcu/" + message
    ) as caught:
        read_resources("lab-a", _resources(**change), acquired=True)
    assert "\n" not in str(caught.value)


def test_two_serial_ports_on_one_place_are_ambiguous():
    extra = Resource(
        "exp-b",
        "mcu",
        "RawSerialPort",
        "NetworkSerialPort",
        (("host", "127.0.0.3"), ("port", 1), ("speed", 9600)),
        None,
    )
    with pytest.raises(LabResourceError, match="2 NetworkSerialPort resources"):
        read_resources("lab-a", [*_resources(), extra], acquired=True)


def test_a_places_matches_take_resources_by_labgrids_own_rule():
    raw = _raw(matches=(("exp-a", "mcu", "*", None),))
    other = Resource("exp-b", "mcu", "X", "NetworkService", (), None)
    assert matched_resources(raw, [*_resources(), other]) == _resources()
    named = _raw(matches=(("exp-*", "mcu", "NetworkSerialPort", "Raw*"),))
    assert [r.name for r in matched_resources(named, [*_resources(), other])] == ["RawSerialPort"]


def test_every_lab_capable_kind_maps_an_acquired_place_in_its_own_module():
    """A lab-capable kind is its module: its ``KIND.lab`` says which fields the lab
    fills, the module's ``lab_settings`` fills them."""

    from harness.profiles.kinds import all_kinds, kind_module

    lab_kinds = {kind.name for kind in all_kinds() if kind.lab is not None}
    assert {"adb", "serial", "ssh"} <= lab_kinds
    for name in lab_kinds:
        assert callable(kind_module(name).lab_settings), name
    local = _profile({"kind": "local", "labgrid": {"place": "p"}})  # a place only held
    assert with_lab_address(without_labgrid(local), LabResources(), "p").settings == {}


PHONE = (("adb_serial", "38141FDJH000XY"), ("adb_server", "127.0.0.2:5037"), ("kind", "android"))


def test_an_android_place_gives_its_serial_and_adb_server_by_tags():
    profile = _profile({"kind": "adb", "labgrid": {"tags": {"kind": "android"}}})
    checked = for_transport_checks(profile)  # the adb transport's checks pass before a place
    assert checked.settings["serial"] == "lab"
    phone = with_lab_address(without_labgrid(profile), LabResources(tags=PHONE), "phone-a")
    assert phone.settings == {
        "serial": "38141FDJH000XY",
        "server_host": "127.0.0.2",
        "server_port": 5037,
    }
    with pytest.raises(
        ProfileError,
        match=r"transport.serial: comes from the acquired labgrid "
        r"place \(serial, server_host, server_port, connect",
    ):
        for_transport_checks(_profile({"kind": "adb", "serial": "X1", "labgrid": {"place": "p"}}))


@pytest.mark.parametrize(
    "tags, message",
    [
        (
            (("adb_server", "127.0.0.2:5037"),),
            r"^labgrid place 'phone-a' has no tag adb_serial; set it: "
            r"'labgrid-client -x COORDINATOR -p phone-a set-tags adb_serial=SERIAL'$",
        ),
        (
            (("adb_serial", "-s"), ("adb_server", "127.0.0.2:5037")),
            r"^labgrid place 'phone-a': tags.adb_serial: '-s' starts with '-'.*; correct it: "
            r"'labgrid-client -x COORDINATOR -p phone-a set-tags adb_serial=SERIAL'$",
        ),
        (
            (("adb_serial", "a;reboot"), ("adb_server", "127.0.0.2:5037")),
            r"^labgrid place 'phone-a': tags.adb_serial: .*';'.*letters, digits",
        ),
        (
            (("adb_serial", "X" * 300), ("adb_server", "127.0.0.2:5037")),
            r"tags.adb_serial: .* longer than 255 characters",
        ),
        (
            (("adb_serial", "X1"), ("adb_server", "127.0.0.2")),
            r"^labgrid place 'phone-a': tags.adb_server: '127.0.0.2' is not host:port.*"
            r"set-tags adb_server=HOST:5037'$",
        ),
        ((("adb_serial", "X1"), ("adb_server", "127.0.0.2:70000")), r"tags.adb_server: .*70000"),
        ((("adb_serial", "X1"), ("adb_server", "-oProxy=x:5037")), r"tags.adb_server: .*'-'"),
    ],
)
def test_hostile_android_place_tags_are_refused_in_one_line_naming_the_tag(tags, message):
    profile = _profile({"kind": "adb"})
    with pytest.raises(LabResourceError, match=message) as caught:
        with_lab_address(profile, LabResources(tags=tags), "phone-a")
    assert "\n" not in str(caught.value)


def _raw(name: str = "lab-a", **fields: object) -> RawPlace:
    """A place as labgrid's session copied it, with ``fields`` changed."""
    values: dict = {
        "tags": (("kind", "mcu"), ("pool", "lab")),
        "comment": "",
        "acquired": None,
        "reservation": None,
        "matches": (("exp-a", "mcu", "*", None),),
        "acquired_resources": (),
    }
    values.update(fields)
    return RawPlace(name, **values)


def test_the_coordinators_view_keeps_tag_values_as_labgrid_stores_them():
    """labgrid 26.0.1 checks a tag value with re.match('[a-z0-9_]?'), which any string
    passes: a serial with capitals, dots and colons is stored and used as given."""
    tags = (
        ("adb_serial", "127.0.0.2:40123"),
        ("adb_server", "127.0.0.1:5037"),
        ("kind", "android"),
        ("up", "38141FDJH000XY"),
    )
    assert place_state(_raw("phone-a", tags=tags)).tags == tags


def test_the_coordinators_view_names_holders_reservations_and_exporters():
    a = place_state(
        _raw(
            acquired="runner1/ci-pid4242-123456",
            reservation="QAX4DEJMSN",
            matches=(("exp-a", "mcu", "*", None), ("exp-a", "ssh", "*", None)),
        )
    )
    assert (a.name, a.acquired, a.reservation) == (
        "lab-a",
        "runner1/ci-pid4242-123456",
        "QAX4DEJMSN",
    )
    assert a.tags == (("kind", "mcu"), ("pool", "lab")) and a.exporters == ("exp-a",)
    assert "acquired by runner1/ci-pid4242-123456" in a.describe()
    b = place_state(_raw("lab-b"))
    assert (b.acquired, b.reservation) == (None, None)


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            {"tags": (("kind", "mcu\n  acquired: runner1/ci"),)},
            r"tags.kind: 'mcu\\n  acquired: runner1/ci' holds the control byte '\\n'",
        ),
        (
            {"tags": (("kind", "mcu"), ("adb_serial", "A" * 1100))},
            r"tags.adb_serial: .*longer than 255",
        ),
        ({"tags": (("Kind", "mcu"),)}, r"tags: key 'Kind' is not"),
        ({"tags": tuple((f"k{n}", "v") for n in range(65))}, r"tags: 65 tags, limit 64"),
        ({"acquired": "runner1/ci\nx"}, r"acquired: "),
        ({"reservation": "-rf"}, r"reservation: .*'-'"),
        ({"matches": (("-exp", "mcu", "*", None),)}, r"matches: .*'-'"),
    ],
)
def test_a_place_with_hostile_data_is_that_places_problem_named_in_one_line(fields, message):
    with pytest.raises(BadPlace, match=r"^labgrid place 'lab-a': " + message) as caught:
        place_state(_raw(**fields), "10.0.0.1:20408")
    assert "\n" not in str(caught.value)
    if "tags" in fields:  # the fix names the coordinator it applies to
        assert str(caught.value).endswith(
            "correct it: 'labgrid-client -x 10.0.0.1:20408 -p lab-a set-tags KEY=VALUE'"
        )
    with pytest.raises(BadPlace, match=r"^labgrid place 'a\\nb': name: "):
        place_state(_raw("a\nb"))


def test_a_comment_is_only_shown_inert_and_bounded():
    """Any lab user may set a comment; it is never parsed, only shown: a line break or a
    terminal escape in it is shown as '?', a long one is cut."""
    shown = place_state(_raw(comment="hi\n  acquired: x \x1b]0;owned\x07"))
    assert shown.comment == "hi?  acquired: x ?]0;owned?" and shown.acquired is None
    assert place_state(_raw(comment="c" * 5000)).comment == "c" * 1000


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

    argv = [
        "-d",
        "-n",
        "-Y",
        "connection: &con01#  accepter: telnet(rfc2217,mode=server),tcp,4001",
        "-Y",
        "  connector: serialdev(nouucplock=true),/dev/pts/3,115200n81,local",
        "-Y",
        "  options:",
        "-Y",
        "    max-connections: 10",
    ]
    assert rewrite(argv, "127.0.0.2") == [
        "-d",
        "-n",
        "-Y",
        "connection: &con01#  accepter: telnet(rfc2217,mode=server),tcp(nodelay=true),"
        "127.0.0.2,4001",
        "-Y",
        "  connector: serialdev(nouucplock=true),/dev/pts/3,115200n81,local",
        "-Y",
        "  options:",
        "-Y",
        "    chardelay: false",
        "-Y",
        "    max-connections: 10",
    ]
    assert rewrite(["-v"], "127.0.0.3") == ["-v"]
    with pytest.raises(ValueError):
        rewrite(argv, "0.0.0.0,9;x")  # an address only, never ser2net syntax


def test_a_pools_tests_are_handed_out_one_by_one_a_devices_as_one_unit():
    from harness.farm.distribution import work_unit

    ids = [f"t.py::test_{n}[pool-{n}]" for n in range(3)] + ["t.py::test_x[host]"]
    units = [work_unit(i, ["pool", "host"], {"pool"}) for i in ids]
    assert len(set(units[:3])) == 3  # a free worker takes the next test, not a fixed half
    assert units[3] == work_unit("t.py::test_y[host]", ["pool", "host"], {"pool"})


def test_lab_wide_quarantine_is_opt_in_and_reserves_only_places_in_service():
    from harness.profiles.lab_setting import pool_names

    run = LabgridPlace.of(_profile({"kind": "serial", "labgrid": {"tags": {"pool": "lab"}}}))
    assert run is not None
    assert (run.quarantine, run.filters) == ("run", {"pool": "lab"})
    lab = LabgridPlace.of(
        _profile({"kind": "serial", "labgrid": {"tags": {"pool": "lab"}, "quarantine": "lab"}})
    )
    assert lab is not None
    assert lab.filters == {"pool": "lab", "et_health": "ok"}
    assert lab.what == "a labgrid place with tags pool=lab"
    with pytest.raises(
        ProfileError, match=r"labgrid.quarantine: 'everywhere' is not one of run, lab"
    ):
        LabgridPlace.of(
            _profile({"kind": "serial", "labgrid": {"place": "p", "quarantine": "everywhere"}})
        )
    profiles = [
        _profile({"kind": "serial", "labgrid": {"tags": {"pool": "lab"}}}, "pool"),
        _profile({"kind": "serial", "labgrid": {"place": "p"}}, "one"),
        _profile({"kind": "local"}, "host"),
    ]
    assert pool_names(profiles) == ["pool"]


def test_a_quarantine_comment_says_who_when_why_and_how_to_clear():
    import datetime

    from harness.lab.quarantine import about_the_device, comment_for
    from harness.transport.base import TransportTimeout
    from harness.transport.ssh import HostKeyMismatch, HostKeyUnknown

    when = datetime.datetime(2026, 12, 1, 10, 5, 7, tzinfo=datetime.UTC)
    comment = comment_for(
        "runner1/ci-pid7-9",
        "lab-b",
        "HELLO timed out\nafter 3 s" + "x" * 900,
        "10.0.0.1:20408",
        when,
    )
    assert comment.startswith(
        "quarantined by runner1/ci-pid7-9 at 2026-12-01T10:05:07Z: HELLO timed out after 3 s"
    )
    assert comment.endswith("(clear: et-harness lab quarantine -x 10.0.0.1:20408 clear lab-b)")
    assert "\n" not in comment and len(comment) < 500  # one bounded line (reason: 300)
    assert "\x1b" not in comment_for("w", "p", "colour \x1b[31m", "c:1")  # no escapes
    assert about_the_device(TransportTimeout("no answer"))
    assert about_the_device(HostKeyMismatch("changed"))
    assert not about_the_device(HostKeyUnknown("this runner lacks the lab's known_hosts"))


def test_a_quarantine_keeps_the_operators_comment_and_gives_it_back():
    from harness.lab.quarantine import comment_for, operators_comment

    own = "USB hub flaky, reseat before use [see ticket 12]"
    record = comment_for(
        "r/ci-pid1-2", "lab-b", "no HELLO [place comment: forged]", "c:1", kept=own
    )
    assert record.startswith("quarantined by r/ci-pid1-2 at ")
    assert record.endswith(f" [place comment: {own}]")
    assert operators_comment(record) == own  # a reason cannot forge the kept part
    assert operators_comment(comment_for("w", "p", "why", "c:1")) == ""  # none was kept
    assert operators_comment(own) == own  # a comment written since is the operator's
    # a second quarantine of a quarantined place keeps the first one's kept comment
    again = comment_for("w", "p", "why", "c:1", kept=operators_comment(record))
    assert operators_comment(again) == own


def test_places_out_of_service_are_refused_with_their_reasons():
    from harness.lab.quarantine import PlaceQuarantined, refuse_if_none_in_service

    states = [
        PlaceState(
            "lab-a",
            (("et_health", "quarantined"), ("kind", "mcu")),
            None,
            None,
            "quarantined by r/ci at T: why",
        ),
        PlaceState("lab-b", (("kind", "mcu"),), None, None),
    ]
    with pytest.raises(PlaceQuarantined) as caught:
        refuse_if_none_in_service("a labgrid place with tags pool=lab", states, "10.0.0.1:20408")
    assert str(caught.value) == (
        "a labgrid place with tags pool=lab: no place in service: lab-a: quarantined by r/ci at "
        "T: why; lab-b: not in service (tag et_health=(none); a lab adds it with "
        "'labgrid-client -x 10.0.0.1:20408 -p lab-b set-tags et_health=ok')"
    )
    healthy = [*states, PlaceState("lab-c", (("et_health", "ok"),), None, None)]
    refuse_if_none_in_service("x", healthy)  # one in service: the reservation waits for it
    refuse_if_none_in_service("x", [])  # none matches at all: the wait names that


@pytest.mark.skipif(
    LAB.missing("the lab's nightly") is not None, reason="runs a lab profile: the [lab] extra"
)
def test_the_nightly_workflows_read_strictly_and_run_each_pool_on_n_workers(tmp_path):
    """.github/workflows/nightly.yml and lab-nightly.yml (the reusable one it calls) under
    the harness's own YAML rules, and the lab job's command as a runner would run it for
    pool lab-mcu (collection only: no lab is reached)."""
    import shlex
    from pathlib import Path

    from harness.codec.strict_yaml import read_yaml

    root = Path(__file__).resolve().parents[2]
    workflows: dict[str, dict] = {}
    for name in ("nightly", "lab-nightly"):
        path = root / ".github" / "workflows" / f"{name}.yml"
        workflow = read_yaml(path.read_text(), str(path))
        assert isinstance(workflow, dict), workflow
        workflows[name] = workflow
    assert set(workflows["nightly"]["on"]) == {"schedule", "workflow_dispatch"}
    assert set(workflows["lab-nightly"]["on"]) == {"workflow_call"}
    called = workflows["lab-nightly"]["on"]["workflow_call"]
    assert {"pools", "devices-dir", "coordinator"} <= set(called["inputs"])
    assert {"ET_HISTORY_URL", "ET_LAB_SSH_KEY", "ET_LAB_KNOWN_HOSTS"} == set(called["secrets"])
    lab = workflows["lab-nightly"]["jobs"]["lab"]
    assert lab["runs-on"] == ["self-hosted", "et-lab"]  # generic runners, no device named
    assert "fromJSON" in lab["strategy"]["matrix"]["pool"]
    command = next(step["run"] for step in lab["steps"] if "et-harness run" in step.get("run", ""))
    argv = shlex.split(
        command.replace("$POOL", "lab-mcu")
        .replace("$WORKERS", "2")
        .replace("$DEVICES_DIR", str(root / "devices"))
    )
    assert argv[:2] == ["harness/.venv/bin/et-harness", "run"]
    assert argv[argv.index("--device") + 1] == "lab-mcu" and argv[argv.index("-n") + 1] == "2"
    argv = [sys.executable, "-m", "harness.cli", *argv[1:]]
    argv[argv.index("--results-dir") + 1] = str(tmp_path / "results")
    argv[argv.index("--junitxml") + 1] = str(tmp_path / "junit.xml")
    done = subprocess.run(
        [*argv, "--collect-only"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "[lab-mcu-" in done.stdout


def test_the_emulated_labs_command_line_has_help_and_refuses_a_non_number(capsys):
    from harness.emulators.emulated_lab import main

    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0 and "[places] [ssh_boards] [phones]" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        main(["two"])
    assert done.value.code == 2 and "invalid int value: 'two'" in capsys.readouterr().err


def test_one_key_per_place_comes_from_an_ssh_config_host_block_per_board_address(tmp_path):
    """The lab profile leaves identity_file out; its ssh_config names each board's key by
    the address the place's NetworkService gives."""
    from harness.transport.ssh.route import resolve_route
    from harness.transport.ssh.ssh_settings import SshSettings

    config = tmp_path / "lab_ssh_config"
    config.write_text(
        f"Host 127.0.0.5\n  IdentityFile {tmp_path}/key-5\n"
        f"Host 127.0.0.6\n  IdentityFile {tmp_path}/key-6\n"
    )
    for address, key in (("127.0.0.5", "key-5"), ("127.0.0.6", "key-6")):
        (hop,) = resolve_route(
            SshSettings(
                host=address, port=2222, user="etdevice", ssh_config=config, config_commands=False
            )
        )
        assert hop.identity_files == (tmp_path / key,)


def test_an_emulated_device_goes_on_a_lab_address_of_its_kind_and_a_real_address(capsys):
    from harness.emulators.lab_board import LabAddressError, parse_lab_address, serve_for_lab
    from harness.profiles.device_profile import load_profile

    assert serve_for_lab(load_profile("host"), "127.0.0.5") == 2  # nothing to serve
    assert "a lab address serves ssh, serial, adb devices" in capsys.readouterr().err
    with pytest.raises(LabAddressError, match="--lab-address: '-oProxyCommand=x' starts with '-'"):
        serve_for_lab(load_profile("ssh-emu"), "-oProxyCommand=x")
    assert parse_lab_address("127.0.0.5:7001") == ("127.0.0.5", 7001)
    assert parse_lab_address("[::1]:7001") == ("::1", 7001)
    assert parse_lab_address("lab-host") == ("lab-host", None)
    with pytest.raises(LabAddressError, match="--lab-address: "):
        parse_lab_address("127.0.0.5:99999")


def test_lab_holdings_are_one_line_each_and_read_in_acquisition_order(tmp_path):
    from harness.results import lab_holdings

    assert lab_holdings.read(tmp_path) == []
    later = {"place": "lab-b", "acquired_at": 20.5, "released_at": 30.0}
    earlier = {"place": "lab-a", "acquired_at": 10.25, "released_at": 19.0}
    lab_holdings.record(tmp_path, later)
    lab_holdings.record(tmp_path, earlier)
    with open(tmp_path / lab_holdings.HOLDINGS_FILE, "a") as cut:
        cut.write('{"place": "lab-c", "acq')  # a process killed in its write
    assert lab_holdings.read(tmp_path) == [earlier, later]


def test_lab_holdings_skip_lines_that_are_not_holdings(tmp_path):
    from harness.results import lab_holdings

    kept = {"place": "lab-a", "acquired_at": 10.25, "released_at": 19.0}
    lab_holdings.record(tmp_path, kept)
    with open(tmp_path / lab_holdings.HOLDINGS_FILE, "ab") as odd:
        odd.write(b'{"place": "x", "acquired_at": "soon"}\n{"acquired_at": true}\n')
        odd.write(b'{"acquired_at": NaN}\n[1, 2]\n\xff\xfe\n' + b"[" * 100_000 + b"\n")
    assert lab_holdings.read(tmp_path) == [kept]
