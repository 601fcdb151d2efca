"""Hostile device profiles: refused when read, with one line naming file, field, limit and fix.

Profiles come from shared lab repositories (docs/security.md): nothing in one may run a
command, reach an ssh option or an adb/serial argument unchecked, or point the harness
at a system directory. Every case here also checks that nothing ran: marker files that
a hostile value would create stay absent.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.devices.bring_up import check_transport_settings
from harness.devices.ssh import ssh_settings
from harness.profiles.device_profile import ProfileError, load_profile
from harness.transport.base import DeviceUnavailable
from harness.transport.ssh import SshConfigError, SshSettings, SshTransport, resolve_route
from harness.untrusted.value_rules import (
    ValueRuleError,
    check_host,
    check_user,
    check_word,
    check_work_dir,
)

REPO = Path(__file__).resolve().parents[2]
SAMPLE_MAP = REPO / "examples" / "maps" / "sample.yaml"
PROXY = "ProxyCommand socat - TCP:%h:%p\n"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of the test's own, so ~/.ssh/config is one the test writes."""
    path = tmp_path / "home"
    (path / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(path))
    return path


def write_profile(tmp_path: Path, transport: str, extra: str = "") -> Path:
    path = tmp_path / "hostile.yaml"
    path.write_text(f"transport: {transport}\n{extra}", encoding="utf-8")
    return path


def refusal(path: Path) -> str:
    """The ProfileError reading and checking ``path`` gives; it must be one line."""
    with pytest.raises(ProfileError) as refused:
        check_transport_settings(load_profile(str(path)))
    message = str(refused.value)
    assert "\n" not in message and len(message) < 600, message
    assert str(path) in message
    return message


# -- the finding: a host name that a ProxyCommand would hand to a shell -----------


def _hostile_host(tmp_path: Path, marker: Path, ssh_config: str = "") -> Path:
    return write_profile(
        tmp_path,
        f"{{kind: ssh, host: '$(touch {marker})127.0.0.1', port: 9{ssh_config}}}",
    )


@pytest.mark.parametrize("where", ["home", "profile"])
def test_shell_in_the_host_never_reaches_a_proxy_command(home, tmp_path, where):
    """~/.ssh/config (read by default) or a config the profile names, both with a
    ProxyCommand using %h: the host is refused before any config is looked up."""
    marker = tmp_path / "MARKER"
    config = home / ".ssh" / "config" if where == "home" else tmp_path / "lab_ssh_config"
    config.write_text(f"Host *\n    {PROXY}")
    named = f", ssh_config: {config}" if where == "profile" else ""
    message = refusal(_hostile_host(tmp_path, marker, named))
    assert "transport.host: '$(touch" in message
    assert "holds '$'" in message and "give a host name" in message
    assert not marker.exists()


def _run(argv: list[str], home: Path, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home)}
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_send_doctor_and_pytest_refuse_the_hostile_host(home, tmp_path):
    marker = tmp_path / "MARKER"
    (home / ".ssh" / "config").write_text(f"Host *\n    {PROXY}")
    profile = _hostile_host(tmp_path, marker)
    cli = [sys.executable, "-m", "harness.cli"]
    runs = {
        "send": _run([*cli, "send", str(SAMPLE_MAP), "--device", str(profile)], home),
        "doctor": _run([*cli, "doctor", "--device", str(profile)], home),
        "pytest": _run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-q",
                f"--device={profile}",
                "suites/test_dispatch.py",
            ],
            home,
        ),
    }
    for command, done in runs.items():
        said = (done.stderr + done.stdout).strip()
        assert done.returncode in (2, 4), f"{command}: exit {done.returncode}: {said}"
        lines = [line for line in said.splitlines() if "transport.host" in line]
        assert len(lines) == 1, f"{command}: {said}"
        assert f"{profile}: transport.host: '$(touch" in lines[0] and "holds '$'" in lines[0]
        assert "Traceback" not in said
        assert not marker.exists(), f"{command} ran the profile's command"


# -- ProxyCommand gets the profile's own port and user ------------------------------------


def test_proxy_command_expands_the_profile_port_and_user(home, tmp_path):
    (home / ".ssh" / "config").write_text(f"Host *\n    {PROXY}")
    profile = load_profile(str(write_profile(tmp_path, "{kind: ssh, host: 127.0.0.1, port: 9}")))
    route = resolve_route(ssh_settings(profile))
    assert route[-1].proxy_command == "socat - TCP:127.0.0.1:9"
    assert route[-1].port == 9


def test_the_proxy_command_that_runs_sees_the_profile_port(home, tmp_path):
    """Not just the text: the ProxyCommand the transport starts gets %h %p %r from the
    profile (before the fix, %p was 22 whatever the profile said)."""
    seen = tmp_path / "seen"
    (home / ".ssh" / "config").write_text(
        f"Host board\n    HostName 127.0.0.1\n    Port 2222\n"
        f"    ProxyCommand sh -c 'echo %h %p %r > {seen}'\n"
    )
    transport = SshTransport(
        SshSettings(
            host="board", port=9, user="et", known_hosts=tmp_path / "none", connect_timeout=5
        )
    )
    with pytest.raises(DeviceUnavailable):
        transport.connect()  # the proxy exits at once: nothing to log in to
    assert seen.read_text() == "127.0.0.1 9 et\n"
    without_port = resolve_route(SshSettings(host="board"))
    assert without_port[-1].port == 2222  # no port in the profile: the config's, as ssh does
    assert "echo 127.0.0.1 2222 " in (without_port[-1].proxy_command or "")


def test_a_profile_named_config_may_not_run_commands(home, tmp_path):
    marker = tmp_path / "MARKER"
    config = tmp_path / "lab_ssh_config"
    for text in (
        f"Host board\n    ProxyCommand touch {marker}\n",
        f'Match exec "touch {marker}"\n    User et\n',
        f'Host x\nMatch host board !exec="touch {marker}"\n    Port 2\n',
        # paramiko splits Match criteria with shlex: quotes may not hide the keyword
        f'Match "exec" "touch {marker}"\n    User et\n',
        f"Match 'exec' 'touch {marker}'\n    User et\n",
        f'Match e"x"ec "touch {marker}"\n    User et\n',
        f'Match "!exec" "touch {marker}"\n    User et\n',
        f'Match = exec "touch {marker}"\n    User et\n',
    ):
        config.write_text(text)
        profile = write_profile(tmp_path, f"{{kind: ssh, host: board, ssh_config: {config}}}")
        message = refusal(profile)
        assert "transport.ssh_config:" in message and "runs a command" in message
        assert "~/.ssh/config" in message  # the fix: where such a line may live
        assert not marker.exists()


def test_a_line_paramiko_cannot_read_is_named_by_its_number_not_its_text(home, tmp_path):
    """The config a profile names could be any file (a secret's line would reach CI logs)."""
    secret = tmp_path / "shadow"
    secret.write_text("Host board\n    User et\nroot:$y$j9T$SECRET:20228:0:99999:7:::\n")
    profile = write_profile(tmp_path, f"{{kind: ssh, host: board, ssh_config: {secret}}}")
    message = refusal(profile)
    assert f"ssh config {secret} line 3 is not a 'Keyword value' line" in message, message
    assert "SECRET" not in message and "root:" not in message


# -- values the ssh config adds are held to the same rules ---------------------------------


@pytest.mark.parametrize(
    "lines, expected",
    [
        ("HostName $(touch MARKER)x", r"HostName: '\$\(touch MARKER\)x' holds '\$'"),
        ("HostName -oProxyCommand=x", "HostName: '-oProxyCommand=x' starts with '-'"),
        ("User a;touch MARKER", "User: 'a;touch MARKER' holds ';'"),
        ("User -l", "User: '-l' starts with '-'"),
        ("Port 0", "Port: must be a TCP port, 1..65535; got 0"),
        ("Port 70000", "Port: must be a TCP port, 1..65535; got 70000"),
        ("Port 22x", "Port: port '22x' is not a number 1..65535"),
        ("ProxyJump $(touch MARKER)", r"ProxyJump: '\$\(touch MARKER\)' holds '\$'"),
        ("ProxyJump -J", "ProxyJump: '-J' starts with '-'"),
        ("ProxyJump u@jump:0", "ProxyJump: must be a TCP port, 1..65535; got 0"),
        ("ProxyJump " + ",".join(["j"] * 30_000), "30000 ProxyJump entries; at most 8"),
        ("UserKnownHostsFile ~et-no-user/kh", "UserKnownHostsFile: .* named after ~ has no home"),
        ("IdentityFile ~et-no-user/id", "IdentityFile: .* named after ~ has no home"),
    ],
)
def test_ssh_config_values_are_checked(home, tmp_path, lines, expected):
    config = tmp_path / "lab_ssh_config"
    config.write_text(f"Host board\n    {lines}\n")
    message = refusal(write_profile(tmp_path, f"{{kind: ssh, host: board, ssh_config: {config}}}"))
    assert "transport.ssh_config: ssh config" in message and "Host board" in message
    assert re.search(expected, message), message
    assert not (tmp_path / "MARKER").exists()


def test_a_tilde_in_the_config_is_expanded_as_openssh_does(home):
    """paramiko read ~root/k as $HOME + "root/k", and ~ anywhere in IdentityFile and
    ProxyCommand as $HOME: now ~ and ~user lead an IdentityFile as in ssh(1), and the
    ProxyCommand's shell expands its own."""
    (home / ".ssh" / "config").write_text(
        "Host board\n    IdentityFile ~/k\n    IdentityFile ~root/k\n"
        "    IdentityFile /keys/a~b\n    ProxyCommand socat - FILE:~/sock\n"
    )
    (hop,) = resolve_route(SshSettings(host="board"))
    root = Path(os.path.expanduser("~root"))
    assert hop.identity_files == (home / "k", root / "k", Path("/keys/a~b"))
    assert hop.proxy_command == "socat - FILE:~/sock"


def test_a_config_holding_the_characters_that_hide_tilde_and_percent_is_refused(home, tmp_path):
    """``~`` and ``%%`` are hidden from paramiko as U+E001 and U+E000 while it reads the
    config: the same characters written in the config would come back as ``~`` and ``%%``."""
    (home / ".ssh" / "config").write_text("Host board\n    IdentityFile /keys/\ue001k\n")
    message = refusal(write_profile(tmp_path, "{kind: ssh, host: board}"))
    assert "transport.host: ssh config" in message and "line 2 holds U+E000 or U+E001" in message


def test_home_config_values_are_checked_too(home, tmp_path):
    (home / ".ssh" / "config").write_text("Host board\n    HostName a|b\n")
    message = refusal(write_profile(tmp_path, "{kind: ssh, host: board}"))
    assert "transport.host: ssh config" in message and "HostName: 'a|b' holds '|'" in message


def _fifo(folder: Path) -> Path:
    """A FIFO made in ``folder``."""
    os.mkfifo(folder / "fifo")
    return folder / "fifo"


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda d: d / "absent", "does not exist; fix the path in transport.ssh_config"),
        (lambda d: Path("/dev/zero"), "not a regular file"),
        (_fifo, "not a regular file"),
        (lambda d: (d / "big").write_text("# x\n" * 20_000) and d / "big", "limit 65536 bytes"),
        (lambda d: (d / "bin").write_bytes(b"Host \xff\n") and d / "bin", "not UTF-8"),
    ],
)
def test_unusable_ssh_config_files(home, tmp_path, make, expected):
    """Missing, special (a FIFO would block, /dev/zero never ends) or oversized."""
    path = make(tmp_path)
    message = refusal(write_profile(tmp_path, f"{{kind: ssh, host: board, ssh_config: {path}}}"))
    assert "transport.ssh_config: ssh config" in message and expected in message


# -- profile fields -------------------------------------------------------------------------

SSH = "{kind: ssh, host: board, %s}"
ADB = "{kind: adb, %s}"
SERIAL = "{kind: serial, %s}"
LOCAL = "{kind: local}"


@pytest.mark.parametrize(
    "transport, extra, field, expected",
    [
        (SSH % "user: 'et;touch MARKER'", "", "transport.user", "holds ';'"),
        (SSH % "user: -oProxyCommand", "", "transport.user", "starts with '-'"),
        (
            "{kind: ssh, host: '-oProxyCommand=touch MARKER'}",
            "",
            "transport.host",
            "starts with '-'",
        ),
        ("{kind: ssh, host: 'a b'}", "", "transport.host", "holds whitespace"),
        ('{kind: ssh, host: "a\\tb"}', "", "transport.host", "control byte"),
        ("{kind: ssh, host: '::1%eth0'}", "", "transport.host", "zone ids"),
        ("{kind: ssh, host: ''}", "", "transport.host", "must be a non-empty string"),
        (SSH % "port: 0", "", "transport.port", "1..65535; got 0"),
        (SSH % "port: 70000", "", "transport.port", "1..65535; got 70000"),
        (SSH % "port: -1", "", "transport.port", "1..65535; got -1"),
        (SSH % "proxy_jump: 'u@j;touch MARKER'", "", "transport.proxy_jump", "holds ';'"),
        (SSH % "proxy_jump: 'j:0'", "", "transport.proxy_jump", "1..65535; got 0"),
        (
            SSH % f"proxy_jump: '{','.join(['j'] * 9)}'",
            "",
            "transport.proxy_jump",
            "9 ProxyJump entries; at most 8",
        ),
        (
            SSH % "keepalive_interval: 1000000000000",
            "",
            "transport.keepalive_interval",
            "at most 86400",
        ),
        (ADB % "serial: -a", "", "transport.serial", "starts with '-'"),
        (ADB % "serial: '$(touch MARKER)'", "", "transport.serial", "holds '$'"),
        (ADB % "serial: 'x y'", "", "transport.serial", "holds whitespace"),
        (ADB % "server_host: 'h;touch MARKER'", "", "transport.server_host", "holds ';'"),
        (ADB % "server_host: -L", "", "transport.server_host", "starts with '-'"),
        (ADB % "server_port: 70000", "", "transport.server_port", "1..65535"),
        (ADB % "connect: 'h:0'", "", "transport.connect", "1..65535; got 0"),
        (ADB % "connect: '-h:5555'", "", "transport.connect", "starts with '-'"),
        (ADB % "connect: '[::1]:99999'", "", "transport.connect", "1..65535; got 99999"),
        (ADB % "adb: /bin/sh", "", "transport.adb", "set ET_HARNESS_ADB"),
        (ADB % "adb: /proc/self/cwd/devices/adb", "", "transport.adb", "may not choose"),
        (ADB % "adb: adb", "", "transport.adb", "may not choose the adb client"),
        (SERIAL % "port: 'spy:///dev/ttyUSB0?file=/tmp/x'", "", "transport.port", "is relative"),
        (SERIAL % "port: 'loop://'", "", "transport.port", "is relative"),
        (SERIAL % "port: dev/ttyACM0", "", "transport.port", "is relative"),
        (SERIAL % "url: 'spy://socket://h:1'", "", "transport.url", "is not socket://HOST:PORT"),
        (SERIAL % "url: 'socket://h;touch MARKER:1'", "", "transport.url", "holds ';'"),
        (SERIAL % "url: 'socket://127.0.0.1:0'", "", "transport.url", "1..65535; got 0"),
        (
            SERIAL % "url: 'rfc2217://lab:4001?logging=debug'",
            "",
            "transport.url",
            "is not a number",
        ),
        (
            SERIAL % "port: /dev/ttyACM0, baudrate: 1000000000000000000000",
            "",
            "transport.baudrate",
            "outside 1..20000000",
        ),
        (
            SERIAL % "port: /dev/ttyACM0, boot_timeout: 100000000",
            "",
            "transport.boot_timeout",
            "at most 86400",
        ),
        (LOCAL, "emulator: ssh-emu\n", "emulator", "ssh-emu emulates a device reached over ssh"),
        (LOCAL, "emulator: mcu-emu\n", "emulator", "set transport.kind: serial"),
        (ADB % "serial: x", "emulator: ssh-emu\n", "emulator", "not over adb"),
        (LOCAL, "name: ../../../tmp/evil\n", "name", "starts with '.'"),
        (LOCAL, "name: 'a/b'\n", "name", "holds '/'"),
        (LOCAL, "name: ''\n", "name", "must be a non-empty string"),
        (
            LOCAL,
            "timeouts: {case: 100000000000000000000000000000}\n",
            "timeouts.case",
            "at most 86400 (24 h)",
        ),
        (LOCAL, "timeouts: {connect: 86401}\n", "timeouts.connect", "lower it"),
        (LOCAL, "timeouts: {command: 0}\n", "timeouts.command", "must be seconds > 0"),
        # a NUL byte: no path, argv word or environment value can hold one
        (SSH % "port: 22", 'agent: {prebuilt: "a\\0b"}\n', "agent.prebuilt", "NUL byte"),
        (SSH % "port: 22", 'agent: {sdk: "a\\0b"}\n', "agent.sdk", "NUL byte"),
        (SSH % "port: 22", 'agent: {env: {A: "x\\0y"}}\n', "agent.env.A", "NUL byte"),
        (SSH % "port: 22", 'agent: {wrapper: ["a\\0b"]}\n', "agent.wrapper[0]", "NUL byte"),
        (SSH % "port: 22", 'tags: ["a\\0b"]\n', "tags[0]", "NUL byte"),
        # a path no file system call takes: a lone surrogate, a name over NAME_MAX
        (LOCAL, 'agent: {sdk: "/opt/\\ud800"}\n', "agent.sdk", "(a lone surrogate)"),
        (LOCAL, f"work_dir: /tmp/{'w' * 300}\n", "work_dir", "a name of 300 bytes, longer"),
        (LOCAL, f"agent: {{prebuilt: /tmp/{'p' * 256}}}\n", "agent.prebuilt", "than the 255"),
        # a ~user of no user (pathlib raises RuntimeError for it)
        (SSH % "port: 22", "agent: {sdk: ~et-no-user/sdk}\n", "agent.sdk", "after ~ has no home"),
        (SSH % "known_hosts: ~et-no-user/kh", "", "transport.known_hosts", "write the path out"),
        # text a listing shows: one printable line (et-harness devices prints it)
        (
            LOCAL,
            'description: "\\e]0;pwned\\a\\e[2JRED\\nsecond line"\n',
            "description",
            "holds '\\x1b'; write one line of printable text, at most 300 characters",
        ),
        (LOCAL, f"description: {'d' * 301}\n", "description", "longer than 300 characters"),
        # a name the file gives is quoted escaped: it may not rewrite the terminal
        (
            LOCAL,
            '"\\e[2J\\nfake line\\rX": 1\n',
            "'\\x1b[2J\\nfake line\\rX'",
            "unknown field",
        ),
        # ... and of any type, in the local transport, which takes no field
        ("{kind: local, 1: 1, a: 2}", "", "transport.1", "the local transport takes none"),
        (
            '{kind: local, "a\\e[2J\\nb": 1}',
            "",
            "transport.'a\\x1b[2J\\nb'",
            "unknown field; the local transport takes none",
        ),
        (
            SSH % "port: 22",
            'agent: {env: {"A\\e[2J\\nB": x}}\n',
            "agent.env.'A\\x1b[2J\\nB'",
            "not a valid environment variable name",
        ),
    ],
)
def test_hostile_fields_are_refused(tmp_path, transport, extra, field, expected):
    message = refusal(write_profile(tmp_path, transport, extra))
    assert f"hostile.yaml: {field}: " in message and expected in message, message
    assert not (tmp_path / "MARKER").exists() and not Path("MARKER").exists()


def test_a_symlink_loop_or_an_overlong_profile_path_is_refused_not_a_crash(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    message = refusal(write_profile(tmp_path, LOCAL, f"agent: {{sdk: {loop}}}\n"))
    assert f"agent.sdk: {loop} is not a trusted ExecuTorch prefix" in message, message
    with pytest.raises(ProfileError, match="holds a name of 305 bytes, longer than the 255"):
        load_profile(f"{tmp_path}/{'d' * 300}.yaml")


def test_an_unknown_field_of_a_megabyte_is_quoted_by_its_start(tmp_path):
    message = refusal(write_profile(tmp_path, LOCAL, f"? {'k' * 900_000}\n: 1\n"))
    assert f"hostile.yaml: '{'k' * 39}...: unknown field" in message, message


def test_a_name_from_the_file_name_is_checked_too(tmp_path):
    path = tmp_path / "my board.yaml"
    path.write_text(f"transport: {LOCAL}\n", encoding="utf-8")
    with pytest.raises(
        ProfileError,
        match=r"my board.yaml: name \(taken from the file name\): "
        r"'my board' holds whitespace; give a name",
    ):
        load_profile(str(path))


@pytest.mark.parametrize(
    "work_dir, expected",
    [
        ("/", "is the file system root"),
        ("''", "must be a non-empty string"),
        ("et-harness", "is relative"),
        ("./et", "is relative"),
        ("/tmp/../etc/x", "not normalised: write '/etc/x'"),
        ("/tmp//x", "not normalised: write '/tmp/x'"),
        ("//tmp/x", "not normalised: write '/tmp/x'"),
        ("/tmp/x/", "not normalised: write '/tmp/x'"),
        ("/tmp/./x", "not normalised"),
        ("/etc", "inside the system directory /etc"),
        ("/usr/lib/et", "inside the system directory /usr"),
        ("/proc/self/cwd", "inside the system directory /proc"),
        ("/lib64/x", "inside the system directory /lib64"),
        ("/system/bin", "inside the system directory /system"),
        ("/var", "is a shared system directory"),
        ("/tmp", "is a shared system directory"),
        ("/root", "is a shared system directory"),
        ("'/tmp/$(touch MARKER)'", "holds '$'"),
        ("'/tmp/a b'", "holds whitespace"),
        ("[/tmp]", "must be a non-empty string"),
    ],
)
def test_work_dir_must_be_an_absolute_normal_non_system_directory(tmp_path, work_dir, expected):
    message = refusal(write_profile(tmp_path, LOCAL, f"work_dir: {work_dir}\n"))
    assert "hostile.yaml: work_dir: " in message and expected in message, message
    assert "give" in message or "write" in message  # every refusal says what to write


@pytest.mark.parametrize(
    "work_dir",
    [
        "/tmp/et-harness",
        "/data/local/tmp/et-harness",
        "/home/etdevice/et-harness",
        "/var/tmp/et",
        "/opt/lab/et_harness-2",
    ],
)
def test_usual_work_dirs_are_accepted(work_dir):
    assert check_work_dir(work_dir) == work_dir


@pytest.mark.parametrize(
    "transport",
    [
        SERIAL % "port: /dev/serial/by-path/pci-0000:00:14.0-usb-0:1:1.0-port0",
        SERIAL % "url: 'rfc2217://lab-host:4001'",
        SERIAL % "url: 'socket://[::1]:4321'",
        ADB % "serial: 'adb-38141FDJH000XY-abc._adb-tls-connect._tcp'",
        ADB % "connect: '[::1]:5555'",
        SSH % "user: et.lab, port: 2222, proxy_jump: 'me@bastion.lab:22,[fd00::2]'",
    ],
)
def test_ordinary_transport_fields_pass(tmp_path, monkeypatch, transport):
    monkeypatch.setenv("HOME", str(tmp_path))
    check_transport_settings(load_profile(str(write_profile(tmp_path, transport))))


# -- the rules themselves, for values that never pass through YAML --------------------------


@pytest.mark.parametrize(
    "bad",
    [
        "a\0b",
        "a\x1bb",
        "a\nb",
        "a\x7fb",
        "ünï",
        "a`b`",
        "a'b",
        'a"b',
        "a\\b",
        "a&b",
        "a|b",
        "a>b",
        "a<b",
        "a(b)",
        "a{b}",
        "a,b",
        "a*b",
        "a%p",
        "a~b",
        "[::1]",
        "-a",
    ],
)
def test_hosts_users_and_words_refuse_what_openssh_refuses_and_more(bad):
    checks = [check_host, check_user]
    if bad != "[::1]":  # brackets are fine in an adb serial ([::1]:5555)
        checks.append(lambda value: check_word(value, "a serial"))
    for check in checks:
        with pytest.raises(ValueRuleError) as refused:
            check(bad)
        assert "\n" not in str(refused.value)


def test_long_values_are_quoted_short():
    with pytest.raises(ValueRuleError) as refused:
        check_host("$" + "a" * 100_000)
    assert len(str(refused.value)) < 400


@pytest.mark.parametrize(
    "good", ["rpi5.lab", "board_7", "10.0.0.2", "::1", "fe80::1", "ssh-emu", "A-B.c"]
)
def test_ordinary_hosts_pass(good):
    assert check_host(good) == good


def test_a_huge_known_hosts_file_is_refused_before_paramiko_reads_it(home, tmp_path):
    """paramiko reads a known_hosts file whole; a profile may name any file there."""
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_bytes(b"a" * (5 << 20))
    path = write_profile(tmp_path, f"{{kind: ssh, host: 127.0.0.1, known_hosts: {known_hosts}}}")
    transport = SshTransport(ssh_settings(load_profile(str(path))))
    with pytest.raises(SshConfigError, match=r"known_hosts .*limit 4194304 bytes") as refused:
        transport._login(transport.route[-1], None, None)
    assert refused.value.field == "known_hosts"


@pytest.mark.parametrize("name", ["id_test", "id_test-cert.pub"])
def test_a_huge_identity_file_is_refused_before_paramiko_reads_it(home, tmp_path, name):
    identity = tmp_path / "id_test"
    identity.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (tmp_path / name).write_bytes(b"a" * (1 << 20))
    path = write_profile(tmp_path, f"{{kind: ssh, host: 127.0.0.1, identity_file: {identity}}}")
    transport = SshTransport(ssh_settings(load_profile(str(path))))
    with pytest.raises(SshConfigError, match=rf"identity file .*{name}: .*limit 65536") as refused:
        transport._login(transport.route[-1], None, None)
    assert refused.value.field == "identity_file"


@pytest.mark.parametrize("value", ["always", "yes"])
def test_a_profile_named_config_may_not_canonicalize_host_names(home, tmp_path, value):
    """paramiko makes a DNS query per CanonicalDomains entry while the config is read."""
    config = tmp_path / "lab_ssh_config"
    domains = " ".join(["d.invalid"] * 3000)
    config.write_text(
        f"Host board\n    CanonicalizeHostname {value}\n    CanonicalDomains {domains}\n"
    )
    message = refusal(write_profile(tmp_path, f"{{kind: ssh, host: board, ssh_config: {config}}}"))
    assert f"line 2: 'CanonicalizeHostname {value}' makes DNS queries" in message, message


def test_proxy_command_tokens_are_those_of_openssh(home, tmp_path):
    """%n is the host as given and %% a literal % (paramiko expands neither); a token
    OpenSSH's ProxyCommand does not take is refused, as ssh refuses it."""
    config = home / ".ssh" / "config"
    config.write_text(
        "Host board\n    HostName 127.0.0.1\n"
        "    ProxyCommand socat - TCP:%h:%p,name=%n,pct=100%%h\n"
    )
    route = resolve_route(SshSettings(host="board", port=9))
    assert route[-1].proxy_command == "socat - TCP:127.0.0.1:9,name=board,pct=100%h"
    for token in ("%u", "%d", "%"):
        config.write_text(f"Host board\n    ProxyCommand socat - TCP:%h:%p {token}\n")
        with pytest.raises(SshConfigError, match=f"unknown token '{token}'"):
            resolve_route(SshSettings(host="board"))


def test_a_folded_description_loads(tmp_path):
    """YAML's block scalars end in a line break: that one is not a second line."""
    path = write_profile(tmp_path, LOCAL, "description: >\n  a board\n  on the bench\n")
    assert load_profile(str(path)).description == "a board on the bench\n"
